"""Checkpoints: written atomically, found newest-first, read with clear errors.

A checkpoint is one ``torch.save`` file ``checkpoints/iter_<NNNNNNN>.pt`` in the run
directory.  It is written to a temporary file in the same directory, flushed to disk and
renamed over its final name, so a crash mid-write never leaves a half file under a real
name: the newest complete checkpoint is always the latest one listed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from harl.errors import CheckpointError
from harl.fs import TEMP_SUFFIX, atomic_write_bytes
from harl.run.files import PATTERN, checkpoint_dir, list_checkpoints, writing

FORMAT_VERSION = 1


def save_checkpoint(run_dir: Path, iteration: int, state: dict[str, Any], keep: int) -> Path:
    """Write ``iter_<iteration>.pt`` atomically, then delete all but the newest ``keep``."""
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    folder = checkpoint_dir(run_dir)
    path = folder / f"iter_{iteration:07d}.pt"
    with writing(path, "the checkpoint", run_dir):
        # Temp files left by a process killed mid-write (one writer per run directory).
        if folder.is_dir():
            for stale in folder.glob(f".iter_*{TEMP_SUFFIX}"):
                stale.unlink(missing_ok=True)
        atomic_write_bytes(path, lambda f: torch.save({"format": FORMAT_VERSION, **state}, f))
        for old in list_checkpoints(run_dir)[:-keep]:
            old.unlink(missing_ok=True)
    return path


def latest_checkpoint(run_dir: Path) -> Path:
    found = list_checkpoints(run_dir)
    if not found:
        raise CheckpointError(
            f"{run_dir}: no checkpoint in {checkpoint_dir(run_dir)}; a run writes one every "
            "[checkpoint] every_iterations iterations and at its end, so this run stopped "
            "before its first one: start it again with harl train"
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
