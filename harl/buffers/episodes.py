"""A replay of whole episodes for the value family (IQL, VDN, QMIX): padded, masked, sampled by episode.

Layout: ``C`` = ``capacity`` episodes, each padded to ``T`` = ``max_length`` steps
(A = agents, ``n_i`` agent i's actions)::

    obs[i]       (C, T + 1, obs_dim_i)   step t's observation; row L (the episode's length) is the
                                          observation the last step reached (pre-reset)
    state        (C, T + 1, state_dim)   likewise
    avail[i]     (C, T + 1, n_i) bool     available actions (None: the env has no masks for agent i)
    actions      (C, T, A) int16/int64    each agent's action index at step t
    rewards      (C, T)                   the team reward of step t (the mean of the agents')
    terminated   (C, T) bool              step t reached a terminal state (no bootstrap)
    lengths      (C,)                     L: steps of the episode; rows past it are padding

Observations are stored as the env gives them (uint8 images as uint8, as the other
buffers).  A sampled batch holds ``batch_size`` distinct episodes, cut to the longest of
them, with ``filled`` (B, T') True on real steps: the loss averages over those only, so
whatever the padding holds never reaches it.  Recurrent agents unroll each episode from
its first step.  The oldest episode is overwritten once ``capacity`` are stored.  Storage is
allocated with ``torch.empty`` (memory is touched as the buffer fills); each slot is cleared
when an episode is written to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import torch
from gymnasium import spaces

from harl.nets.heads import avail_size
from harl.nets.image import storage_bytes, storage_dtype
from harl.registry import register
from harl.settings import in_range, kind_field, positive, setting
from harl.sizes import human, refuse_if_too_big


@attrs.frozen
class EpisodeBufferConfig:
    """``[buffer] kind = "episodes"``: whole episodes, padded to max_length, sampled as batches of episodes."""

    kind: str = kind_field("episodes")
    capacity: int = setting(5000, "episodes kept; the oldest is overwritten (EPyMARL's buffer_size)", positive())
    batch_size: int = setting(32, "episodes per gradient step (EPyMARL's batch_size); updates wait until "
                              "the buffer holds this many", positive())
    max_length: int = setting(0, "steps of the longest episode (0: the env's time limit, read from "
                              "[env] max_episode_steps)", in_range(0, None))


@attrs.frozen
class Episode:
    """One finished episode, as a collector hands it to ``EpisodeBuffer.insert`` (L = its length)."""

    obs: Sequence[torch.Tensor]
    """Per agent ``(L + 1, *obs_shape_i)``: row L is what the last step reached."""
    state: torch.Tensor
    """``(L + 1, state_dim)``."""
    avail: Sequence[torch.Tensor | None] | None
    """Per agent ``(L + 1, n_i)`` masks, or None where the env has none."""
    actions: torch.Tensor
    """``(L, A)`` long."""
    rewards: torch.Tensor
    """``(L,)`` the team reward of each step."""
    terminated: torch.Tensor
    """``(L,)`` bool; only the last step can be True (False where a time limit cut the episode)."""

    @property
    def length(self) -> int:
        return int(self.actions.shape[0])


@attrs.frozen
class EpisodeBatch:
    """Sampled episodes, cut to the longest (``T'`` steps); per-agent lists indexed by agent."""

    obs: list[torch.Tensor]
    """Per agent ``(B, T' + 1, obs_dim_i)``, stored dtype."""
    state: torch.Tensor
    """``(B, T' + 1, state_dim)``."""
    avail: list[torch.Tensor | None]
    """Per agent ``(B, T' + 1, n_i)`` bool, or None."""
    actions: torch.Tensor
    """``(B, T', A)`` long."""
    rewards: torch.Tensor
    """``(B, T')``."""
    terminated: torch.Tensor
    """``(B, T')`` bool."""
    filled: torch.Tensor
    """``(B, T')`` bool: True on each episode's real steps."""

    @property
    def size(self) -> int:
        return int(self.actions.shape[0])


def episode_bytes(observation_spaces: Sequence[spaces.Box], action_spaces: Sequence[spaces.Space],
                  state_dim: int, max_length: int, state_space: spaces.Space | None = None) -> int:
    """Bytes one stored episode takes (``max_length`` steps, padding included)."""
    rows = max_length + 1
    obs = sum(storage_bytes(s) * int(np.prod(s.shape)) for s in observation_spaces)
    state = (4 if state_space is None else storage_bytes(state_space)) * state_dim
    masks = sum(avail_size(s) for s in action_spaces)
    action_bytes = 2 if _small_actions(action_spaces) else 8
    per_step = len(action_spaces) * action_bytes + 4 + 1
    return rows * (obs + state + masks) + max_length * per_step + 8


def _small_actions(action_spaces: Sequence[spaces.Space]) -> bool:
    return all(isinstance(s, spaces.Discrete) and int(s.n) < 2 ** 15 for s in action_spaces)


class EpisodeBuffer:
    """Circular storage of whole episodes (see the module docstring)."""

    STORAGE = ("obs", "state", "avail", "actions", "rewards", "terminated", "lengths")

    def __init__(self, observation_spaces: Sequence[spaces.Box], action_spaces: Sequence[spaces.Space],
                 state_dim: int, capacity: int, max_length: int, device: torch.device | str = "cpu",
                 state_space: spaces.Space | None = None) -> None:
        C, T, A = capacity, max_length, len(action_spaces)
        self.capacity, self.max_length, self.n_agents = C, T, A
        self.device = torch.device(device)
        dev = self.device
        self.obs = [torch.empty(C, T + 1, int(np.prod(s.shape)), dtype=storage_dtype(s), device=dev)
                    for s in observation_spaces]
        state_dtype = torch.float32 if state_space is None else storage_dtype(state_space)
        self.state = torch.empty(C, T + 1, state_dim, dtype=state_dtype, device=dev)
        self.avail: list[torch.Tensor | None] = [
            torch.empty(C, T + 1, avail_size(s), dtype=torch.bool, device=dev) if avail_size(s) else None
            for s in action_spaces]
        action_dtype = torch.int16 if _small_actions(action_spaces) else torch.long
        self.actions = torch.empty(C, T, A, dtype=action_dtype, device=dev)
        self.rewards = torch.empty(C, T, device=dev)
        self.terminated = torch.empty(C, T, dtype=torch.bool, device=dev)
        self.lengths = torch.zeros(C, dtype=torch.long, device=dev)
        self.head = 0
        """The slot the next episode goes to."""
        self.size = 0
        """Episodes stored (at most ``capacity``)."""
        self.episodes_added = 0
        """Episodes inserted since construction (not capped by the capacity)."""

    def insert(self, episode: Episode) -> None:
        """Store one finished episode in the oldest slot; its padding is reset to zeros (masks to ones)."""
        L, c = episode.length, self.head
        if L > self.max_length:
            raise ValueError(f"an episode of {L} steps does not fit buffer.max_length = {self.max_length}")
        for i, o in enumerate(episode.obs):
            self.obs[i][c].zero_()
            self.obs[i][c, : L + 1] = torch.as_tensor(o, device=self.device).reshape(L + 1, -1).to(self.obs[i].dtype)
        self.state[c].zero_()
        self.state[c, : L + 1] = torch.as_tensor(episode.state, device=self.device).reshape(L + 1, -1).to(
            self.state.dtype)
        for i, mask in enumerate(self.avail):
            if mask is None:
                continue
            mask[c].fill_(True)
            given = None if episode.avail is None else episode.avail[i]
            if given is not None:
                mask[c, : L + 1] = torch.as_tensor(given, device=self.device).reshape(L + 1, -1) != 0
        self.actions[c].zero_()
        self.actions[c, :L] = torch.as_tensor(episode.actions, device=self.device).to(self.actions.dtype)
        self.rewards[c].zero_()
        self.rewards[c, :L] = torch.as_tensor(episode.rewards, device=self.device, dtype=torch.float32)
        self.terminated[c].zero_()
        self.terminated[c, :L] = torch.as_tensor(episode.terminated, device=self.device, dtype=torch.bool)
        self.lengths[c] = L
        self.head = (c + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        self.episodes_added += 1

    def sample(self, batch_size: int, generator: torch.Generator) -> EpisodeBatch:
        """``batch_size`` distinct stored episodes, uniformly (EPyMARL's ``np.random.choice(..., replace=False)``;
        all of them, in storage order, when exactly that many are stored), cut to the longest."""
        if self.size < batch_size:
            raise RuntimeError(f"the episode buffer holds {self.size} episodes, fewer than batch_size = {batch_size}")
        if self.size == batch_size:
            index = torch.arange(batch_size)
        else:
            index = torch.randperm(self.size, generator=generator)[:batch_size]
        return self.gather(index.to(self.device))

    def gather(self, index: torch.Tensor) -> EpisodeBatch:
        """The episodes in slots ``index``, cut to the longest of them."""
        lengths = self.lengths.index_select(0, index)
        T = int(lengths.max().item()) if index.numel() else 0
        filled = torch.arange(T, device=self.device).unsqueeze(0) < lengths.unsqueeze(1)

        def take(x: torch.Tensor, rows: int) -> torch.Tensor:
            return x.index_select(0, index)[:, :rows]

        return EpisodeBatch(
            obs=[take(o, T + 1) for o in self.obs],
            state=take(self.state, T + 1),
            avail=[None if m is None else take(m, T + 1) for m in self.avail],
            actions=take(self.actions, T).long(),
            rewards=take(self.rewards, T),
            terminated=take(self.terminated, T),
            filled=filled,
        )

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """The stored episodes (only those) and the cursor, for an exact resume; tensors on the CPU."""
        def part(x: Any) -> Any:
            if isinstance(x, list):
                return [part(t) for t in x]
            return None if x is None else x[: self.size].cpu().clone()

        return {"head": self.head, "size": self.size, "episodes_added": self.episodes_added,
                "max_length": self.max_length, **{name: part(getattr(self, name)) for name in self.STORAGE}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()`` into a buffer of the same shape."""
        size = int(state["size"])
        if size > self.capacity or int(state["max_length"]) != self.max_length:
            raise ValueError(f"the saved episode buffer holds {size} episodes of up to {state['max_length']} steps; "
                             f"this one takes {self.capacity} of up to {self.max_length}")

        def put(x: Any, saved: Any) -> None:
            if isinstance(x, list):
                for t, v in zip(x, saved, strict=True):
                    put(t, v)
            elif x is not None:
                x[:size].copy_(saved)

        for name in self.STORAGE:
            put(getattr(self, name), state[name])
        self.head, self.size, self.episodes_added = int(state["head"]), size, int(state["episodes_added"])


def check_episode_buffer(need: int, per_episode: int, capacity: int, max_length: int, source: str,
                         device: torch.device | str) -> None:
    """Refuse an episode replay that cannot fit, before it is allocated."""
    refuse_if_too_big(
        need, f"buffer.capacity = {capacity:,} episodes x (buffer.max_length = {max_length:,} + 1) steps: the "
        f"episode replay ({per_episode:,} bytes per padded episode, {human(need)})",
        "lower buffer.capacity or buffer.max_length", source, device)


def _build(config: EpisodeBufferConfig, parts: Any) -> EpisodeBuffer:
    max_length = parts.wiring.max_length
    per = episode_bytes(parts.obs_spaces, parts.act_spaces, parts.state_dim, max_length, parts.state_space)
    check_episode_buffer(per * config.capacity, per, config.capacity, max_length, parts.source, parts.device)
    return EpisodeBuffer(parts.obs_spaces, parts.act_spaces, parts.state_dim, config.capacity, max_length,
                         parts.device, parts.state_space)


register("buffer", EpisodeBufferConfig, _build, family="value")
