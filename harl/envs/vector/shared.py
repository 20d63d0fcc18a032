"""Shared-memory step slots: the per-step arrays subprocess workers write in place.

One segment holds, for all ``n_envs`` rows, the actions the parent writes and every
per-step array of a ``VectorStep`` a worker writes back (observations, state, masks,
rewards, flags, the pre-reset finals).  Each array is ``(n_envs, ...)`` and C-contiguous,
so a worker's chunk of envs is one slice of each and the parent sees the whole batch
without concatenating.  The pipe then carries only a command and a small ack: the
episode-end infos and whether any env gave action masks.

Segments are named ``harl_<pid>_<random>`` after the process that creates them and are not
handed to multiprocessing's resource tracker (which, after a ``kill -9`` of the trainer,
would unlink the segment with a "leaked shared_memory objects" warning): the creator
unlinks its segment on close, and a segment whose creator died without doing so is
removed by the next ``create_segment`` on the machine (``remove_stale``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Iterator, Sequence
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.checks import avail_width
from harl.envs.protocol import VectorStep

_ALIGN = 8


@attrs.frozen
class _Field:
    name: str
    shape: tuple[int, ...]
    """Per env (the row's shape)."""
    dtype: str
    offset: int
    """Bytes from the segment's start to row 0."""


def _action_shape(space: spaces.Space) -> tuple[int, ...]:
    """The row shape the collectors hand a space's actions in: ``(1,)`` for Discrete."""
    return (1,) if isinstance(space, spaces.Discrete) else tuple(space.shape or ())


def _shape(space: spaces.Space) -> tuple[int, ...]:
    """An observation or state space's row shape (a space without a fixed shape has no row here)."""
    if space.shape is None:
        raise TypeError(f"{space} has no fixed shape: the shared-memory step holds Box observations and states")
    return space.shape


def _observation_dtype(space: spaces.Space) -> str:
    """uint8 images travel as uint8 (as inline envs return them: a quarter of the bytes); the rest as float32."""
    return "uint8" if getattr(space, "dtype", None) == np.uint8 else "float32"


@attrs.frozen
class StepLayout:
    """Where each array lives in the segment; picklable, so workers get the same map.

    Fields: ``action{i}`` (float32, what the collectors send), ``obs{i}``, ``final_obs{i}`` (uint8
    for uint8 image spaces, else float32), ``avail{i}``,
    ``final_avail{i}`` (float32; ones where an env gives no mask), ``state``,
    ``final_state``, ``rewards``, ``terminated``, ``truncated`` and ``active``.
    """

    n_envs: int
    n_agents: int
    fields: dict[str, _Field]
    size: int

    @classmethod
    def build(cls, n_envs: int, observation_spaces: Sequence[spaces.Space], state_space: spaces.Space,
              action_spaces: Sequence[spaces.Space]) -> StepLayout:
        n_agents = len(observation_spaces)
        specs: list[tuple[str, tuple[int, ...], str]] = [
            (f"action{i}", _action_shape(s), "float32") for i, s in enumerate(action_spaces)]
        for i, space in enumerate(observation_spaces):
            width = (avail_width(action_spaces[i]),)
            obs = _observation_dtype(space)
            specs += [(f"obs{i}", _shape(space), obs), (f"final_obs{i}", _shape(space), obs),
                      (f"avail{i}", width, "float32"), (f"final_avail{i}", width, "float32")]
        state = _observation_dtype(state_space)
        specs += [("state", _shape(state_space), state), ("final_state", _shape(state_space), state),
                  ("rewards", (n_agents,), "float32"), ("terminated", (), "bool"), ("truncated", (), "bool"),
                  ("active", (n_agents,), "bool")]
        fields, offset = {}, 0
        for name, shape, dtype in specs:
            fields[name] = _Field(name, tuple(shape), dtype, offset)
            nbytes = n_envs * int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            offset += -(-nbytes // _ALIGN) * _ALIGN
        return cls(n_envs, n_agents, fields, max(offset, _ALIGN))

    def views(self, buffer: Any, start: int = 0, stop: int | None = None) -> dict[str, np.ndarray]:
        """Rows ``start:stop`` of every field, as arrays over ``buffer`` (the segment's memory)."""
        stop = self.n_envs if stop is None else stop
        out = {}
        for f in self.fields.values():
            row = np.dtype(f.dtype).itemsize * int(np.prod(f.shape, dtype=np.int64))
            out[f.name] = np.ndarray((stop - start, *f.shape), f.dtype, buffer,
                                     f.offset + start * row)
        return out

    def actions(self, views: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [views[f"action{i}"] for i in range(self.n_agents)]

    def write_step(self, rows: dict[str, np.ndarray], step: VectorStep) -> None:
        """A worker's chunk of ``step`` into its rows (masks: ones where there are none)."""
        final_obs = step.obs if step.final_obs is None else step.final_obs
        final_avail = step.avail if step.final_avail is None else step.final_avail
        for i in range(self.n_agents):
            rows[f"obs{i}"][...] = step.obs[i]
            rows[f"final_obs{i}"][...] = final_obs[i]
            rows[f"avail{i}"][...] = 1.0 if step.avail is None else step.avail[i]
            rows[f"final_avail{i}"][...] = 1.0 if final_avail is None else final_avail[i]
        for name in ("state", "final_state", "rewards", "terminated", "truncated", "active"):
            rows[name][...] = getattr(step, name)

    def read_step(self, views: dict[str, np.ndarray], episode_infos: list[dict[str, Any]],
                  masked: bool) -> VectorStep:
        """A ``VectorStep`` of copies of the whole batch (``views``: every row), the step's own arrays.

        ``masked``: some env gave action masks this step (else ``avail`` is None, as inline).
        """
        n = range(self.n_agents)
        return VectorStep(
            obs=[views[f"obs{i}"].copy() for i in n], state=views["state"].copy(),
            avail=[views[f"avail{i}"].copy() for i in n] if masked else None,
            rewards=views["rewards"].copy(), terminated=views["terminated"].copy(),
            truncated=views["truncated"].copy(), active=views["active"].copy(),
            final_state=views["final_state"].copy(), episode_infos=episode_infos,
            final_obs=[views[f"final_obs{i}"].copy() for i in n],
            final_avail=[views[f"final_avail{i}"].copy() for i in n] if masked else None,
        )


PREFIX = "harl_"
SHM_DIR = Path("/dev/shm")
"""Where POSIX shared memory shows as files (Linux); elsewhere stale segments are not looked for."""


@contextlib.contextmanager
def _untracked() -> Iterator[None]:
    """Keep the resource tracker out of ``SharedMemory``'s create, attach and unlink (Python 3.13
    has ``track=False`` for this; before it, registering is switched off for the call)."""
    register, unregister = resource_tracker.register, resource_tracker.unregister

    def skipping(call: Any) -> Any:
        def other_types_only(name: Any, rtype: str) -> None:
            if rtype != "shared_memory":
                call(name, rtype)
        return other_types_only

    resource_tracker.register, resource_tracker.unregister = skipping(register), skipping(unregister)
    try:
        yield
    finally:
        resource_tracker.register, resource_tracker.unregister = register, unregister


def _segment(name: str, create: bool = False, size: int = 0) -> shared_memory.SharedMemory:
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name, create, size, track=False)
    with _untracked():
        return shared_memory.SharedMemory(name, create, size)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def remove_stale() -> list[str]:
    """Unlink the segments of harl processes of this machine that died without closing their envs
    (``kill -9``); the names removed."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in SHM_DIR.iterdir():
            parts = entry.name.split("_")
            if (len(parts) == 3 and entry.name.startswith(PREFIX) and parts[1].isdigit()
                    and not _pid_alive(int(parts[1]))):
                with contextlib.suppress(OSError):
                    entry.unlink()
                    removed.append(entry.name)
    return removed


def create_segment(size: int) -> shared_memory.SharedMemory:
    """A new segment of ``size`` bytes named after this process (stale ones removed first)."""
    remove_stale()
    return _segment(f"{PREFIX}{os.getpid()}_{secrets.token_hex(4)}", create=True, size=size)


def attach_segment(name: str) -> shared_memory.SharedMemory:
    """The segment ``name`` (a worker's view of its parent's)."""
    return _segment(name)


def release(segment: shared_memory.SharedMemory) -> None:
    """Remove the segment's /dev/shm entry, then unmap it where no array still points into it."""
    with contextlib.suppress(FileNotFoundError):
        if sys.version_info >= (3, 13):
            segment.unlink()
        else:
            with _untracked():
                segment.unlink()
    with contextlib.suppress(BufferError):
        segment.close()
