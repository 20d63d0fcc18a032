"""Where a run directory keeps its checkpoints: known to the checkpoint writer and to the
messages that tell a user which complete checkpoint survived a failed write."""

from __future__ import annotations

import re
from pathlib import Path

PATTERN = re.compile(r"^iter_(\d+)\.pt$")


def checkpoint_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    folder = checkpoint_dir(run_dir)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := PATTERN.match(p.name))]
    return [p for _, p in sorted(found)]
