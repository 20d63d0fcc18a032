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

from harl.buffers.rollout import AgentBatch, minibatch_rows
from harl.policy.actor import Actor
from harl.settings import in_range, kind_field, one_of, positive, setting
from harl.update.objectives.ppo import AgentStats, aggregate_ratio, masked_mean
from harl.update.v_critic import clip_grads


@attrs.frozen
class A2CConfig:
    """``[updater.objective] kind = "a2c"``."""

    kind: str = kind_field("a2c")
    epochs: int = setting(5, "passes over the rollout per agent per iteration", positive())
    minibatches: int = setting(1, "minibatches per pass", positive())
    entropy_coef: float = setting(0.01, "weight of the entropy bonus", in_range(0, None))
    lr: float = setting(5e-4, "actor Adam learning rate", positive())
    adam_eps: float = setting(1e-5, "Adam epsilon", positive())
    max_grad_norm: float = setting(10.0, "gradient-norm clip; 0 disables", in_range(0, None))
    action_aggregation: str = setting("prod", "how per-dimension ratios combine: prod or mean", one_of(("prod", "mean")))


def a2c_loss(ratio: torch.Tensor, advantages: torch.Tensor, factor: torch.Tensor,
             active: torch.Tensor) -> torch.Tensor:
    """The HA-weighted policy-gradient surrogate ``-mean_active[factor r A]`` (all (N, 1))."""
    return -masked_mean(factor * ratio * advantages, active)


class A2CLearner:
    """Updates one actor with A2C steps; ``ratio`` tells the updater how far the policy moved."""

    def __init__(self, actor: Actor, config: A2CConfig, generator: torch.Generator) -> None:
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
                policy_loss = a2c_loss(ratio, mb.advantages, factor[idx], active)
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
