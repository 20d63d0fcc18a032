"""The update loop shared by the ratio-based objectives (PPO, A2C), and the keys it reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import torch

from harl.buffers.rollout import AgentBatch, minibatch_rows
from harl.policy.on_policy import Actor
from harl.settings import in_range, one_of, positive, setting
from harl.update.common import AgentStats, aggregate_ratio, masked_mean, optimizer_step, ratio_aggregation
from harl.update.fused import FusedStep, adam_defaults

Surrogate = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@attrs.frozen
class SurrogateConfig:
    """The keys of ``[updater.objective]`` that ``SurrogateLearner`` reads, defined once for PPO and
    A2C; each subclass (``field_transformer=own_first``) lists ``kind`` and its own keys first."""

    epochs: int = setting(5, "passes over the rollout per agent per iteration", positive())
    minibatches: int = setting(1, "minibatches per pass", positive())
    entropy_coef: float = setting(0.01, "weight of the entropy bonus", in_range(0, None))
    lr: float = setting(5e-4, "actor Adam learning rate", positive())
    adam_eps: float = setting(1e-5, "Adam epsilon", positive())
    max_grad_norm: float = setting(10.0, "gradient-norm clip; 0 disables", in_range(0, None))
    action_aggregation: str = setting(
        "prod", "how per-dimension ratios combine: prod or mean (a MultiDiscrete's sub-actions always as one joint ratio, as HARL)",
        one_of(("prod", "mean")))


class SurrogateLearner:
    """Adam steps on a ratio-based surrogate (PPO, A2C) over epochs x minibatches of one rollout.

    ``loss(ratio, advantages, factor, active)`` is the objective's surrogate; ``ratio``
    tells the updater how far the policy moved, for the next agent's HA factor.
    """

    def __init__(self, actor: Actor, config: SurrogateConfig, generator: torch.Generator, loss: Surrogate) -> None:
        self.actor = actor
        self.config = config
        self.generator = generator
        self.optimizer = torch.optim.Adam(actor.parameters(), lr=config.lr, eps=config.adam_eps)
        self.base_lr = config.lr
        self.loss = loss
        self.aggregation = ratio_aggregation(actor, config.action_aggregation)
        self.fused: FusedStep | None = None
        """``[updater] compile``: the whole minibatch step as one function (``harl.update.fused``)."""

    def fusable(self) -> str | None:
        """Why this learner cannot take the fused step (``[updater] compile``); None: it can."""
        if getattr(self.actor, "hidden_size", 0):
            return "a recurrent actor's update (its GRU's cuts at episode starts are data-dependent)"
        return adam_defaults(self.optimizer)

    def enable_fused(self, compile: bool = True) -> None:
        """From the next minibatch on, the fused step (``compile``: as one compiled graph; else the same
        function run eagerly, what the tests hold against the eager loop)."""
        self.fused = FusedStep(self.actor, list(self.actor.parameters()), self.optimizer, self._fused_terms,
                               self.config.max_grad_norm, compile, "the actors' update")

    def _fused_terms(self, actor: Actor, *data: Any) -> tuple[torch.Tensor, torch.Tensor]:
        loss, policy_loss, mean_entropy, mean_ratio = self._terms(actor, *data)
        return loss, torch.stack([policy_loss, mean_entropy, mean_ratio]).detach()

    def _terms(self, actor: Actor, obs: torch.Tensor, actions: torch.Tensor, avail: torch.Tensor | None,
               old: torch.Tensor, advantages: torch.Tensor, factor: torch.Tensor, active: torch.Tensor,
               idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(loss, policy loss, mean entropy, mean ratio) of the rows ``idx``: the eager loop's arithmetic."""
        log_probs, entropy = actor.evaluate(obs[idx], actions[idx], None if avail is None else avail[idx])
        ratio = aggregate_ratio(log_probs - old[idx], self.aggregation)
        policy_loss = self.loss(ratio, advantages[idx], factor[idx], active[idx])
        mean_entropy = masked_mean(entropy.unsqueeze(-1), active[idx])
        return policy_loss - self.config.entropy_coef * mean_entropy, policy_loss, mean_entropy, ratio.mean()

    def update(self, batch: AgentBatch, factor: torch.Tensor, epochs: int | None = None) -> AgentStats:
        """``epochs`` passes over ``batch`` (default: the objective's ``epochs``; an interleaved
        update, ``[critic] interleave``, takes one pass per round)."""
        cfg = self.config
        rows: list[torch.Tensor] = []
        for _ in range(cfg.epochs if epochs is None else epochs):
            for idx in minibatch_rows(batch, cfg.minibatches, self.generator):
                if self.fused is not None:
                    fused = self.fused.step(batch.obs, batch.actions, batch.avail, batch.old_log_probs,
                                            batch.advantages, factor, batch.active, idx)
                    if fused is not None:
                        rows.append(torch.cat([fused[0], fused[1].reshape(1)]))
                        continue
                    self.fused = None  # it could not compile: eager from here on
                mb = batch.select(idx)
                log_probs, entropy = self.actor.evaluate(mb.obs, mb.actions, mb.avail, mb.hidden, mb.starts)
                ratio = aggregate_ratio(log_probs - mb.old_log_probs, self.aggregation)
                active = mb.active
                policy_loss = self.loss(ratio, mb.advantages, factor[idx], active)
                mean_entropy = masked_mean(entropy.unsqueeze(-1), active)
                grad_norm = optimizer_step(self.optimizer, policy_loss - cfg.entropy_coef * mean_entropy,
                                           self.actor.parameters(), cfg.max_grad_norm, report_norm=True)
                assert grad_norm is not None
                rows.append(torch.stack([policy_loss.detach(), mean_entropy.detach(),
                                         ratio.detach().mean(), grad_norm.detach()]))
        means = torch.stack(rows).mean(0).tolist()
        return AgentStats(means[0], means[1], means[2], means[3], float(factor.mean()))

    @torch.no_grad()
    def ratio(self, batch: AgentBatch) -> torch.Tensor:
        """(N, 1) new/old probability ratio of the actions in ``batch`` under the current actor."""
        log_probs, _ = self.actor.evaluate(batch.obs, batch.actions, batch.avail, batch.hidden, batch.starts)
        return aggregate_ratio(log_probs - batch.old_log_probs, self.aggregation)
