"""Writes that fail for the file system's reasons (disk full, read-only, a file in the way).

A long run meets a full disk sooner or later.  Every file a run writes (its directory,
``pipeline.toml``, ``metrics.csv``, checkpoints) goes through ``writing``, which turns the
``OSError`` into a ``ResourceError`` saying which file, why in words, and that the newest
complete checkpoint is intact: checkpoints are written to a temporary file and renamed
(``harl.checkpoint.atomic_write_bytes``), so a failed write never touches an older one.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harl.errors import ResourceError
from harl.run_files import list_checkpoints

_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


def blocking_file(path: Path) -> Path | None:
    """The nearest of ``path`` and its parents that exists and is not a directory."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def reason(exc: OSError, path: Path) -> str:
    """Why ``exc`` happened at ``path``, in words."""
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        found = blocking_file(path)
        if found is not None:
            return f"{found} is a file, not a directory"
    return _REASONS.get(exc.errno or 0, exc.strerror or str(exc))


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
    """An ``OSError`` in the block becomes a ``ResourceError`` about writing ``what`` at ``path``."""
    try:
        yield
    except OSError as exc:
        advice = f"; {fix}" if fix else ""
        raise ResourceError(f"{path}: cannot write {what}: {reason(exc, path)}{advice}"
                            f"{checkpoint_note(run_dir)}") from None
