"""Checkpoints: written atomically, found newest-first, read with clear errors.

A checkpoint is one ``torch.save`` file ``checkpoints/iter_<NNNNNNN>.pt`` in the run
directory.  It is written to a temporary file in the same directory, flushed to disk and
renamed over its final name, so a crash mid-write never leaves a half file under a real
name: the newest complete checkpoint is always the latest one listed.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

from harl.errors import CheckpointError

PATTERN = re.compile(r"^iter_(\d+)\.pt$")
FORMAT_VERSION = 1


def checkpoint_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def atomic_write_bytes(path: Path, write: Any) -> None:
    """Call ``write(file)`` on a temp file next to ``path``, fsync, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_checkpoint(run_dir: Path, iteration: int, state: dict[str, Any], keep: int) -> Path:
    path = checkpoint_dir(run_dir) / f"iter_{iteration:07d}.pt"
    atomic_write_bytes(path, lambda f: torch.save({"format": FORMAT_VERSION, **state}, f))
    for old in list_checkpoints(run_dir)[:-keep]:
        old.unlink(missing_ok=True)
    return path


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    folder = checkpoint_dir(run_dir)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := PATTERN.match(p.name))]
    return [p for _, p in sorted(found)]


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
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        state = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as exc:  # noqa: BLE001 - any unreadable file gets the same advice
        older = [p.name for p in list_checkpoints(path.parent.parent) if p != path]
        hint = (f"; pass an older one with --checkpoint (found: {', '.join(older)})" if older
                else "; no older checkpoint is left, so the run must start again")
        raise CheckpointError(
            f"{path}: not a readable harl checkpoint ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no detail'}){hint}"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: not a harl checkpoint of format {FORMAT_VERSION} (found "
            f"{state.get('format') if isinstance(state, dict) else type(state).__name__})"
        )
    return state
