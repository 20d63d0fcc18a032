"""One writer per run directory: an ``fcntl.flock`` on ``RUN_DIR/.lock``, held for the run's life.

``harl train`` and ``--resume`` (and each sweep trial) take it before they write anything;
a second writer of the same directory stops with the PID and host of the first.  The OS
releases the lock when its process ends, however it ends (``kill -9`` included), so a
stale lock file never blocks: only a live process holds the lock.  Readers (``harl eval``,
``export``, ``render``, ``plot``) never take it.  The file's text (PID and host) is only
for the message; the lock itself is the ``flock``.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from typing import IO

from harl.errors import HarlError

LOCK_FILE = ".lock"


class RunLockedError(HarlError):
    """Another live process writes this run directory."""


class RunLock:
    """A held lock; ``release()`` (or the process's end) lets another writer in."""

    def __init__(self, path: Path, file: IO[str] | None) -> None:
        self.path = path
        self._file: IO[str] | None = file

    @property
    def held(self) -> bool:
        return self._file is not None

    def release(self) -> None:
        if self._file is not None:
            import fcntl

            with contextlib.suppress(OSError):
                fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def take(directory: Path, what: str = "run") -> RunLock:
    """Lock ``directory`` for this process, or ``RunLockedError`` naming the live holder."""
    import fcntl

    path = directory / LOCK_FILE
    try:
        file = path.open("a+", encoding="utf-8")
    except OSError:  # a read-only directory: the run's first write says so, in its own words
        return RunLock(path, None)
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.seek(0)
        holder = file.read().strip() or "another process"
        file.close()
        raise RunLockedError(
            f"{directory}: this {what} is being written by {holder}; one process writes a {what} directory "
            f"at a time: wait for it to end (or stop it), then resume; harl eval, plot, render and export "
            "may read it meanwhile") from None
    except OSError:  # a filesystem without flock (some network mounts): the run goes on unguarded
        file.close()
        return RunLock(path, None)
    file.seek(0)
    file.truncate()
    file.write(f"PID {os.getpid()} on {socket.gethostname()}\n")
    file.flush()
    return RunLock(path, file)
