"""The clipped PPO objective for one agent, weighted by the HA factor.

    loss = -mean_active[ factor * min(r A, clip(r, 1-c, 1+c) A) ] - entropy_coef * mean_active[H]

``r`` is the new/old probability ratio aggregated over action dimensions (``prod``: the
joint likelihood ratio; ``mean``: HARL's gentler alternative).  With ``factor = 1`` this
is MAPPO's objective.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import torch

from harl.policy.actor import Actor
from harl.policy.heads import CategoricalHead

if TYPE_CHECKING:  # surrogate.py imports this module's helpers
    from harl.update.objectives.surrogate import SurrogateLearner
from harl.settings import in_range, kind_field, one_of, positive, setting


@attrs.frozen
class PPOConfig:
    """``[updater.objective] kind = "ppo"``."""

    kind: str = kind_field("ppo")
    clip: float = setting(0.2, "clip range of the probability ratio", in_range(0, 1, low_open=True))
    epochs: int = setting(5, "passes over the rollout per agent per iteration", positive())
    minibatches: int = setting(1, "minibatches per pass", positive())
    entropy_coef: float = setting(0.01, "weight of the entropy bonus", in_range(0, None))
    lr: float = setting(5e-4, "actor Adam learning rate", positive())
    adam_eps: float = setting(1e-5, "Adam epsilon", positive())
    max_grad_norm: float = setting(10.0, "gradient-norm clip; 0 disables", in_range(0, None))
    action_aggregation: str = setting(
        "prod", "how per-dimension ratios combine: prod or mean (a MultiDiscrete's sub-actions always as one joint ratio, as HARL)",
        one_of(("prod", "mean")))


def aggregate_ratio(log_ratio: torch.Tensor, how: str) -> torch.Tensor:
    """(N, k) per-dimension log-ratios -> (N, 1) ratio, by ``prod`` or ``mean`` of exp."""
    if how == "prod":
        return log_ratio.sum(-1, keepdim=True).exp()
    return log_ratio.exp().mean(-1, keepdim=True)


def ratio_aggregation(actor: Actor, how: str) -> str:
    """The aggregation that makes ``how`` mean what HARL's does for this actor.

    HARL sums a MultiDiscrete's sub-action log-probs into one joint column before it
    aggregates, so its ``mean`` there is the joint ratio, i.e. ``prod``; a Box keeps one
    column per dimension and ``mean`` averages their ratios.
    """
    return "prod" if isinstance(actor.head, CategoricalHead) else how


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def ppo_loss(ratio: torch.Tensor, advantages: torch.Tensor, factor: torch.Tensor,
             active: torch.Tensor, clip: float) -> torch.Tensor:
    """The HA-weighted clipped surrogate, averaged over active samples (all (N, 1))."""
    surrogate = torch.min(ratio * advantages, ratio.clamp(1 - clip, 1 + clip) * advantages)
    return -masked_mean(factor * surrogate, active)


@attrs.frozen
class AgentStats:
    """What one agent's update reports (means over its minibatch steps)."""

    policy_loss: float
    entropy: float
    ratio: float
    grad_norm: float
    factor: float
    """Mean of the HA factor this agent was weighted by (1 for MA updates)."""


def ppo_learner(actor: Actor, config: PPOConfig, generator: torch.Generator) -> SurrogateLearner:
    """One agent's PPO learner: the clipped surrogate in the shared epochs x minibatches loop."""
    from harl.update.objectives.surrogate import SurrogateLearner

    return SurrogateLearner(actor, config, generator,
                            lambda ratio, adv, factor, active: ppo_loss(ratio, adv, factor, active, config.clip))
