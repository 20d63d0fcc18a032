"""The decoding orders of MAT's agents, as collection draws them (``[updater.objective] order``).

- ``fixed``: agent 0 first, as MAT decodes;
- ``random``: one permutation for a whole rollout, drawn from the run's generator when the policy is
  built and after each update (``draw_order``); the network acts in it (``MultiAgentTransformer.order``);
- ``episode``: a permutation for each episode of each env, drawn where the episode begins, as HAPPO
  draws its agents' order (``episode_orders``).

Under ``random`` and ``episode`` each collection step's ``(E, A)`` orders go into the step record
(``FIELD``, the policy's ``record_fields``), so the rollout buffer stores them with the step and the
update decodes every step in the order it was collected in; the buffer also hands each step the
orders its previous step recorded, so an episode keeps its order from step to step, across rollouts
and through a checkpoint.  Evaluation and export act in ``MultiAgentTransformer.order``.
"""

from __future__ import annotations

from typing import Any

import torch

ORDERS = ("fixed", "random", "episode")
"""``[updater.objective] order`` of ``mat``."""

FIELD = "orders"
"""The step record's field of each step's decoding orders: ``(E, A)`` int64, row ``e`` the agents of env
``e`` in the order they decoded; ``UNKNOWN`` in a slot no step has written (a run's first step)."""

UNKNOWN = -1


def record_field(n_agents: int) -> tuple[tuple[int, ...], torch.dtype, int]:
    """``FIELD``'s declaration for the rollout buffer: per env ``(A,)`` int64, ``UNKNOWN`` until written."""
    return (n_agents,), torch.long, UNKNOWN


def draw_order(n_agents: int, generator: torch.Generator | None) -> torch.Tensor:
    """One permutation of the agents (``order = "random"``: a rollout's order)."""
    return torch.randperm(n_agents, generator=generator)


def episode_orders(running: torch.Tensor, starts: Any, generator: torch.Generator | None,
                   saved: torch.Tensor | None = None) -> torch.Tensor:
    """The ``(E, A)`` orders of one collection step under ``order = "episode"``: a new permutation
    (drawn from ``generator``, one row per env, in env order) for every env whose episode begins here
    (``starts`` ``(E,)`` 1; None: every env) or whose running order is ``UNKNOWN``, the running order
    ``running`` ``(E, A)`` (what the previous step recorded) for the others.  ``saved``: running orders
    that weights from older harl held (``mat_migrate``), taken where ``running`` is ``UNKNOWN``.
    ``running`` is left as it was."""
    n_envs, n_agents = running.shape
    unknown = (running < 0).any(-1)
    orders = running
    if saved is not None and tuple(saved.shape) == tuple(running.shape):
        orders = torch.where(unknown.unsqueeze(-1), saved.to(running), running)
        unknown = torch.zeros_like(unknown)
    begins = (torch.ones(n_envs, dtype=torch.bool) if starts is None
              else ((torch.as_tensor(starts).reshape(n_envs).to(unknown.device) > 0) | unknown).cpu())
    rows = torch.nonzero(begins).view(-1)
    if len(rows):
        drawn = torch.rand(len(rows), n_agents, generator=generator).argsort(-1)
        orders = orders.clone()
        orders[rows.to(orders.device)] = drawn.to(orders.device)
    return orders
