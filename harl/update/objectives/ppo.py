"""The clipped PPO objective for one agent, weighted by the HA factor.

    loss = -mean_active[ factor * min(r A, clip(r, 1-c, 1+c) A) ] - entropy_coef * mean_active[H]

``r`` is the new/old probability ratio aggregated over action dimensions (``prod``: the
joint likelihood ratio; ``mean``: HARL's gentler alternative).  With ``factor = 1`` this
is MAPPO's objective.
"""

from __future__ import annotations

import attrs
import torch

from harl.policy.on_policy import Actor
from harl.registry import register
from harl.settings import in_range, kind_field, own_first, setting
from harl.update.common import masked_mean
from harl.update.objectives.surrogate import SurrogateConfig, SurrogateLearner


@attrs.frozen(field_transformer=own_first)
class PPOConfig(SurrogateConfig):
    """``[updater.objective] kind = "ppo"``."""

    kind: str = kind_field("ppo")
    clip: float = setting(0.2, "clip range of the probability ratio", in_range(0, 1, low_open=True))


def ppo_loss(ratio: torch.Tensor, advantages: torch.Tensor, factor: torch.Tensor,
             active: torch.Tensor, clip: float) -> torch.Tensor:
    """The HA-weighted clipped surrogate, averaged over active samples (all (N, 1))."""
    surrogate = torch.min(ratio * advantages, ratio.clamp(1 - clip, 1 + clip) * advantages)
    return -masked_mean(factor * surrogate, active)


def ppo_learner(actor: Actor, config: PPOConfig, generator: torch.Generator) -> SurrogateLearner:
    """One agent's PPO learner: the clipped surrogate in the shared epochs x minibatches loop."""
    return SurrogateLearner(actor, config, generator,
                            lambda ratio, adv, factor, active: ppo_loss(ratio, adv, factor, active, config.clip))


register("updater.objective", PPOConfig, family="on_policy", requires={"critic": "state_values"}, default=True,
         factory=lambda config, parts, agent: ppo_learner(parts.policy.actors[agent], config, parts.generator))
