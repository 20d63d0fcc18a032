"""Circular replay storage for the off-policy family, per agent, on the training device.

Layout: ``S = ceil(capacity / n_envs)`` rows, one row per vector step, each holding the
transitions of all ``E`` envs (A = agents)::

    obs[i], next_obs[i]      (S, E, obs_dim_i)      avail[i], next_avail[i]  (S, E, n_actions_i) or None
    actions[i]               (S, E, k_i)            as the env takes them (Box values, category indices)
    state, next_state        (S, E, state_dim)      rewards (S, E, A)   active (S, E, A): alive when acting
    terminated, truncated    (S, E) bool, kept apart

``next_*`` hold what the step reached: the pre-reset observation and state where an
episode ended, so a truncated transition can bootstrap.  Row ``r + 1`` of env ``e`` is
the step after row ``r`` of env ``e`` (modulo ``S``), which is how n-step windows are
read without any per-sample Python loop.  The newest row has no successor yet: windows
stop there (``ends``), and a window never runs from the newest data into the oldest.

Sampling is uniform over the stored transitions (flat index ``row * E + env``); the
``n_step`` return computer turns a sample into a ``ReplayBatch``.  Storage is allocated
with ``torch.empty``, so memory is only touched as the buffer fills.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import torch
from gymnasium import spaces

from harl.buffers.records import Transition
from harl.nets.heads import action_width, avail_size
from harl.nets.image import storage_dtype
from harl.registry import register
from harl.settings import kind_field, positive, setting
from harl.sizes import check_replay, replay_bytes_per_transition


@attrs.frozen
class ReplayConfig:
    """``[buffer] kind = "replay"``: circular off-policy storage, sampled uniformly."""

    kind: str = kind_field("replay")
    capacity: int = setting(1_000_000, "transitions kept (over all envs); the oldest are overwritten", positive())
    batch_size: int = setting(1000, "transitions per gradient step", positive())
    replacement: bool = setting(
        True, "sample a batch with replacement (true) or as distinct transitions (false: HARL's, which "
        "takes the first batch_size of a permutation of the buffer)")


@attrs.frozen
class ReplayBatch:
    """Sampled transitions with their n-step targets; per-agent lists indexed by agent."""

    state: torch.Tensor
    """(B, state_dim) at the sampled step."""
    obs: list[torch.Tensor]
    actions: list[torch.Tensor]
    """As stored: (B, k_i) floats (Box values or category indices)."""
    avail: list[torch.Tensor | None]
    active: torch.Tensor
    """(B, A) float: 1 where the agent was alive when it acted."""
    returns: torch.Tensor
    """(B, A): each agent's n-step discounted reward sum (the EP critic averages them)."""
    discount: torch.Tensor
    """(B,): gamma^m where the target bootstraps, 0 after termination."""
    steps: torch.Tensor
    """(B,) int: m, the rewards summed."""
    next_state: torch.Tensor
    """(B, state_dim) reached after the m-th step (the bootstrap state)."""
    next_obs: list[torch.Tensor]
    next_avail: list[torch.Tensor | None]

    @property
    def size(self) -> int:
        return int(self.state.shape[0])


def _as(x: Any, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(x, dtype=like.dtype, device=like.device)


class ReplayBuffer:
    """Per-agent circular storage; ``insert`` one ``Transition`` per vector step, ``sample_index`` for batches."""

    def __init__(self, observation_spaces: Sequence[spaces.Box], action_spaces: Sequence[spaces.Space],
                 state_dim: int, n_envs: int, capacity: int, device: torch.device | str = "cpu",
                 state_space: spaces.Box | None = None, replacement: bool = True) -> None:
        """Observations and states are stored flat; uint8 images (and a uint8 ``state_space``) as uint8."""
        self.replacement = replacement
        E, A = n_envs, len(action_spaces)
        S = max(2, -(-capacity // n_envs))
        self.rows, self.n_envs, self.n_agents = S, E, A
        self.device = torch.device(device)
        f32: dict[str, Any] = dict(dtype=torch.float32, device=self.device)

        def per_agent(width: Sequence[int]) -> list[torch.Tensor]:
            return [torch.empty(S, E, w, **f32) for w in width]

        def masks() -> list[torch.Tensor | None]:
            return [torch.empty(S, E, avail_size(s), **f32) if avail_size(s) else None
                    for s in action_spaces]

        def observations() -> list[torch.Tensor]:
            return [torch.empty(S, E, int(np.prod(s.shape)), dtype=storage_dtype(s), device=self.device)
                    for s in observation_spaces]

        self.obs, self.next_obs = observations(), observations()
        self.avail, self.next_avail = masks(), masks()
        self.actions = per_agent([action_width(s) for s in action_spaces])
        state_dtype = torch.float32 if state_space is None else storage_dtype(state_space)
        self.state = torch.empty(S, E, state_dim, dtype=state_dtype, device=self.device)
        self.next_state = torch.empty(S, E, state_dim, dtype=state_dtype, device=self.device)
        self.rewards = torch.empty(S, E, A, **f32)
        self.active = torch.empty(S, E, A, **f32)
        self.terminated = torch.zeros(S, E, dtype=torch.bool, device=self.device)
        self.truncated = torch.zeros(S, E, dtype=torch.bool, device=self.device)
        self.head = 0
        """The row the next ``insert`` writes."""
        self.filled = 0
        """Rows holding data (at most S)."""
        self.env_steps = 0
        """Transitions added since construction (not capped by the capacity)."""

    @property
    def size(self) -> int:
        """Transitions stored."""
        return self.filled * self.n_envs

    def insert(self, transition: Transition) -> None:
        """Store one vector step: arrays with a leading ``n_envs`` axis (numpy or torch)."""
        obs, avail, state, actions = transition.obs, transition.avail, transition.state, transition.actions
        next_obs, next_avail, next_state = transition.next_obs, transition.next_avail, transition.next_state
        rewards, active = transition.rewards, transition.active
        terminated, truncated = transition.terminated, transition.truncated
        r = self.head
        for i in range(self.n_agents):
            self.obs[i][r] = _as(obs[i], self.obs[i]).reshape(self.n_envs, -1)
            self.next_obs[i][r] = _as(next_obs[i], self.next_obs[i]).reshape(self.n_envs, -1)
            self.actions[i][r] = _as(actions[i], self.actions[i]).reshape(self.n_envs, -1)
            mask, next_mask = self.avail[i], self.next_avail[i]
            if mask is not None and next_mask is not None:
                mask[r] = 1.0 if avail is None else _as(avail[i], mask)
                next_mask[r] = 1.0 if next_avail is None else _as(next_avail[i], next_mask)
        self.state[r] = _as(state, self.state).reshape(self.n_envs, -1)
        self.next_state[r] = _as(next_state, self.next_state).reshape(self.n_envs, -1)
        self.rewards[r] = _as(rewards, self.rewards)
        self.active[r] = _as(active, self.active)
        self.terminated[r] = _as(terminated, self.terminated)
        self.truncated[r] = _as(truncated, self.truncated)
        self.head = (r + 1) % self.rows
        self.filled = min(self.filled + 1, self.rows)
        self.env_steps += self.n_envs

    STORAGE = ("obs", "next_obs", "avail", "next_avail", "actions", "state", "next_state", "rewards",
               "active", "terminated", "truncated")
    """Storage tensors (or per-agent lists of them, ``None`` for agents without masks)."""

    def state_dict(self) -> dict[str, Any]:
        """The filled rows (only those) and the cursor, for an exact resume; tensors on the CPU."""
        def part(x: Any) -> Any:
            if isinstance(x, list):
                return [part(t) for t in x]
            return None if x is None else x[:self.filled].cpu().clone()

        return {"head": self.head, "filled": self.filled, "env_steps": self.env_steps,
                **{name: part(getattr(self, name)) for name in self.STORAGE}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()`` into a buffer of the same shape."""
        filled = int(state["filled"])
        if filled > self.rows:
            raise ValueError(f"the saved replay buffer holds {filled} rows, this one {self.rows}")

        def put(x: Any, saved: Any) -> None:
            if isinstance(x, list):
                for t, v in zip(x, saved, strict=True):
                    put(t, v)
            elif x is not None:
                x[:filled].copy_(saved)

        for name in self.STORAGE:
            put(getattr(self, name), state[name])
        self.head, self.filled, self.env_steps = int(state["head"]), filled, int(state["env_steps"])

    def sample_index(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        """(B,) flat indices ``row * n_envs + env``, uniform over stored transitions, with
        replacement or distinct (``replacement``; all of them, shuffled, when fewer are stored)."""
        if self.filled == 0:
            raise RuntimeError("cannot sample from an empty replay buffer")
        if self.replacement:
            index = torch.randint(self.size, (batch_size,), generator=generator)
        else:
            index = distinct_indices(self.size, batch_size, generator)
        return index.to(self.device)

    def windows(self, index: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows ``(B, n)`` of the n steps from each sampled transition on (same env), and envs ``(B,)``.

        Flat indices count rows from the oldest stored one, so the same index names the same
        transition whether or not the buffer has wrapped around.
        """
        oldest = self.head if self.filled == self.rows else 0
        first = (oldest + torch.div(index, self.n_envs, rounding_mode="floor")) % self.rows
        envs = index % self.n_envs
        rows = (first.unsqueeze(1) + torch.arange(n, device=self.device)) % self.rows
        return rows, envs

    def ends(self, rows: torch.Tensor, envs: torch.Tensor) -> torch.Tensor:
        """(B, n) bool: the window must stop after this step (episode end, or newest data)."""
        newest = (self.head - 1) % self.rows
        return (self.at_windows(self.terminated, rows, envs) | self.at_windows(self.truncated, rows, envs)
                | (rows == newest))

    def at_windows(self, x: torch.Tensor, rows: torch.Tensor, envs: torch.Tensor) -> torch.Tensor:
        """``x[rows, envs[:, None]]`` ((B, n, ...) of storage ``x``) by one flat ``index_select``: faster on CPU."""
        flat = (rows * self.n_envs + envs.unsqueeze(1)).reshape(-1)
        return x.flatten(0, 1).index_select(0, flat).reshape(*rows.shape, *x.shape[2:])

    def gather(self, first: torch.Tensor, envs: torch.Tensor, last: torch.Tensor, returns: torch.Tensor,
               discount: torch.Tensor, steps: torch.Tensor) -> ReplayBatch:
        """Assemble a batch: the sampled step ``first`` and the bootstrap step ``last`` (rows, per env).

        Rows are read by ``index_select`` on the (rows x envs) flattened storage: the same
        values as ``x[rows, envs]``, about 3x faster on CPU than two-tensor advanced indexing.
        """
        at_first, at_last = first * self.n_envs + envs, last * self.n_envs + envs

        def rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
            return x.flatten(0, 1).index_select(0, index)

        def at(x: torch.Tensor | None, index: torch.Tensor) -> torch.Tensor | None:
            return None if x is None else rows(x, index)

        return ReplayBatch(
            state=rows(self.state, at_first),
            obs=[rows(o, at_first) for o in self.obs],
            actions=[rows(a, at_first) for a in self.actions],
            avail=[at(a, at_first) for a in self.avail],
            active=rows(self.active, at_first),
            returns=returns,
            discount=discount,
            steps=steps,
            next_state=rows(self.next_state, at_last),
            next_obs=[rows(o, at_last) for o in self.next_obs],
            next_avail=[at(a, at_last) for a in self.next_avail],
        )


def distinct_indices(n: int, k: int, generator: torch.Generator, permute_below: int = 32) -> torch.Tensor:
    """``min(k, n)`` distinct indices below ``n``, a uniformly random subset in random order.

    HARL takes ``randperm(n)[:k]``, which costs O(n) per batch: 6.8 ms at a million stored
    transitions (1 thread), against 0.11 ms here.  Once ``n`` reaches ``permute_below * k`` this
    draws with replacement and redraws the repeated positions until none is left; the
    procedure treats every index alike, so every k-subset is equally likely, as with a
    permutation.  Below that, a permutation is the cheaper of the two.
    """
    if n < permute_below * k:
        return torch.randperm(n, generator=generator)[:k]
    index = torch.randint(n, (k,), generator=generator)
    while True:
        ordered, where = index.sort()
        repeated = where[1:][ordered[1:] == ordered[:-1]]
        if not len(repeated):
            return index
        index[repeated] = torch.randint(n, (len(repeated),), generator=generator)


def _replay_buffer(config: ReplayConfig, parts: Any) -> ReplayBuffer:
    check_replay(replay_bytes_per_transition(parts.obs_spaces, parts.act_spaces, parts.state_dim, parts.state_space),
                 config.capacity, parts.source, parts.device)
    return ReplayBuffer(parts.obs_spaces, parts.act_spaces, parts.state_dim, parts.wiring.n_envs,
                        config.capacity, parts.device, parts.state_space, config.replacement)


register("buffer", ReplayConfig, _replay_buffer, family="off_policy")
