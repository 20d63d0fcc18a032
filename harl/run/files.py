"""The layouts of the folders harl writes, known to their writers and readers alike: a run
directory's checkpoints (the checkpoint writer, the metrics sink, the messages that tell a user
which complete checkpoint survived a failed write) and an export folder's manifest (``harl
export`` writes it, ``harl.load_policy`` reads it)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harl import fs

PATTERN = re.compile(r"^iter_(\d+)\.pt$")

MANIFEST = "policy.json"
"""The manifest beside an export's files: spaces, inputs, outputs, the run's pipeline."""


def checkpoint_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    folder = checkpoint_dir(run_dir)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := PATTERN.match(p.name))]
    return [p for _, p in sorted(found)]


def checkpoint_note(run_dir: Path | None) -> str:
    """What is left of the run: its newest complete checkpoint, which a failed write never touches."""
    if run_dir is None:
        return ""
    found = list_checkpoints(run_dir) if run_dir.is_dir() else []
    if not found:
        return "; no checkpoint of this run was written yet"
    return (f"; the newest complete checkpoint, {found[-1]}, is intact: free some space and continue "
            f"with harl train --resume {run_dir}")


@contextmanager
def writing(path: Path, what: str, run_dir: Path | None = None, fix: str = "") -> Iterator[None]:
    """``harl.fs.writing`` with a note on the run's newest intact checkpoint."""
    with fs.writing(path, what, fix, lambda: checkpoint_note(run_dir)):
        yield
