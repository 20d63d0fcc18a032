"""The on-policy update of every member at once: actors (HA-sequential or MA), then critics.

Per member this is ``harl.update.on_policy.OnPolicyUpdater.update``: the same agent order
(drawn from the member's own generator), the same minibatch permutations (its own
generator, drawn in the same sequence), the same surrogate (the member's learner's own
loss), value loss and value normaliser.  What changes is the arithmetic's grouping: at
position ``k`` of the HA order, the members whose ``k``-th agent is ``i`` update agent ``i``
together (one batched call per distinct agent), so each member still updates its own agents
in its own order, each seeing its predecessors' change through its own HA factor.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch

from harl.buffers.rollout import AgentBatch, minibatch_rows
from harl.nets.population import MemberAdam, Stack, learn_steps
from harl.update.common import AgentStats, agent_order, aggregate_ratio, lr_scale, masked_mean, set_lr
from harl.update.on_policy import UpdateStats
from harl.update.v_critic import CriticStats, value_loss

FIELDS = ("obs", "actions", "old_log_probs", "avail", "active", "advantages")
"""An agent batch's tensors, in the order ``actor_update``'s loss takes them."""


def _stacked(batches: Sequence[AgentBatch], name: str) -> torch.Tensor | None:
    first = getattr(batches[0], name)
    return None if first is None else torch.stack([getattr(b, name) for b in batches])


def _rows(x: torch.Tensor | None, rows: torch.Tensor) -> torch.Tensor | None:
    """Row ``rows[s]`` of member ``s``'s samples ``x[s]`` (``rows``: (M, b))."""
    if x is None:
        return None
    return x[torch.arange(x.shape[0], device=x.device).unsqueeze(-1), rows]


def actor_update(learners: Sequence[Any], batches: Sequence[AgentBatch], factors: Sequence[torch.Tensor]
                 ) -> list[tuple[AgentStats, torch.Tensor]]:
    """One agent's update in each of M members (``learners[s]`` is member s's learner of that
    agent): epochs x minibatches of clipped Adam steps; per member its stats and its new/old
    ratio (N, 1) of the batch's actions, for its next agent's HA factor."""
    first = learners[0]
    cfg, surrogate, how = first.config, first.loss, first.aggregation
    stack = Stack([learner.actor for learner in learners])
    adam = MemberAdam([learner.optimizer for learner in learners], stack.modules)
    data = {name: _stacked(batches, name) for name in FIELDS}
    factor = torch.stack(list(factors))

    def loss(call: Any, obs: torch.Tensor, actions: torch.Tensor, old: torch.Tensor, avail: torch.Tensor | None,
             active: torch.Tensor, adv: torch.Tensor, fac: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_probs, entropy = call("evaluate", obs, actions, avail)
        ratio = aggregate_ratio(log_probs - old, how)
        policy_loss = surrogate(ratio, adv, fac, active)
        mean_entropy = masked_mean(entropy.unsqueeze(-1), active)
        return policy_loss - cfg.entropy_coef * mean_entropy, torch.stack(
            [policy_loss.detach(), mean_entropy.detach(), ratio.detach().mean()])

    steps = []
    for _ in range(cfg.epochs):  # each member's permutation from its own generator, as a separate run draws it
        per_member = [minibatch_rows(b, cfg.minibatches, learner.generator) for b, learner in zip(batches, learners)]
        for k in range(cfg.minibatches):
            rows = torch.stack([idx[k] for idx in per_member])
            steps.append((*(_rows(data[n], rows) for n in FIELDS), _rows(factor, rows)))
    results = learn_steps(stack, adam, loss, steps, cfg.max_grad_norm)
    norms = torch.stack([n for n, _ in results], 1)  # (M, steps)
    aux = torch.stack([a for _, a in results], 1)  # (M, steps, 3)
    with torch.no_grad():
        log_probs, _ = stack.call("evaluate", data["obs"], data["actions"], data["avail"])
        ratios = aggregate_ratio(log_probs - data["old_log_probs"], how)
    out = []
    for s in range(len(learners)):
        means = aux[s].mean(0).tolist()
        out.append((AgentStats(means[0], means[1], means[2], float(norms[s].mean()), float(factors[s].mean())),
                    ratios[s]))
    return out


def critic_update(learners: Sequence[Any], data: Sequence[tuple[Any, ...]]) -> list[CriticStats]:
    """Every member's V critic fitted to its returns (``VCriticLearner.update``, feed-forward)."""
    cfg = learners[0].config
    critics = [learner.critic for learner in learners]
    stack = Stack(critics)
    adam = MemberAdam([learner.optimizer for learner in learners], stack.modules)
    states = torch.stack([d[0] for d in data])
    returns = [d[2] for d in data]
    old_norm = torch.stack([c.normalize_targets(d[1]) for c, d in zip(critics, data)])
    units = states.shape[1]
    size = max(1, units // cfg.minibatches)
    clip = cfg.value_clip if cfg.clip_value_loss else None

    def loss(call: Any, x: torch.Tensor, old: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        value = value_loss(call("normalized", x), old, target, clip, cfg.huber_delta).mean()
        return value * cfg.value_loss_coef, value.detach()

    steps = []
    for _ in range(cfg.epochs):
        perms = [torch.randperm(units, generator=learner.generator, device="cpu") for learner in learners]
        for k in range(cfg.minibatches):
            rows = torch.stack([p[k * size:(k + 1) * size] for p in perms]).to(states.device)
            targets = []
            for s, critic in enumerate(critics):  # each member's normaliser sees its own targets, in order
                target = returns[s][rows[s]]
                if critic.normalizer is not None:
                    critic.normalizer.update(target)
                targets.append(critic.normalize_targets(target))
            steps.append((_rows(states, rows), _rows(old_norm, rows), torch.stack(targets)))
    results = learn_steps(stack, adam, loss, steps, cfg.max_grad_norm)
    norms = torch.stack([n for n, _ in results], 1)
    losses = torch.stack([a for _, a in results], 1)
    return [CriticStats(float(losses[s].mean()), float(norms[s].mean())) for s in range(len(learners))]


def batched_update(device: torch.device, choice: str) -> bool:
    """``[run] population_update``: batched on CUDA, per member on the CPU unless chosen otherwise."""
    return choice == "batched" or (choice == "auto" and device.type == "cuda")


def population_update(updaters: Sequence[Any], buffers: Sequence[Any], progress: float,
                      batched: bool = True) -> list[UpdateStats]:
    """``updater.update(buffer, progress)`` of every member (``OnPolicyUpdater``s): in batched calls,
    or (``batched=False``) one member after another."""
    if not batched:
        return [u.update(b, progress) for u, b in zip(updaters, buffers)]
    first = updaters[0]
    scale = lr_scale(first.config, progress)
    for u in updaters:
        set_lr([*u.learners, u.critic_learner], scale)
    n = first.n_agents
    batches = [[b.agent_batch(i) for i in range(n)] for b in buffers]
    orders = [agent_order(u.config, n, u.generator) for u in updaters]
    factors = [torch.ones_like(member[0].active) for member in batches]
    stats: list[dict[int, AgentStats]] = [{} for _ in updaters]
    for k in range(n):
        groups: dict[int, list[int]] = defaultdict(list)
        for s, order in enumerate(orders):
            groups[order[k]].append(s)
        for agent, members in sorted(groups.items()):
            done = actor_update([updaters[s].learners[agent] for s in members],
                                [batches[s][agent] for s in members],
                                [factors[s] if first.sequential else torch.ones_like(factors[s]) for s in members])
            for s, (agent_stats, ratio) in zip(members, done):
                stats[s][agent] = agent_stats
                factors[s] = factors[s] * ratio
    critics = critic_update([u.critic_learner for u in updaters], [b.critic_batch() for b in buffers])
    return [UpdateStats([stats[s][i] for i in range(n)], critics[s], orders[s], scale)
            for s in range(len(updaters))]
