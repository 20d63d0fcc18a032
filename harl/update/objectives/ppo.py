"""The clipped PPO objective for one agent, weighted by the HA factor.

    loss = -mean_active[ factor * min(r A, clip(r, 1-c, 1+c) A) ] - entropy_coef * mean_active[H]

``r`` is the new/old probability ratio aggregated over action dimensions (``prod``: the
joint likelihood ratio; ``mean``: HARL's gentler alternative).  With ``factor = 1`` this
is MAPPO's objective.
"""

from __future__ import annotations

import attrs
import torch

from harl.buffers.rollout import AgentBatch, minibatch_rows
from harl.policy.actor import Actor
from harl.settings import in_range, kind_field, one_of, positive, setting
from harl.update.v_critic import clip_grads


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
    action_aggregation: str = setting("prod", "how per-dimension ratios combine: prod or mean", one_of(("prod", "mean")))


def aggregate_ratio(log_ratio: torch.Tensor, how: str) -> torch.Tensor:
    """(N, k) per-dimension log-ratios -> (N, 1) ratio, by ``prod`` or ``mean`` of exp."""
    if how == "prod":
        return log_ratio.sum(-1, keepdim=True).exp()
    return log_ratio.exp().mean(-1, keepdim=True)


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


class PPOLearner:
    """Updates one actor with PPO; ``ratio`` tells the updater how far the policy moved."""

    def __init__(self, actor: Actor, config: PPOConfig, generator: torch.Generator) -> None:
        self.actor = actor
        self.config = config
        self.generator = generator
        self.optimizer = torch.optim.Adam(actor.parameters(), lr=config.lr, eps=config.adam_eps)
        self.base_lr = config.lr

    def update(self, batch: AgentBatch, factor: torch.Tensor) -> AgentStats:
        cfg = self.config
        rows: list[torch.Tensor] = []
        for _ in range(cfg.epochs):
            for idx in minibatch_rows(batch, cfg.minibatches, self.generator):
                mb = batch.select(idx)
                log_probs, entropy = self.actor.evaluate(mb.obs, mb.actions, mb.avail, mb.hidden, mb.starts)
                ratio = aggregate_ratio(log_probs - mb.old_log_probs, cfg.action_aggregation)
                active = mb.active
                policy_loss = ppo_loss(ratio, mb.advantages, factor[idx], active, cfg.clip)
                mean_entropy = masked_mean(entropy.unsqueeze(-1), active)
                self.optimizer.zero_grad(set_to_none=True)
                (policy_loss - cfg.entropy_coef * mean_entropy).backward()
                grad_norm = clip_grads(self.actor.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                rows.append(torch.stack([policy_loss.detach(), mean_entropy.detach(),
                                         ratio.detach().mean(), grad_norm.detach()]))
        means = torch.stack(rows).mean(0).tolist()
        return AgentStats(means[0], means[1], means[2], means[3], float(factor.mean()))

    @torch.no_grad()
    def ratio(self, batch: AgentBatch) -> torch.Tensor:
        """(N, 1) new/old probability ratio of the actions in ``batch`` under the current actor."""
        log_probs, _ = self.actor.evaluate(batch.obs, batch.actions, batch.avail, batch.hidden, batch.starts)
        return aggregate_ratio(log_probs - batch.old_log_probs, self.config.action_aggregation)
