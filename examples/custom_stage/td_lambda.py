"""A return computer of your own: TD(lambda) returns by the lambda-return recursion.

    G_t = r_t + gamma * V(s_t+1)                                  if the episode was cut here
    G_t = r_t + gamma * ((1 - lam) V(s_t+1) + lam G_t+1)          otherwise (0 past termination)
    A_t = clip(G_t - V(s_t), -advantage_clip, advantage_clip)     (no clip when it is 0)

Unclipped, these are GAE's numbers reached another way (a test checks it); the clip bounds
each advantage the way V-trace bounds its importance weights.  Used from a pipeline with
``[returns] kind = "examples.custom_stage.td_lambda:TDLambdaConfig"``; harl is not edited.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

from harl.registry import register
from harl.returns.gae import ReturnStats
from harl.settings import in_range, setting


@attrs.frozen
class TDLambdaConfig:
    """TD(lambda) returns, optionally with clipped advantages."""

    gamma: float = setting(0.99, "discount factor", in_range(0, 1))
    lam: float = setting(0.95, "lambda: 0 is one-step TD, 1 is Monte-Carlo", in_range(0, 1))
    advantage_clip: float = setting(0.0, "bound on |advantage|; 0 disables", in_range(0, None))


def lambda_returns(rewards: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
                   truncated: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
    """(T, ...) lambda-returns; ``terminated`` / ``truncated`` (T, n_envs) broadcast over agents."""
    shape = terminated.shape + (1,) * (rewards.dim() - terminated.dim())
    alive = (~terminated).reshape(shape).to(rewards.dtype)
    cont = (~(terminated | truncated)).reshape(shape).to(rewards.dtype)
    returns = torch.empty_like(rewards)
    following = next_values[-1]  # past the rollout's end: bootstrap from the value
    for t in range(rewards.shape[0] - 1, -1, -1):
        blend = (1 - lam * cont[t]) * next_values[t] + lam * cont[t] * following
        returns[t] = rewards[t] + gamma * alive[t] * blend
        following = returns[t]
    return returns


class TDLambda:
    """Fills ``buffer.advantages`` and ``buffer.returns`` after each rollout (the ReturnComputer protocol)."""

    def __init__(self, config: TDLambdaConfig) -> None:
        self.config = config

    def compute(self, buffer: Any) -> ReturnStats:
        cfg = self.config
        values = buffer.values[:-1]
        returns = lambda_returns(buffer.critic_rewards(), buffer.next_values, buffer.terminated,
                                 buffer.truncated, cfg.gamma, cfg.lam)
        advantages = returns - values
        if cfg.advantage_clip > 0:
            advantages = advantages.clamp(-cfg.advantage_clip, cfg.advantage_clip)
        buffer.advantages = advantages
        buffer.returns = returns
        return ReturnStats(float(advantages.mean()), float(returns.mean()))


register("returns", TDLambdaConfig, lambda config, parts: TDLambda(config), family="on_policy")
