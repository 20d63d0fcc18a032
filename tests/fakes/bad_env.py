"""A user's custom env (``[env] kind = "python"``) that breaks the protocol in one chosen way.

``make(mode=...)`` builds a 2-agent env (agent 0: Box actions, agent 1: Discrete(4) with
a mask); ``mode = "ok"`` is a valid env, every other mode is one mistake a user makes.
``at`` is the lifetime step from which a step-time fault (NaN, inf, raising) shows.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from harl.envs.protocol import EnvStep

OBS = (2, 3)


class BadEnv:
    n_agents = 2

    def __init__(self, mode: str, at: int, sleep: float) -> None:
        if mode == "ctor_raises":
            raise ValueError("unknown map 'x'")
        self.mode, self.at, self.sleep = mode, at, sleep
        self.observation_spaces = [spaces.Box(-np.inf, np.inf, (n,), np.float32) for n in OBS]
        self.action_spaces = [spaces.Box(-1, 1, (1,), np.float32), spaces.Discrete(4)]
        self.state_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.t = 0
        self.lifetime = 0

    def _obs(self) -> list[np.ndarray]:
        dtype = np.float64 if self.mode == "float64" else np.float32
        obs = [np.full(n, self.t / 10, dtype=dtype) for n in OBS]
        if self.mode == "obs_count":
            return obs[:1]
        if self.mode == "obs_shape":
            obs[1] = np.zeros(5, dtype=np.float32)
        if self.mode == "inf_obs" and self.lifetime >= self.at:
            obs[0][1] = np.inf
        return obs

    def _avail(self) -> Any:
        mask = np.array([1, 1, 1, 0], dtype=np.float32)
        if self.mode == "avail_wrong_len":
            return [None, mask[:3]]
        if self.mode == "avail_box":
            return [np.ones(2, dtype=np.float32), mask]
        return [None, mask]  # the natural way to write "only agent 1 has a mask"

    def _state(self) -> np.ndarray:
        return np.full(4, self.t, dtype=np.float64 if self.mode == "float64" else np.float32)

    def reset(self, seed: int | None = None) -> Any:
        self.t = 0
        if self.mode == "reset_two":
            return self._obs(), self._state()
        return self._obs(), self._state(), self._avail()

    def step(self, actions: Sequence[np.ndarray]) -> Any:
        if self.sleep:
            time.sleep(self.sleep)
        self.t += 1
        self.lifetime += 1
        if self.mode == "raises" and self.lifetime >= self.at:
            raise RuntimeError("the simulator lost its licence")
        if int(np.asarray(actions[1]).item()) == 3:
            raise ValueError("agent 1 took its masked action")
        rewards: Any = np.array([1.0, -float(np.asarray(actions[0]).sum())], dtype=np.float32)
        if self.mode == "reward_shape":
            rewards = np.array([1.0], dtype=np.float32)
        if self.mode == "reward_str":
            rewards = ["good", "bad"]
        if self.mode == "nan_reward" and self.lifetime >= self.at:
            rewards[1] = np.nan
        done = self.t >= 5
        step = EnvStep(self._obs(), self._state(), self._avail(), rewards, False, done)
        if self.mode == "step_tuple":
            return (step.obs, step.state, step.avail, step.rewards, False, done, None, {})
        if self.mode == "step_none":
            return None
        return step

    def close(self) -> None:
        pass


def make(mode: str = "ok", at: int = 1, sleep: float = 0.0) -> BadEnv:
    return BadEnv(mode, at, sleep)


def write_pipeline(path: Path, mode: str = "ok", total_env_steps: int = 40, every: int = 1,
                   env: dict[str, Any] | None = None, **collector: Any) -> Path:
    """A tiny HAPPO pipeline on this env (``mode`` and ``env`` kwargs), 2 envs x 10 steps per iteration."""
    def table(values: dict[str, Any]) -> list[str]:
        return [f"{k} = {v!r}".replace("'", '"').replace("True", "true").replace("False", "false")
                for k, v in values.items()]

    kwargs = ", ".join(table({"mode": mode, **(env or {})}))
    path.write_text("\n".join([
        "[run]", f"total_env_steps = {total_env_steps}", "", "[env]", 'kind = "python"',
        'factory = "tests.fakes.bad_env:make"', f"kwargs = {{ {kwargs} }}", "",
        "[collector]", *table({"rollout_length": 10, "n_envs": 2, **collector}), "",
        "[evaluator]", "episodes = 2", "n_envs = 1", "every_iterations = 0", "",
        "[logging]", "progress = false", "", "[checkpoint]", f"every_iterations = {every}", "",
        "[policy]", "hidden_sizes = [8]", "", "[critic]", "hidden_sizes = [8]", "",
    ]) + "\n")
    return path
