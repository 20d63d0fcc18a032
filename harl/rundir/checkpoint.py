"""Checkpoints: written atomically, found newest-first, read with clear errors.

A checkpoint is one ``torch.save`` file ``checkpoints/iter_<NNNNNNN>.pt`` in the run
directory.  It is written to a temporary file in the same directory, flushed to disk and
renamed over its final name, so a crash mid-write never leaves a half file under a real
name: the newest complete checkpoint is always the latest one listed.

A full disk shows inside ``torch.save`` not as ``OSError`` but as torch's zip writer giving
up (``RuntimeError: [enforce fail at inline_container.cc:...] . unexpected pos ...`` or
"PytorchStreamWriter failed writing file ..."): ``save_checkpoint`` turns that back into
the ``OSError`` behind it, so it ends as one ``ResourceError`` paragraph like any other
failed write (see ``harl.fs.writing``), naming the newest checkpoint that verifies.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import IO, Any

import torch

from harl.errors import CheckpointError
from harl.fs import atomic_write_bytes, remove_stale_temps
from harl.rundir.files import PATTERN, checkpoint_dir, list_checkpoints, writing

FORMAT_VERSION = 1
_ZIP_WRITER_FAILED = ("inline_container.cc", "unexpected pos", "PytorchStreamWriter failed")
"""What torch's zip writer says when a write to the file fails (a full disk, a quota)."""


def save_checkpoint(run_dir: Path, iteration: int, state: dict[str, Any], keep: int) -> Path:
    """Write ``iter_<iteration>.pt`` atomically, then delete all but the newest ``keep``."""
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    folder = checkpoint_dir(run_dir)
    path = folder / f"iter_{iteration:07d}.pt"
    with writing(path, "the checkpoint", run_dir):
        # Only temp files of writers that died mid-write (kill -9): never a live writer's file.
        remove_stale_temps(folder, PATTERN)
        atomic_write_bytes(path, lambda f: _torch_save({"format": FORMAT_VERSION, **state}, f))
        for old in list_checkpoints(run_dir)[:-keep]:
            old.unlink(missing_ok=True)
    return path


def _torch_save(state: dict[str, Any], f: IO[bytes]) -> None:
    """``torch.save``, with a write failure inside its zip writer raised as the ``OSError`` behind it."""
    try:
        torch.save(state, f)
    except RuntimeError as exc:
        if not any(text in str(exc) for text in _ZIP_WRITER_FAILED):
            raise
        cause = _os_error(exc)
        detail = str(exc).strip().splitlines()[0]
        if cause is not None:
            raise OSError(cause.errno, f"{cause.strerror} (torch: {detail})") from exc
        # No OSError behind it (torch wrote through its own stream): a short write is a full disk.
        raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (torch: {detail})") from exc


def _os_error(exc: BaseException) -> OSError | None:
    """The ``OSError`` among ``exc``'s causes and contexts (the file's ``write`` that failed)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError) and current.errno:
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def latest_checkpoint(run_dir: Path) -> Path:
    found = list_checkpoints(run_dir)
    if not found:
        raise CheckpointError(
            f"{run_dir}: no checkpoint in {checkpoint_dir(run_dir)}; a run writes one every "
            "[checkpoint] every_iterations iterations and at its end, so this run stopped "
            f"before its first one: harl train --resume {run_dir} starts it again from the beginning, in place"
        )
    return found[-1]


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The state saved by ``save_checkpoint``; any unreadable file is a ``CheckpointError``."""
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        # weights_only=False: the state holds numpy RNG state; only load your own runs' files.
        state = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as exc:  # noqa: BLE001 - any unreadable file gets the same advice
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else "no detail"
        raise CheckpointError(
            f"{path}: not a readable harl checkpoint ({type(exc).__name__}: {detail}){_older_hint(path)}"
        ) from None
    if not isinstance(state, dict) or "format" not in state:
        raise CheckpointError(
            f"{path}: not a harl checkpoint (a harl checkpoint is a dict with a \"format\" entry; "
            f"this file holds {'a dict without one' if isinstance(state, dict) else type(state).__name__})"
            f"{_older_hint(path)}"
        )
    if state["format"] != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: a harl checkpoint of format {state['format']!r}, but this version of harl "
            f"reads format {FORMAT_VERSION}; use the harl version that wrote it"
        )
    return state


def _older_hint(path: Path) -> str:
    """Advice after a bad checkpoint of a run: the newest other checkpoint of that run."""
    if path.parent.name != checkpoint_dir(Path()).name or not PATTERN.match(path.name):
        return ""  # not one of a run's checkpoints
    others = [p for p in list_checkpoints(path.parent.parent) if p.resolve() != path.resolve()]
    if not others:
        return "; no other checkpoint of this run is left, so the run must start again with harl train"
    older = [p for p in others if _iteration(p) < _iteration(path)] or others
    return f"; pass an older one with --checkpoint {older[-1]}"


def _iteration(path: Path) -> int:
    found = PATTERN.match(path.name)
    return int(found.group(1)) if found else -1
