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

Signals cannot race the exit: once a stop signal has arrived, leaving a ``GracefulStop``
block does not put the previous handlers back but ignores the stop signals (SIG_IGN) until
the process exits with the first one's status (``first_signal``).  A Python handler would
not do: a second Ctrl-C landing between the last handler and the exit would kill the
process with -2 (a SIGTERM with -15), and Python itself puts the defaults back while it
shuts down, which an ignored signal survives.  A wait on env workers that may never answer (a hung simulator) asks
``stop_waiting`` and gives up a few seconds after a stop request (``StopNow``).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)

EXIT_STATUS_BASE = 128
"""An interrupted run exits with ``EXIT_STATUS_BASE + signal number``."""


STOP_WAIT_S = 3.0
"""After a stop request, a wait on an env worker that has lasted this long is given up (``stop_waiting``)."""

_first = 0
"""The first stop signal this process received (0: none yet); see ``first_signal``."""
_requested_at: float | None = None
"""``time.monotonic()`` of the first request to stop (None: none yet)."""


class StopNow(KeyboardInterrupt):
    """A stop request that cannot wait for the iteration to end (an env worker did not answer
    within ``STOP_WAIT_S`` of it): the Trainer handles it like a second Ctrl-C."""


def first_signal() -> int:
    """The first stop signal this process received (0: none): what it should exit with."""
    return _first


def stop_waiting(waited_s: float) -> bool:
    """Whether a wait that has lasted ``waited_s`` seconds should be given up: a stop was
    requested at least ``STOP_WAIT_S`` ago and the wait has lasted that long too (so a slow
    but healthy step still finishes its iteration)."""
    return (_requested_at is not None and waited_s >= STOP_WAIT_S
            and time.monotonic() - _requested_at >= STOP_WAIT_S)


def _note(signum: int, request: bool) -> None:
    global _first, _requested_at
    if not _first:
        _first = signum
    if request and _requested_at is None:
        _requested_at = time.monotonic()


_latched: set[int] = set()
"""Stop signals this module set to SIG_IGN after a first one (a later ``GracefulStop`` still handles them)."""


def reset() -> None:
    """Forget the signals received (for a process that runs several trainings, and tests);
    puts back the default handlers of the signals ignored since the first one."""
    global _first, _requested_at
    _first, _requested_at = 0, None
    if threading.current_thread() is threading.main_thread():
        for signum in _latched:
            if signal.getsignal(signum) is signal.SIG_IGN:
                signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    _latched.clear()


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
        global _requested_at
        _requested_at = None  # a new run's waits are not cut short by an earlier run's stop request
        self.message = message
        self.requested = False
        self.signum = 0
        self._shutting_down = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN or signum in _latched:
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal_name(signum)
        _note(signum, request=not self._shutting_down)
        if self._shutting_down:
            self.message(f"{name}: already stopping (writing the checkpoint, closing the environments); "
                         "please wait")
            return
        if self.requested:
            self._shutting_down = True  # one "stop now" only: a third signal cannot cut the exit short
            raise KeyboardInterrupt
        self.requested = True
        self.signum = signum
        again = "Ctrl-C" if signum == signal.SIGINT else name
        self.message(f"{name}: stopping after this iteration, with a checkpoint ({again} again to stop now)")

    def shutting_down(self) -> None:
        """The run is saving and closing: signals from now on are answered with a message."""
        self._shutting_down = True

    def __exit__(self, *exc: object) -> None:
        # After a stop signal the defaults never come back: one more signal before the exit
        # would kill the process instead of letting it exit with the first one's status.
        for signum, previous in self._previous.items():
            if _first:
                _latched.add(signum)
            signal.signal(signum, signal.SIG_IGN if _first else previous)
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
