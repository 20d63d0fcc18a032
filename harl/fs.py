"""Writes that fail for the file system's reasons (disk full, read-only, a file in the way).

A long run meets a full disk sooner or later.  Every file a run writes (its directory,
``pipeline.toml``, ``metrics.csv``, checkpoints) goes through ``writing``, which turns the
``OSError`` into a ``ResourceError`` saying which file, why in words, and that the newest
complete checkpoint is intact: checkpoints are written to a temporary file and renamed
(``harl.rundir.checkpoint.atomic_write_bytes``), so a failed write never touches an older one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from harl.errors import ResourceError

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


@contextmanager
def writing(path: Path, what: str, fix: str = "", note: Callable[[], str] = str) -> Iterator[None]:
    """An ``OSError`` in the block becomes a ``ResourceError`` about writing ``what`` at ``path``;
    ``note()`` adds what is left (asked only after a failure)."""
    try:
        yield
    except OSError as exc:
        advice = f"; {fix}" if fix else ""
        raise ResourceError(f"{path}: cannot write {what}: {reason(exc, path)}{advice}{note()}") from None


TEMP_SUFFIX = ".tmp"


def _writer_tag() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def atomic_write_bytes(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(file)`` on a temp file next to ``path``, fsync, then rename it into place.

    If ``write`` raises, the temp file is removed and ``path`` is untouched (an older file
    under that name stays as it was).  The temp file is named after this host and process,
    so ``remove_stale_temps`` can tell a dead writer's leftovers from a live writer's file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{_writer_tag()}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path))  # mkstemp's 0600 would outlive the rename
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _umask() -> int:
    """This process's umask (read from /proc where it can be, so that no other thread ever sees it changed)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode_for(path: Path) -> int:
    """The permissions a file written at ``path`` gets: those of the file it replaces, else what
    ``open()`` gives a new file (0666 less the umask: 0644 by default), like every other file harl writes."""
    with contextlib.suppress(OSError):
        return os.stat(path).st_mode & 0o7777
    return 0o666 & ~_umask()


def remove_stale_temps(folder: Path, name: re.Pattern[str]) -> list[Path]:
    """Remove the temp files in ``folder`` of writes of files matching ``name`` whose writer, a
    process of this host, is gone (killed mid-write); another process's file in progress, or
    one of another host (a shared file system), is left alone.  The files removed."""
    removed = []
    # .<name>.<host>-<pid>.<random>.tmp (mkstemp's random part has no dots)
    ours = re.compile(rf"^\.(?P<name>.+)\.{re.escape(socket.gethostname())}-(?P<pid>\d+)\.[^.]+"
                      rf"{re.escape(TEMP_SUFFIX)}$")
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            found = ours.match(entry.name)
            if found and name.match(found["name"]) and not _alive(int(found["pid"])):
                with contextlib.suppress(OSError):
                    entry.unlink()
                    removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: another user's process
        return True
    return True


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
