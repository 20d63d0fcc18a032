"""The advantage actor-critic objective for one agent, weighted by the HA factor (HAA2C).

    loss = -mean_active[ factor * r * A ] - entropy_coef * mean_active[H]

``r = π_new / π_old`` is the probability ratio aggregated over action dimensions, as in
PPO but never clipped.  Its gradient at the rollout policy (``r = 1``) is exactly the
policy gradient ``factor · A · ∇log π``; on later epochs and minibatches over the same
rollout the ratio importance-weights it, which is how HARL's HAA2C runs several epochs
of mini-batches.  With ``factor = 1`` this is plain (MA) A2C.
"""

from __future__ import annotations

import attrs
import torch

from harl.policy.on_policy import Actor
from harl.registry import register
from harl.settings import kind_field, own_first
from harl.update.common import masked_mean
from harl.update.objectives.surrogate import SurrogateConfig, SurrogateLearner


@attrs.frozen(field_transformer=own_first)
class A2CConfig(SurrogateConfig):
    """``[updater.objective] kind = "a2c"``."""

    kind: str = kind_field("a2c")


def a2c_loss(ratio: torch.Tensor, advantages: torch.Tensor, factor: torch.Tensor,
             active: torch.Tensor) -> torch.Tensor:
    """The HA-weighted policy-gradient surrogate ``-mean_active[factor r A]`` (all (N, 1))."""
    return -masked_mean(factor * ratio * advantages, active)


def a2c_learner(actor: Actor, config: A2CConfig, generator: torch.Generator) -> SurrogateLearner:
    """One agent's A2C learner: the unclipped surrogate in the shared epochs x minibatches loop."""
    return SurrogateLearner(actor, config, generator, a2c_loss)


register("updater.objective", A2CConfig, family="on_policy", requires={"critic": "state_values"},
         factory=lambda config, parts, agent: a2c_learner(parts.policy.actors[agent], config, parts.generator))
