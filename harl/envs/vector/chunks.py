"""What the multi-worker backends (subprocess, Ray) share: how the envs are split among the
workers, how the workers' batches are joined, and how a worker's envs are named in messages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from harl.envs.protocol import VectorStep
from harl.envs.vector.inline import Reset

if TYPE_CHECKING:
    from harl.envs.protocol import Array

    Observed = tuple[Sequence[Array], Array, Sequence[Array] | None]
    """Where the envs stand: per-agent observations, the state, per-agent masks (a reset's or a step's)."""

INLINE_HINT = 'Try [collector] backend = "inline" to see the full traceback.'

STEP_TIMEOUT_S = 300.0
"""Default of ``[collector] step_timeout_s``: a worker that has not answered one call (a step, a
reset, building its envs) after this long is taken as hung.  Several minutes: slow simulators
(a StarCraft II or Football reset, a physics step of a large scene) take seconds, and
a false alarm costs a run, while a real hang costs only this wait."""
START_TIMEOUT_S = 120.0
"""The least a worker is given to start and build its envs (spawning and imports take seconds on a
busy machine); a longer ``step_timeout_s`` applies to starting too."""
TIMEOUT_HINT = ("An env call should never take this long: raise [collector] step_timeout_s for a slow "
                "simulator (0: no limit), or set [collector] restart_workers = true to restart the "
                "worker and go on.")
RESEED = 1_000_003
"""A restarted worker's envs get fresh seeds ``seed + k + RESEED * restarts``."""


def chunk_bounds(n_envs: int, workers: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of each worker's contiguous envs, as even as ``n_envs`` allows."""
    bounds = np.linspace(0, n_envs, workers + 1).round().astype(int)
    return [(int(bounds[w]), int(bounds[w + 1])) for w in range(workers)]


def envs_text(start: int, stop: int) -> str:
    """``env 3`` or ``envs 3-5``: a worker's envs, for messages."""
    last = stop - 1
    return f"env {start}" if last == start else f"envs {start}-{last}"


def cut_short(last: Observed, reset: Reset) -> VectorStep:
    """The step in flight for a restarted worker's envs: a time limit with reward 0 at their
    last observation, followed by the fresh episodes ``reset`` began."""
    obs, state, avail = reset
    n, n_agents = state.shape[0], len(obs)
    return VectorStep(
        obs=obs, state=state, avail=avail, rewards=np.zeros((n, n_agents), dtype=np.float32),
        terminated=np.zeros(n, dtype=bool), truncated=np.ones(n, dtype=bool),
        active=np.ones((n, n_agents), dtype=bool), final_state=np.asarray(last[1]), episode_infos=[],
        final_obs=list(last[0]), final_avail=None if last[2] is None else list(last[2]),
    )


@overload
def _per_agent(lists: Sequence[Sequence[Any]]) -> list[np.ndarray]: ...


@overload
def _per_agent(lists: Sequence[Sequence[Any] | None]) -> list[np.ndarray] | None: ...


def _per_agent(lists: Sequence[Sequence[Any] | None]) -> list[np.ndarray] | None:
    """The parts' per-agent arrays joined agent by agent (None where the first part has none)."""
    if lists[0] is None:
        return None
    return [np.concatenate(arrays) for arrays in zip(*lists)]


def concat_resets(parts: list[Reset]) -> Reset:
    """One reset batch of the workers' ``(obs, state, avail)``, in worker order."""
    if len(parts) == 1:
        return parts[0]
    return (_per_agent([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            _per_agent([p[2] for p in parts]))


def concat_steps(parts: list[VectorStep]) -> VectorStep:
    """One VectorStep of the workers' batches, in worker order."""
    if len(parts) == 1:
        return parts[0]
    return VectorStep(
        obs=_per_agent([p.obs for p in parts]),
        state=np.concatenate([p.state for p in parts]),
        avail=_per_agent([p.avail for p in parts]),
        rewards=np.concatenate([p.rewards for p in parts]),
        terminated=np.concatenate([p.terminated for p in parts]),
        truncated=np.concatenate([p.truncated for p in parts]),
        active=np.concatenate([p.active for p in parts]),
        final_state=np.concatenate([p.final_state for p in parts]),
        episode_infos=[info for p in parts for info in p.episode_infos],
        final_obs=_per_agent([p.final_obs for p in parts]),
        final_avail=_per_agent([p.final_avail for p in parts]),
    )
