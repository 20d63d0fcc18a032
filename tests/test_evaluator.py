"""The Evaluator counts episodes without leaning towards the short ones (per_env), or as HARL does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from harl.envs.protocol import VectorStep
from harl.evaluator import Evaluator, EvaluatorConfig


class LengthsVectorEnv:
    """Env ``k``'s episodes last ``lengths[k]`` steps and return their length; one agent, no observation."""

    tensor_native = False

    def __init__(self, lengths: list[int]) -> None:
        self.lengths = np.array(lengths)
        self.n_envs = len(lengths)
        self.t = np.zeros(self.n_envs, dtype=np.int64)
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, None]:
        self.t[:] = 0
        return [np.zeros((self.n_envs, 1), np.float32)], np.zeros((self.n_envs, 1), np.float32), None

    def step(self, actions: list[np.ndarray]) -> VectorStep:
        self.t += 1
        ended = self.t >= self.lengths
        infos = [{"return": float(self.t[k]), "length": int(self.t[k])} for k in np.flatnonzero(ended)]
        self.t[ended] = 0
        n = self.n_envs
        obs = [np.zeros((n, 1), np.float32)]
        return VectorStep(obs=obs, state=np.zeros((n, 1), np.float32), avail=None,
                          rewards=np.ones((n, 1), np.float32), terminated=ended, truncated=np.zeros(n, bool),
                          active=np.ones((n, 1), bool), final_state=np.zeros((n, 1), np.float32),
                          episode_infos=infos, final_obs=obs)


class StillPolicy:
    def initial_hidden(self, n_envs: int, device: Any) -> None:
        return None

    def act(self, obs: Any, avail: Any, deterministic: bool = True, hidden: Any = None,
            starts: Any = None) -> tuple[list[torch.Tensor], None]:
        return [torch.zeros(len(obs[0]), 1)], None


def evaluate(lengths: list[int], episodes: int, counting: str) -> list[float]:
    config = EvaluatorConfig(episodes=episodes, n_envs=len(lengths), counting=counting)
    stats = Evaluator(config, LengthsVectorEnv(lengths), StillPolicy(), torch.device("cpu"), seed=0).evaluate()
    return [stats.mean_return, stats.mean_length, stats.episodes]


def test_per_env_takes_each_envs_first_episodes():
    """Env 0 ends every step, env 1 every 9 steps: one episode each, mean (1 + 9) / 2."""
    assert evaluate([1, 9], 2, "per_env") == [5.0, 5.0, 2]
    # 5 episodes over 2 envs: env 0 gives 3 (each 1 step), env 1 gives 2 (each 9): 21 / 5.
    assert evaluate([1, 9], 5, "per_env") == pytest.approx([21 / 5, 21 / 5, 5])


def test_first_finished_is_harls_count_and_leans_short():
    """HARL stops once `episodes` have ended anywhere, keeping all that end on that step."""
    assert evaluate([1, 9], 2, "first_finished") == [1.0, 1.0, 2]
    # Two envs of length 2 and one of 3: step 2 ends two episodes (2 counted), step 3 one (3).
    assert evaluate([2, 2, 3], 3, "first_finished") == pytest.approx([7 / 3, 7 / 3, 3])
    assert evaluate([2, 2, 2], 1, "first_finished") == [2.0, 2.0, 3]  # all ending on the last step


def test_fewer_episodes_than_envs_use_the_first_envs():
    assert evaluate([3, 1, 1], 1, "per_env") == [3.0, 3.0, 1]


def test_close_closes_the_eval_envs():
    venv = LengthsVectorEnv([1])
    Evaluator(EvaluatorConfig(n_envs=1), venv, StillPolicy(), torch.device("cpu"), seed=0).close()
    assert venv.closed


def test_the_stats_keep_each_counted_episodes_return():
    """``EvalStats.returns``: the counted episodes' returns (what the absolute metric pools)."""
    config = EvaluatorConfig(episodes=5, n_envs=2, counting="per_env")
    stats = Evaluator(config, LengthsVectorEnv([1, 9]), StillPolicy(), torch.device("cpu"), seed=0).evaluate()
    assert sorted(stats.returns) == [1.0, 1.0, 1.0, 9.0, 9.0]
    assert stats.mean_return == pytest.approx(np.mean(stats.returns))
