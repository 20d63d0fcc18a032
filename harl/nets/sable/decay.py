"""Sable's decay for multi-agent sequences: one decay per timestep, cut where an episode starts.

A sequence holds T timesteps of N agents as T*N tokens, timestep-major (token t*N + a).
Every agent of a timestep shares that timestep's decay, so token (n, a) weighs token (m, b) by
kappa**(n - m) for m <= n within one episode and by 0 across an episode start (Mava 73c4611,
mava/networks/retention.py:103-191). ``starts`` is the per-token episode-start flag (Mava's
``dones``: the transition's ``last_timestep.last()``); only each timestep's first token is read.
"""

from __future__ import annotations

import math

import torch


def head_decays(n_head: int, scaling: float) -> torch.Tensor:
    """Each head's kappa: 1 - exp(linspace(log 1/32, log 1/512, n_head)), times ``scaling``.

    The spread gives heads memories of different lengths (retention.py:209-213); Mava asserts
    the scaling lies in [0, 1] (sable_network.py:430-432).
    """
    if not 0.0 <= scaling <= 1.0:
        raise ValueError(f"decay_scaling_factor must lie in [0, 1], got {scaling}")
    logs = torch.linspace(math.log(1 / 32), math.log(1 / 512), n_head, dtype=torch.float64)
    return (1 - torch.exp(logs)) * scaling


def timestep_starts(starts: torch.Tensor, n_agents: int) -> torch.Tensor:
    """(B, T*N) per-token start flags -> (B, T) per-timestep flags, read at each first agent."""
    if starts.shape[-1] % n_agents:
        raise ValueError(f"{starts.shape[-1]} tokens do not hold whole timesteps of {n_agents} agents")
    return starts[:, ::n_agents].bool()


def _episode_ids(ts_starts: torch.Tensor) -> torch.Tensor:
    """How many episode starts came at or before each timestep: equal ids share an episode."""
    return torch.cumsum(ts_starts.long(), dim=1)


def decay_matrix(starts: torch.Tensor, kappa: torch.Tensor, n_agents: int, causal: bool) -> torch.Tensor:
    """The (B, H, T*N, T*N) inner-chunk decay for per-head ``kappa`` (H,).

    Timestep level: kappa**(n - m) below the diagonal, 0 where an episode start falls in (m, n]
    (Mava's timestep mask). Repeated over agents; ``causal`` (the decoder) adds the lower
    triangle over tokens so an agent sees only the agents before it in its timestep.
    """
    ts = timestep_starts(starts, n_agents)
    n_ts = ts.shape[1]
    steps = torch.arange(n_ts, device=starts.device)
    gap = steps[:, None] - steps[None, :]
    base = kappa.to(starts.device)[:, None, None] ** gap.clamp(min=0) * (gap >= 0)  # (H, T, T)
    ids = _episode_ids(ts)
    same_episode = ids[:, :, None] == ids[:, None, :]  # (B, T, T)
    timestep_level = base[None] * same_episode[:, None]
    tokens = timestep_level.repeat_interleave(n_agents, dim=2).repeat_interleave(n_agents, dim=3)
    if causal:
        tokens = torch.tril(tokens)
    return tokens


def cross_decay(starts: torch.Tensor, kappa: torch.Tensor, n_agents: int) -> torch.Tensor:
    """Mava's xi, (B, H, T*N, 1): how much of the carried state timestep t reads, kappa**(t + 1),
    and 0 from the chunk's first episode start on (retention.py:166-191)."""
    ts = timestep_starts(starts, n_agents)
    steps = torch.arange(1, ts.shape[1] + 1, device=starts.device)
    before_start = _episode_ids(ts) == 0  # (B, T)
    xi = kappa.to(starts.device)[None, :, None] ** steps * before_start[:, None]
    return xi.repeat_interleave(n_agents, dim=2)[..., None]


def carry_decay(starts: torch.Tensor, kappa: torch.Tensor, n_agents: int) -> torch.Tensor:
    """(B, H, 1, 1): the carried state's weight after a chunk of T timesteps, kappa**T, or 0 if an
    episode starts anywhere in the chunk (Mava's chunk_decay * delta, retention.py:74-78)."""
    ts = timestep_starts(starts, n_agents)
    kept = ~ts.any(dim=1)  # (B,)
    return (kappa.to(starts.device)[None, :] ** ts.shape[1] * kept[:, None])[..., None, None]
