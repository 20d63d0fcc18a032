"""The records a collector hands its buffer: the buffers' whole write interface for collectors.

A collector never writes a buffer's arrays; it builds one record per vector step and the
buffer stores it (docs/architecture.md, "Records between stages")::

    buffer.start(StartRecord(obs, state, avail))        # rollout: the envs' first observations
    for t in range(T):
        inputs = buffer.inputs(t)                       # what the team and critic act on
        ... act, step the envs ...
        buffer.insert(StepRecord(...))                  # step t and the observation after it
    buffer.finish(last_values)                          # V of the state after the last step

    replay.insert(Transition(...))                      # off-policy: one vector step

Shapes: E envs, A agents, k_i agent i's action width, V = () (EP state) or (A,) (FP state),
H a GRU width.  Env outputs (observations, states, rewards, masks) may be numpy arrays or
torch tensors (a tensor-native env); the buffer converts them to its dtypes and device.

A policy may fill fields of its own (``StepRecord.extras``, declared by its ``record_fields``: MAT's
decoding orders), which the rollout buffer stores beside the others and hands back with the next
step's inputs (``StepInputs.extras``) and to the update (``RolloutBuffer.recorded``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch

FieldSpec = tuple[tuple[int, ...], torch.dtype, int | float]
"""A policy's own record field, as its ``record_fields`` declares it by name: (per-env shape, dtype,
the value of a slot no step has written yet)."""


@attrs.frozen
class StartRecord:
    """The envs' observations at the start of a rollout (after a reset or a restart)."""

    obs: Sequence[Any]
    """Per agent ``(E, *obs_shape_i)``."""
    state: Any
    """``(E, state_dim)`` or ``(E, A, state_dim)`` (FP), as the env gives it."""
    avail: Sequence[Any] | None
    """Per agent ``(E, n_actions_i)`` available-action masks, or None where the env has none."""


@attrs.frozen
class StepInputs:
    """What the team and the critic act on at step ``t`` (views of the rollout buffer, not copies)."""

    obs: list[torch.Tensor]
    avail: list[torch.Tensor | None]
    state: torch.Tensor
    starts: torch.Tensor
    """``(E,)`` float: 1 where step ``t`` begins an episode (GRU states reset there)."""
    hidden: list[torch.Tensor] | None
    """Per agent ``(E, H)`` GRU state before step ``t``; None for feed-forward actors."""
    critic_hidden: torch.Tensor | None
    """``(E, *V, H)`` the critic's GRU state before step ``t``; None for a feed-forward critic."""
    extras: Mapping[str, torch.Tensor] = attrs.field(factory=dict)
    """The policy's own fields as the step before ``t`` recorded them (``StepRecord.extras``), by name."""


@attrs.frozen
class StepRecord:
    """One on-policy vector step: what was done at ``t`` and what the envs returned."""

    actions: list[torch.Tensor]
    """Per agent ``(E, k_i)``: Box values or category indices, as the team sampled them."""
    log_probs: list[torch.Tensor]
    """Per agent ``(E, k_i)`` per-dimension log-probabilities of ``actions``."""
    values: torch.Tensor
    """``(E, *V)`` the critic's V(s_t), in env units."""
    obs: Sequence[Any]
    """Per agent ``(E, *obs_shape_i)`` observed after the step (post-reset where an episode ended)."""
    avail: Sequence[Any] | None
    state: Any
    rewards: Any
    """``(E, A)`` float."""
    terminated: torch.Tensor
    """``(E,)`` bool."""
    truncated: torch.Tensor
    """``(E,)`` bool."""
    active: torch.Tensor
    """``(E, A)`` float: agent alive at ``t + 1`` (1 where a new episode begins)."""
    starts: torch.Tensor
    """``(E,)`` float: 1 where ``t + 1`` begins an episode."""
    hidden: list[torch.Tensor] | None = None
    """Per agent ``(E, H)`` the actors' GRU states after step ``t``; None for feed-forward actors."""
    critic_hidden: torch.Tensor | None = None
    """``(E, *V, H)`` the critic's GRU state after step ``t``; None for a feed-forward critic."""
    final_values: torch.Tensor | None = None
    """``(E, *V)`` V of the pre-reset state where an episode ended (read only there); None when
    no episode ended at this step."""
    extras: Mapping[str, Any] = attrs.field(factory=dict)
    """The policy's own fields of step ``t`` (its ``record_fields``), each ``(E, *shape)``: MAT's ``orders``."""


@attrs.frozen
class Transition:
    """One off-policy vector step of E envs, as the replay buffer stores it."""

    obs: Sequence[Any]
    """Per agent ``(E, *obs_shape_i)`` observed before acting."""
    avail: Sequence[Any] | None
    """Per agent ``(E, n_actions_i)`` masks before acting, or None."""
    state: Any
    """``(E, state_dim)`` before acting."""
    actions: Sequence[Any]
    """Per agent ``(E, k_i)``, as the env took them (Box values, category indices)."""
    rewards: Any
    """``(E, A)``."""
    terminated: Any
    """``(E,)`` bool."""
    truncated: Any
    """``(E,)`` bool."""
    active: Any
    """``(E, A)`` float: 1 where the agent was alive when it acted."""
    next_obs: Sequence[Any]
    """What the step reached: the pre-reset observation where an episode ended."""
    next_avail: Sequence[Any] | None
    next_state: Any
