"""The Evaluator: the current policy on separate envs, deterministic by default.

::

    evaluator = Evaluator(config, eval_venv, policy, device, seed)
    if iteration % config.every_iterations == 0:
        stats = evaluator.evaluate()        # mean/std return over `episodes` episodes
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import attrs
import numpy as np
import torch

from harl.envs.protocol import VectorEnv, is_tensor_native
from harl.settings import in_range, one_of, positive, setting


@attrs.frozen
class EvaluatorConfig:
    """``[evaluator]``."""

    every_iterations: int = setting(25, "evaluate every this many iterations (0: never; always at the end)", in_range(0, None))
    episodes: int = setting(20, "episodes per evaluation", positive())
    n_envs: int = setting(10, "evaluation environments stepped together", positive())
    deterministic: bool = setting(True, "take the most likely action instead of sampling")
    absolute_factor: int = setting(
        0, "when a run has spent its budget: re-evaluate its best kept checkpoint on this many times `episodes` "
        "episodes into absolute_metric.json (the protocol's absolute metric uses 10; 0: off)", in_range(0, None))
    counting: str = setting(
        "per_env", 'which episodes count: "per_env" (each env gives its share of `episodes`, the first '
        'ones it finishes, so long and short episodes weigh as they occur) or "first_finished" (HARL: '
        "the first episodes to end in any env, all of those ending on the last step; where lengths "
        "vary, short episodes end first and the mean leans towards them)",
        one_of(("per_env", "first_finished")))
    team: str = setting(
        "", "a pipeline with [teams]: evaluate this learning team alone, in envs of [env] with [evaluator.env]'s "
        "keys changed, whose agents are the team's (SMAX's allies against its heuristic enemy: a fixed opponent "
        "the team never trained against); empty: every team in the world, as trained")
    env: dict[str, Any] = setting(
        factory=dict, doc='with team: the [env] keys that differ for the evaluation envs, e.g. {enemy = "heuristic"}')


@attrs.frozen
class EvalStats:
    """One evaluation: mean and std of the episodes' returns, mean length, count, env metrics."""

    mean_return: float
    std_return: float
    mean_length: float
    episodes: int
    metrics: dict[str, float]
    """Means of env-specific episode numbers (win rate, forward velocity, ...)."""
    returns: tuple[float, ...] = ()
    """Each episode's return, in the order the episodes counted (the absolute metric keeps them)."""
    infos: tuple[dict[str, Any], ...] = ()
    """Each episode's own numbers (``return``, ``length``, env metrics), in that order: confidence
    intervals of a metric (``harl eval --against``'s win rates and each team's return)."""


def summarize_episodes(episodes: list[dict[str, Any]]) -> EvalStats:
    returns = np.array([e["return"] for e in episodes], dtype=np.float64)
    lengths = np.array([e["length"] for e in episodes], dtype=np.float64)
    keys = sorted({k for e in episodes for k, v in e.items() if not isinstance(v, str)} - {"return", "length"})
    # (an env's words, SMAX's ``winner``, are not numbers to average)
    metrics = {k: float(np.mean([e[k] for e in episodes if k in e])) for k in keys}
    return EvalStats(float(returns.mean()), float(returns.std()), float(lengths.mean()),
                     len(episodes), metrics, tuple(float(r) for r in returns), tuple(episodes))


class ActingPolicy(Protocol):
    """What evaluation, rendering and the population ask of a policy, every family alike::

        hidden = policy.initial_hidden(n_envs, device)          # None: nothing carried (feed-forward)
        actions, hidden = policy.act(obs, avail, deterministic, hidden=hidden, starts=starts)

    ``act`` returns the state to pass to the next step (GRU states, and a value-family policy's
    previous actions) and changes nothing in place: the caller carries it forward.  ``starts``
    ``(n_envs,)`` is 1 where this step begins an episode; the policy restarts those rows' state.
    """

    def initial_hidden(self, n_envs: int, device: Any) -> Any: ...

    def act(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
            deterministic: bool = True, hidden: Any = None, starts: torch.Tensor | None = None
            ) -> tuple[list[torch.Tensor], Any]: ...


class Evaluator:
    def __init__(self, config: EvaluatorConfig, venv: VectorEnv, policy: ActingPolicy,
                 device: torch.device, seed: int) -> None:
        self.config = config
        self.venv = venv
        self.policy = policy
        self.device = device
        self.seed: int | None = seed
        self.native = is_tensor_native(venv)
        """The env takes and returns torch tensors (VMAS): actions go in as they are."""

    def state_dict(self) -> dict[str, Any]:
        """The pending first seed and the eval envs' RNG states: evaluations continue their streams."""
        return {"seed": self.seed, "rng": self.venv.get_rng_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.seed = state["seed"]
        self.venv.set_rng_state(state["rng"])

    @torch.no_grad()
    def evaluate(self, episodes: int | None = None) -> EvalStats:
        wanted = episodes or self.config.episodes
        obs, _, avail = self.venv.reset(seed=self.seed)
        self.seed = None  # later evaluations continue the envs' random streams
        done: list[dict[str, Any]] = []
        hidden = self.policy.initial_hidden(self.venv.n_envs, self.device)  # None: feed-forward
        starts = torch.ones(self.venv.n_envs, device=self.device)
        count = _PerEnvCount(self.venv.n_envs, wanted) if self.config.counting == "per_env" else None
        while len(done) < wanted:
            obs_t = [torch.as_tensor(o, device=self.device) for o in obs]
            avail_t = None if avail is None else [torch.as_tensor(a, device=self.device) for a in avail]
            actions, hidden = self.policy.act(obs_t, avail_t, deterministic=self.config.deterministic,
                                              hidden=hidden, starts=starts)
            step = self.venv.step(actions if self.native else [a.cpu().numpy() for a in actions])
            obs, avail = step.obs, step.avail
            starts = torch.as_tensor(step.terminated | step.truncated, dtype=torch.float32, device=self.device)
            done.extend(step.episode_infos if count is None else count.take(starts, step.episode_infos))
        return summarize_episodes(done)

    def close(self) -> None:
        self.venv.close()


class _PerEnvCount:
    """Env ``k`` contributes its first ``quota[k]`` episodes (the ``wanted`` split evenly over the envs).

    Counting the first episodes to end anywhere under-counts long ones: with one env in a
    900-step episode the others finish many short ones meanwhile.
    """

    def __init__(self, n_envs: int, wanted: int) -> None:
        self.quota = [wanted // n_envs + (k < wanted % n_envs) for k in range(n_envs)]
        self.taken = [0] * n_envs

    def take(self, ended: torch.Tensor, infos: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The episodes to keep of one step's ``infos`` (one per ended env, in env order)."""
        envs = ended.nonzero().flatten().tolist()  # no numpy: tensor-native envs stay on their device
        if len(envs) != len(infos):  # episodes cut short by a restarted worker carry no info
            return []
        keep = [info for k, info in zip(envs, infos) if self.taken[k] < self.quota[k]]
        for k in envs:
            self.taken[k] += 1
        return keep
