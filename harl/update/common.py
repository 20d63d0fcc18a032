"""Numerics every updater and objective shares, defined once.

Masked means, the Huber loss, gradient clipping, one optimiser step, polyak averaging, the
per-iteration agent order, the learning-rate schedule, and what one agent's on-policy
update reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import torch
from torch import nn

from harl.nets.heads import CategoricalHead


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over the entries where ``mask`` (same shape, 0/1) is 1."""
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def aggregate_ratio(log_ratio: torch.Tensor, how: str) -> torch.Tensor:
    """(N, k) per-dimension log-ratios -> (N, 1) ratio, by ``prod`` or ``mean`` of exp."""
    if how == "prod":
        return log_ratio.sum(-1, keepdim=True).exp()
    return log_ratio.exp().mean(-1, keepdim=True)


def ratio_aggregation(actor: Any, how: str) -> str:
    """The aggregation that makes ``how`` mean what HARL's does for this actor.

    HARL sums a MultiDiscrete's sub-action log-probs into one joint column before it
    aggregates, so its ``mean`` there is the joint ratio, i.e. ``prod``; a Box keeps one
    column per dimension and ``mean`` averages their ratios.
    """
    return "prod" if isinstance(actor.head, CategoricalHead) else how


def clip_grads(parameters: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Clip to ``max_norm`` (0: no clip) and return the pre-clip norm."""
    params = [p for p in parameters if p.grad is not None]
    if max_norm > 0:
        return nn.utils.clip_grad_norm_(params, max_norm)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))


HUBER_ONE_SIDED_HELP = (
    "the Huber loss as HARL's and MAT's huber_loss computes it: 0 where the error is below -huber_delta "
    "(their linear branch tests e > d); false (harl's default, docs/fidelity.md): symmetric, linear on both sides")


def huber(error: torch.Tensor, delta: float, one_sided: bool = False) -> torch.Tensor:
    """0.5 e^2 inside [-delta, delta], linear outside; plain 0.5 e^2 when delta is 0.  ``one_sided``:
    0 below -delta instead (HARL's and MAT's ``huber_loss``, ``a e^2/2 + b d (|e| - d/2)`` with
    ``a = |e| <= d``, ``b = e > d``)."""
    if delta <= 0:
        return 0.5 * error**2
    a = error.abs()
    outside = delta * (a - 0.5 * delta)
    if one_sided:
        outside = torch.where(error > delta, outside, torch.zeros_like(outside))
    return torch.where(a <= delta, 0.5 * error**2, outside)


def optimizer_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor, parameters: Iterable[torch.Tensor] = (),
                   max_grad_norm: float = 0.0, report_norm: bool = False) -> torch.Tensor | None:
    """One gradient step on ``loss``: zero the grads, backward, clip ``parameters`` to
    ``max_grad_norm`` (0: no clip), step.  Returns the pre-clip norm when clipping or when
    ``report_norm`` asks for it (a PPO / value-loss metric), else None."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norm = None
    if report_norm or max_grad_norm > 0:
        norm = clip_grads(parameters, max_grad_norm)
    optimizer.step()
    return norm


@torch.no_grad()
def polyak_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """``target <- (1 - tau) * target + tau * online``, parameter by parameter (tau = 1 copies)."""
    t_params: list[torch.Tensor] = list(target.parameters())
    o_params: list[torch.Tensor] = list(online.parameters())
    if t_params:
        torch._foreach_lerp_(t_params, o_params, tau)


def agent_order(config: Any, n_agents: int, generator: torch.Generator) -> list[int]:
    """This round's agent order: a fresh permutation for ``order = "random"``, else 0..n-1."""
    if getattr(config, "order", "fixed") == "random":
        return torch.randperm(n_agents, generator=generator).tolist()
    return list(range(n_agents))


def lr_scale(config: Any, progress: float) -> float:
    """The ``[updater] lr_decay`` schedule at ``progress`` (0 at the start of the run, 1 at its end).

    One schedule for every optimiser of a run, the actors' (``[updater.objective] lr``) and the
    critic's (``[critic] lr``) alike, as HARL's one ``use_linear_lr_decay`` switch: the rates are
    each network's own, but how they fall over the run is the run's, and it sits in ``[updater]``
    because the updater steps every optimiser and knows the run's progress (``set_lr`` scales
    each learner's base rate by this one factor).  The value family's ``q_learning`` keeps a
    constant rate, as EPyMARL."""
    return 1.0 - progress if config.lr_decay == "linear" else 1.0


def set_lr(learners: Iterable[Any], scale: float) -> None:
    """Every learner's optimiser at ``scale`` times its base rate (TRPO's has none: skipped)."""
    for learner in learners:
        if learner.optimizer is None:
            continue
        for group in learner.optimizer.param_groups:
            group["lr"] = learner.base_lr * scale


@attrs.frozen
class AgentStats:
    """What one agent's on-policy update reports (means over its minibatch steps)."""

    policy_loss: float
    entropy: float
    ratio: float
    grad_norm: float
    factor: float
    """Mean of the HA factor this agent was weighted by (1 for MA updates)."""


__all__: Sequence[str] = ("AgentStats", "agent_order", "aggregate_ratio", "clip_grads", "huber", "lr_scale",
                          "masked_mean", "optimizer_step", "polyak_update", "set_lr")


def learner_groups(actor_groups: Iterable[Sequence[int]], learners: Sequence[Any],
                   key: Callable[[Any], Any]) -> list[list[int]]:
    """``[policy] batch_agents``: the agents that take one batched step, sorted by first agent.

    ``actor_groups`` are the agents whose actors stack; each splits further by ``key(learner)``
    (the learners' settings, which a batched step shares), and a learner whose key is None is
    a group of its own."""
    groups: list[list[int]] = []
    for group in actor_groups:
        by_key: dict[Any, list[int]] = {}
        for i in group:
            k = key(learners[i])
            if k is None:
                groups.append([i])
            else:
                by_key.setdefault(k, []).append(i)
        groups.extend(by_key.values())
    return sorted(groups)
