"""An objective of your own: PPO with an adaptive KL penalty instead of the clip.

    loss = -mean_active[ factor * r * A ] + beta * mean_active[ (r - 1) - log r ]

``(r - 1) - log r`` estimates KL(old || new) from the probability ratio alone.  After each
agent's update ``beta`` doubles when the measured KL exceeds ``1.5 * kl_target`` and halves
below ``kl_target / 1.5`` (the PPO paper's adaptive-penalty variant).  It runs in harl's
shared epochs x minibatches loop (``SurrogateLearner``) and works in the sequential (HA)
and simultaneous (MA) updaters.  Used from a pipeline with
``[updater.objective] kind = "examples.custom_stage.kl_ppo:KLPPOConfig"``.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

from harl.buffers.rollout import AgentBatch
from harl.registry import register
from harl.settings import in_range, one_of, positive, setting
from harl.update.common import AgentStats, masked_mean
from harl.update.objectives.surrogate import SurrogateLearner


@attrs.frozen
class KLPPOConfig:
    """PPO with an adaptive KL penalty (no ratio clip)."""

    kl_target: float = setting(0.01, "the KL(old || new) per update the penalty steers toward", positive())
    beta: float = setting(1.0, "initial penalty weight", positive())
    epochs: int = setting(5, "passes over the rollout per agent per iteration", positive())
    minibatches: int = setting(1, "minibatches per pass", positive())
    entropy_coef: float = setting(0.01, "weight of the entropy bonus", in_range(0, None))
    lr: float = setting(5e-4, "actor Adam learning rate", positive())
    adam_eps: float = setting(1e-5, "Adam epsilon", positive())
    max_grad_norm: float = setting(10.0, "gradient-norm clip; 0 disables", in_range(0, None))
    action_aggregation: str = setting("prod", "how per-dimension ratios combine: prod or mean", one_of(("prod", "mean")))


def kl_estimate(ratio: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    """Mean of ``(r - 1) - log r`` over active samples: a non-negative estimate of KL(old || new)."""
    return masked_mean((ratio - 1) - ratio.log(), active)


def adapt_beta(beta: float, kl: float, target: float) -> float:
    """The PPO paper's rule: double past 1.5x the target, halve below target / 1.5."""
    if kl > 1.5 * target:
        return beta * 2
    if kl < target / 1.5:
        return beta / 2
    return beta


class KLPPOLearner:
    """One agent's learner: the penalised surrogate, then a beta step from the KL it caused."""

    def __init__(self, actor: Any, config: KLPPOConfig, generator: torch.Generator) -> None:
        self.config = config
        self.beta = config.beta
        self.inner = SurrogateLearner(actor, config, generator, self.loss)
        self.optimizer = self.inner.optimizer
        self.base_lr = self.inner.base_lr

    def loss(self, ratio: torch.Tensor, advantages: torch.Tensor, factor: torch.Tensor,
             active: torch.Tensor) -> torch.Tensor:
        return -masked_mean(factor * ratio * advantages, active) + self.beta * kl_estimate(ratio, active)

    def update(self, batch: AgentBatch, factor: torch.Tensor) -> AgentStats:
        stats = self.inner.update(batch, factor)
        kl = float(kl_estimate(self.inner.ratio(batch), batch.active))
        self.beta = adapt_beta(self.beta, kl, self.config.kl_target)
        return stats

    def ratio(self, batch: AgentBatch) -> torch.Tensor:
        return self.inner.ratio(batch)


register("updater.objective", KLPPOConfig, family="on_policy", requires={"critic": "state_values"},
         factory=lambda config, parts, agent: KLPPOLearner(parts.policy.actors[agent], config, parts.generator))
