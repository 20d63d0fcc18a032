"""The MA simultaneous update with agents as a batch dimension (``[policy] batch_agents``).

Agents whose learners are ratio-based (PPO, A2C: ``SurrogateLearner``) with the same settings
and whose actors stack (``harl.nets.stacked``) take each minibatch step together: one batched
forward and backward pass through their stacked parameters, then each agent's own gradient
clip and its own Adam step.  Each agent draws its minibatch permutations from the generator
as the per-agent loop does, in agent order, so a group that holds every agent sees the loop's
minibatches; the steps agree with the loop's to float rounding (``tests/policy/test_batched.py``).
Agents that do not stack are updated alone, after the groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from harl.buffers.rollout import AgentBatch, minibatch_rows
from harl.nets.stacked import StackedActors, group_agents
from harl.update.common import AgentStats, aggregate_ratio, clip_grads, learner_groups, masked_mean
from harl.update.objectives.surrogate import SurrogateLearner

FIELDS = ("obs", "actions", "old_log_probs", "active", "advantages")


def _key(learner: Any) -> Any:
    return (learner.config, learner.aggregation) if isinstance(learner, SurrogateLearner) else None


class BatchedSimultaneous:
    """``simultaneous_update`` of ``learners`` (one per agent) with stackable agents grouped."""

    def __init__(self, learners: Sequence[Any]) -> None:
        self.learners = list(learners)
        self.groups = learner_groups(group_agents([getattr(learner, "actor", None) for learner in self.learners]),
                                     self.learners, _key)
        self.stacks = {g[0]: StackedActors([self.learners[i].actor for i in g]) for g in self.groups if len(g) > 1}

    def update(self, batches: Sequence[AgentBatch]) -> dict[int, AgentStats]:
        stats: dict[int, AgentStats] = {}
        batched = [g for g in self.groups if len(g) > 1 and batches[g[0]].hidden is None
                   and len({batches[i].size for i in g}) == 1]
        rows = {i: [minibatch_rows(batches[i], self.learners[i].config.minibatches, self.learners[i].generator)
                    for _ in range(self.learners[i].config.epochs)]
                for i in sorted(i for g in batched for i in g)}
        for group in batched:
            stats.update(self._group([self.learners[i] for i in group], [batches[i] for i in group],
                                     self.stacks[group[0]], [rows[i] for i in group], group))
        for group in self.groups:
            if group not in batched:
                for i in group:
                    stats[i] = self.learners[i].update(batches[i], torch.ones_like(batches[i].active))
        return dict(sorted(stats.items()))

    @staticmethod
    def _group(learners: Sequence[SurrogateLearner], batches: Sequence[AgentBatch], stack: StackedActors,
               rows: Sequence[Sequence[list[torch.Tensor]]], agents: Sequence[int]) -> dict[int, AgentStats]:
        first = learners[0]
        cfg, how = first.config, first.aggregation
        n = len(learners)
        data = {name: torch.stack([getattr(b, name) for b in batches]) for name in FIELDS}
        avail = None if batches[0].avail is None else torch.stack([b.avail for b in batches])  # type: ignore[misc]
        factor = torch.ones_like(data["active"][0])
        agent_axis = torch.arange(n, device=data["obs"].device).unsqueeze(-1)
        records: list[list[torch.Tensor]] = [[] for _ in learners]
        for epoch in range(cfg.epochs):
            for k in range(cfg.minibatches):
                idx = torch.stack([r[epoch][k] for r in rows])
                mb = {name: x[agent_axis, idx] for name, x in data.items()}
                params = stack.params(grad=True)
                log_probs, entropy = stack.evaluate(params, mb["obs"], mb["actions"],
                                                    None if avail is None else avail[agent_axis, idx])
                ratio = aggregate_ratio(log_probs - mb["old_log_probs"], how)
                total: torch.Tensor | None = None
                parts = []
                for a, learner in enumerate(learners):
                    active = mb["active"][a]
                    policy_loss = learner.loss(ratio[a], mb["advantages"][a], factor[idx[a]], active)
                    mean_entropy = masked_mean(entropy[a].unsqueeze(-1), active)
                    loss = policy_loss - cfg.entropy_coef * mean_entropy
                    total = loss if total is None else total + loss
                    parts.append((policy_loss, mean_entropy))
                assert total is not None
                for learner in learners:
                    learner.optimizer.zero_grad(set_to_none=True)
                total.backward()
                for a, learner in enumerate(learners):
                    norm = clip_grads(learner.actor.parameters(), cfg.max_grad_norm)
                    learner.optimizer.step()
                    policy_loss, mean_entropy = parts[a]
                    records[a].append(torch.stack([policy_loss.detach(), mean_entropy.detach(),
                                                   ratio[a].detach().mean(), norm.detach()]))
        out = {}
        for a, agent in enumerate(agents):
            means = torch.stack(records[a]).mean(0).tolist()
            out[agent] = AgentStats(means[0], means[1], means[2], means[3], float(factor.mean()))
        return out
