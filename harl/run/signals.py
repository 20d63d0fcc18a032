"""How a training run answers Ctrl-C, a scheduler's SIGTERM and a pre-emption notice.

- The first SIGINT (Ctrl-C), SIGTERM (Slurm, Kubernetes, ``timeout``, ``kill``) or SIGUSR1
  (a pre-emption notice, e.g. Slurm's ``--signal=USR1@60``) asks the run to stop after
  the current iteration, with an exact checkpoint.
- A second one, while an iteration still runs, stops at once (``KeyboardInterrupt``): the
  checkpoint then holds the last whole iteration's counters with what is known of the
  envs (see ``OnPolicyCollector.state_dict``), and nothing talks to the env workers again
  except to close them, so a reply left half-read in a pipe cannot be misread.
- Once the run is shutting down (writing its last checkpoint, closing the envs) further
  signals only print that it is: a checkpoint write is never cut off by an impatient
  second Ctrl-C.  ``kill -9`` still stops it; the newest complete checkpoint survives that.

The process then exits with 128 + the number of the first signal: 130 for Ctrl-C, 143
for SIGTERM, 138 for SIGUSR1 (the shell's convention for "ended by signal N").  Only the
main thread can catch signals; elsewhere the defaults stay.  A signal that was ignored
when the run began (SIGINT in a background job of a script) stays ignored.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)

EXIT_STATUS_BASE = 128
"""An interrupted run exits with ``EXIT_STATUS_BASE + signal number``."""


def signal_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def exit_status(signum: int) -> int:
    """The conventional exit status of a process stopped by ``signum`` (130 for Ctrl-C)."""
    return EXIT_STATUS_BASE + int(signum)


class GracefulStop:
    """Installs the stop handlers for the duration of a ``with`` block (see the module doc).

    ``signum``: the first stop signal received (0: none).  ``requested``: stop after the
    iteration.  ``shutting_down()``: from now on, signals only print a message.
    """

    def __init__(self, message: Callable[[str], Any]) -> None:
        self.message = message
        self.requested = False
        self.signum = 0
        self._shutting_down = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal_name(signum)
        if self._shutting_down:
            self.message(f"{name}: already stopping (writing the checkpoint, closing the environments); "
                         "please wait")
            return
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.signum = signum
        again = "Ctrl-C" if signum == signal.SIGINT else name
        self.message(f"{name}: stopping after this iteration, with a checkpoint ({again} again to stop now)")

    def shutting_down(self) -> None:
        """The run is saving and closing: signals from now on are answered with a message."""
        self._shutting_down = True

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()


@contextmanager
def shielded(message: Callable[[str], Any]) -> Iterator[None]:
    """Stop signals only print a message inside the block (closing envs at the very end)."""
    with GracefulStop(message) as stop:
        stop.shutting_down()
        yield


def ignore_in_worker() -> None:
    """An env worker leaves stopping to its parent: a signal sent to the whole process
    group (Ctrl-C, Slurm's SIGTERM to every process of a job) must not kill it mid-rollout.
    The parent closes it (and kills it if it does not exit)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
