"""Generalised advantage estimation with terminated and truncated kept apart.

On termination the next state's value is zero.  On truncation (a time limit) the value
of the state the episode actually reached is used, so a cut episode keeps its learning
signal.  (HARL's "proper time limits" instead zero the advantage of the truncated step;
bootstrapping from the final state is the estimator that flag stands for.)
"""

from __future__ import annotations

from typing import Protocol

import attrs
import torch

from harl.registry import register
from harl.settings import in_range, kind_field, setting


@attrs.frozen
class GAEConfig:
    """``[returns] kind = "gae"``."""

    kind: str = kind_field("gae")
    gamma: float = setting(0.99, "discount factor", in_range(0, 1))
    lam: float = setting(0.95, "GAE lambda: 0 is one-step TD, 1 is Monte-Carlo", in_range(0, 1))
    proper_time_limits: bool = setting(True, "bootstrap on truncation; false treats a time limit as termination")
    zero_truncated_advantage: bool = setting(
        False, "HARL's use_proper_time_limits: the truncated step's advantage is 0 and its "
        "value target its own prediction (docs/learning-parity.md compares the two)")


def gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor,
        terminated: torch.Tensor, truncated: torch.Tensor, gamma: float, lam: float,
        zero_truncated: bool = False) -> torch.Tensor:
    """Advantages for a rollout of T steps.

    ``rewards``, ``values`` (V(s_t)), ``next_values`` (V of the state reached after step t,
    the final pre-reset state where the episode ended) have shape ``(T, ...)``;
    ``terminated`` and ``truncated`` are boolean ``(T, n_envs)`` and broadcast over any
    trailing agent axis.  ``zero_truncated``: HARL's estimator, the truncated step's
    advantage is 0 (and so adds nothing to the steps before it).
    """
    extra = rewards.dim() - terminated.dim()
    shape = terminated.shape + (1,) * extra
    alive = (~terminated).reshape(shape).to(rewards.dtype)
    cont = (~(terminated | truncated)).reshape(shape).to(rewards.dtype)
    keep = (~truncated).reshape(shape).to(rewards.dtype) if zero_truncated else torch.ones_like(cont)
    deltas = rewards + gamma * next_values * alive - values
    advantages = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = (deltas[t] + gamma * lam * cont[t] * running) * keep[t]
        advantages[t] = running
    return advantages


@attrs.frozen
class ReturnStats:
    mean_advantage: float
    mean_return: float


class RolloutTargets(Protocol):
    """What a returns stage reads of the rollout buffer and how it hands back its results
    (``harl.buffers.rollout.RolloutBuffer``; shapes there)."""

    values: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor

    @property
    def next_values(self) -> torch.Tensor: ...

    def critic_rewards(self) -> torch.Tensor: ...

    def set_targets(self, advantages: torch.Tensor, returns: torch.Tensor) -> None: ...


class GAE:
    def __init__(self, config: GAEConfig) -> None:
        self.config = config

    def compute(self, buffer: RolloutTargets) -> ReturnStats:
        cfg = self.config
        terminated = buffer.terminated
        truncated = buffer.truncated
        if not cfg.proper_time_limits:
            terminated = terminated | truncated
        values = buffer.values[:-1]
        adv = gae(buffer.critic_rewards(), values, buffer.next_values, terminated, truncated,
                  cfg.gamma, cfg.lam, cfg.zero_truncated_advantage)
        returns = adv + values
        buffer.set_targets(adv, returns)
        return ReturnStats(float(adv.mean()), float(returns.mean()))


register("returns", GAEConfig, lambda config, parts: GAE(config), family="on_policy", default=True)
