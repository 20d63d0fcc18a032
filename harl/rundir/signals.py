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

A second signal after the rollout is collected is held back (``hold`` / ``release``): the
returns, the update, the iteration's evaluation and its row finish, and the run stops right
after (``release`` raises ``KeyboardInterrupt`` then), so the exit checkpoint is always a whole
iteration's (networks, optimisers, counters, the collector's episode starts and the RNG states
of one iteration's end).  During collection it stops at once: the collector keeps the episode
starts of the last whole collect for that.

An env stepped in this process (the inline backend, evaluation envs) cannot be waited on from
outside: ``EnvWatch`` marks each of its calls, and a watchdog thread sends this process
``WATCH_SIGNAL`` when one has hung, either for ``STOP_WAIT_S`` after a stop request (the handler
raises ``StopNow``) or past its ``step_timeout_s`` (the handler raises ``EnvCrashedError``).  A
Python-level hang (a loop, a wait on a lock, a socket, ``time.sleep``) is interrupted so.  A hang
inside C code that never returns to the interpreter cannot be: Python runs signal handlers only
between bytecodes.  If the call is still in flight ``HARD_EXIT_S`` after the kick, the watchdog
(when it can run: the C code released the GIL) writes one line and ends the process with the
status it would have had (``os._exit``; the newest complete checkpoint stays the newest; the
running iteration and those since the last scheduled checkpoint are lost); C code that holds
the GIL forever blocks every thread, and only SIGKILL (the scheduler's, after its grace) ends it.
"""

from __future__ import annotations

import os
import select
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


WATCH_SIGNAL = signal.SIGUSR2
"""What the env watchdog sends this process's main thread to interrupt a hung in-process env call."""
WATCH_POLL_S = 0.2
"""How often the watchdog looks at the env call in flight."""
HARD_EXIT_S = 15.0
"""A hung in-process env call still in flight this long after the watchdog's kick (C code that
never returns to the interpreter): the process exits without a last checkpoint (``os._exit``)."""


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
    WATCH.signalled_at, WATCH.signalled = None, 0
    if threading.current_thread() is threading.main_thread():
        for signum in _latched:
            if signal.getsignal(signum) is signal.SIG_IGN:
                signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    _latched.clear()


def ignore_until_exit() -> None:
    """The command is done (its run finished, its checkpoint written, its status known): stop signals
    are ignored from here to the process's exit, which then has the command's status.  Without this a
    Ctrl-C landing after ``main`` returned (or while Python shuts down) is an uncaught
    ``KeyboardInterrupt``, and Python ends the process by SIGINT: exit status -2 for a run that had
    finished.  ``reset`` puts the defaults back (for a process that goes on, and tests)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            _latched.add(signum)
            signal.signal(signum, signal.SIG_IGN)


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
        WATCH.signalled_at, WATCH.signalled = None, 0
        self.message = message
        self.requested = False
        self.signum = 0
        self._shutting_down = False
        self._holding = False
        self._held = False
        self._previous: dict[int, Any] = {}

    def hold(self) -> None:
        """From here to ``release``, a second signal waits (the networks are updating: the exit
        checkpoint must not hold half-updated ones, and the iteration is about to be whole)."""
        global _active
        self._holding, self._held = True, False
        _active = self

    def release(self) -> None:
        """The iteration is whole (counted, its row written): a second signal that came during the
        hold now stops the run (``KeyboardInterrupt``); otherwise nothing happens."""
        held, self._holding, self._held = self._held, False, False
        if held and not self._shutting_down:
            self._shutting_down = True  # one "stop now" only: a third signal cannot cut the exit short
            raise KeyboardInterrupt

    @property
    def holding(self) -> bool:
        return self._holding

    def __enter__(self) -> GracefulStop:
        global _active
        _active = self
        WATCH.start()  # before any signal: a hang in C code never lets the handlers below run
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
            if self._holding:
                if not self._held:
                    self._held = True
                    self.message(f"{name}: stopping as soon as the networks' update and this iteration's row are "
                                 "done, so that the checkpoint holds a whole iteration")
                return
            self._shutting_down = True  # one "stop now" only: a third signal cannot cut the exit short
            raise KeyboardInterrupt
        self.requested = True
        self.signum = signum
        again = "Ctrl-C" if signum == signal.SIGINT else name
        self.message(f"{name}: stopping after this iteration, with a checkpoint ({again} again to stop now)")

    def shutting_down(self) -> None:
        """The run is saving and closing: signals from now on are answered with a message."""
        self._shutting_down = True
        self._holding = self._held = False

    def __exit__(self, *exc: object) -> None:
        self._holding = self._held = False
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


_active: GracefulStop | None = None
"""The GracefulStop block entered last (``hold_stops`` / ``release_stops`` act on it)."""


def hold_stops() -> None:
    """``GracefulStop.hold`` on the active block (the Trainer: when the update starts)."""
    if _active is not None:
        _active.hold()


def release_stops() -> None:
    """``GracefulStop.release`` on the active block (the Trainer: once the iteration's row is written)."""
    if _active is not None:
        _active.release()


def _holding() -> bool:
    return _active is not None and _active.holding


class EnvWatch:
    """The env call in flight in this process's main thread, and the watchdog that interrupts it
    when it hangs (see the module doc).  ``InlineVectorEnv`` marks every call::

        call = WATCH.enter(timeout_s, describe)   # before env.step / env.reset
        ...                                       # the call
        WATCH.leave(call)

    ``enter`` costs a clock read and a few stores (about 0.3 us; an MPE env step is about 70 us).
    """

    def __init__(self) -> None:
        self.call = 0
        """Number of the call in flight (0: none)."""
        self.since = 0.0
        self.timeout_s = 0.0
        self.describe: Any = None
        self._calls = 0
        self._thread: threading.Thread | None = None
        self._wakeup: int | None = None
        self.signalled_at: float | None = None
        """When the wakeup fd showed the first stop signal (None: not yet), and which (``signalled``)."""
        self.signalled = 0
        self._kick: tuple[int, str] | None = None
        """(call, "stop" or "timeout") the watchdog interrupted, until the handler acts on it."""
        self._lock = threading.Lock()

    def enter(self, timeout_s: float, describe: Any) -> int:
        self._calls += 1
        self.since, self.timeout_s, self.describe = time.monotonic(), timeout_s, describe
        self.call = self._calls
        if timeout_s > 0 and self._thread is None:
            self.start()
        return self._calls

    def leave(self, call: int) -> None:
        if self.call == call:
            self.call = 0

    def start(self) -> None:
        """Install the kick's handler and start the watchdog (main thread only; once per process).

        The watchdog also reads the signals this process receives from Python's wakeup fd
        (``signal.set_wakeup_fd``, when no one else uses it): Python's C-level handler writes each
        signal's number there at once, so a stop signal is seen even while the main thread is
        stuck in C code and the Python handler cannot run.
        """
        with self._lock:
            if self._thread is not None or threading.current_thread() is not threading.main_thread():
                return
            if signal.getsignal(WATCH_SIGNAL) not in (signal.SIG_DFL, None):
                return  # the signal is someone else's: no watchdog
            signal.signal(WATCH_SIGNAL, self._handle)
            self._wakeup = self._listen()
            self._thread = threading.Thread(target=self._watch, name="harl-env-watch", daemon=True)
            self._thread.start()

    def _listen(self) -> int | None:
        """The read end of a pipe Python's signal handler writes signal numbers to (None: taken)."""
        read, write = os.pipe()
        os.set_blocking(write, False)
        try:
            previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except (ValueError, OSError):
            previous = None
        if previous != -1:  # someone else's wakeup fd (an event loop): put it back, do without
            if previous is not None:
                signal.set_wakeup_fd(previous)
            os.close(read)
            os.close(write)
            return None
        return read

    def _seen(self, timeout: float) -> None:
        """Wait up to ``timeout`` for signals on the wakeup fd; note a stop signal's arrival."""
        if self._wakeup is None:
            time.sleep(timeout)
            return
        ready, _, _ = select.select([self._wakeup], [], [], timeout)
        if not ready:
            return
        try:
            data = os.read(self._wakeup, 512)
        except OSError:
            return
        for signum in data:
            if signum in STOP_SIGNALS and self.signalled_at is None:
                self.signalled_at, self.signalled = time.monotonic(), signum

    def _requested(self) -> float | None:
        """When a stop was asked for: the Python handler's note, or the wakeup fd's (C code hangs)."""
        times = [t for t in (_requested_at, self.signalled_at) if t is not None]
        return min(times) if times else None

    def _due(self, now: float) -> str | None:
        """Why the call in flight should be interrupted now (None: it should not)."""
        waited = now - self.since
        if self.timeout_s > 0 and waited >= self.timeout_s:
            return "timeout"
        requested = self._requested()
        if requested is not None and min(waited, now - requested) >= STOP_WAIT_S and not _holding():
            return "stop"
        return None

    def _watch(self) -> None:
        main = threading.main_thread()
        kicked_at = 0.0
        while main.is_alive():
            self._seen(WATCH_POLL_S)
            call, now = self.call, time.monotonic()
            if not call:
                continue
            if self._kick is not None and self._kick[0] == call:
                if now - kicked_at >= HARD_EXIT_S:
                    self._hard_exit(self._kick[1], now - self.since)
                continue
            why = self._due(now)
            if why is None:
                requested = self._requested()
                if self._kick is None and requested is not None and \
                        min(now - requested, now - self.since) >= HARD_EXIT_S + STOP_WAIT_S:
                    self._hard_exit("stop", now - self.since)  # held (the evaluation's env hung): no safe save
                continue
            self._kick, kicked_at = (call, why), now
            try:
                signal.pthread_kill(main.ident, WATCH_SIGNAL)  # type: ignore[arg-type]
            except (OSError, ValueError):
                return

    def _hard_exit(self, why: str, waited: float) -> None:
        first = _first or self.signalled
        status = exit_status(first) if why == "stop" and first else 2
        what = f"an environment call in this process ({self._what()}) did not return within {waited:.0f} s" + (
            " of the stop request" if why == "stop" else f" (step_timeout_s = {self.timeout_s:g})")
        line = (f"harl: {what}, nor when interrupted (a hang inside C code, which Python cannot interrupt); "
                f"exiting with {status} without a last checkpoint: the newest complete one is kept, and "
                "harl train --resume continues from it\n")
        try:
            os.write(2, line.encode("utf-8", "replace"))
        finally:
            os._exit(status)

    def _what(self) -> str:
        """``describe`` in words: (env name, index, what it was doing) -> "Environment 3 (mpe env) while stepping"."""
        if isinstance(self.describe, tuple) and len(self.describe) == 3:
            name, k, doing = self.describe
            return f"Environment {k} ({name}) while {doing}"
        return str(self.describe)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        kick, self._kick = self._kick, None
        if kick is None or kick[0] != self.call:
            return  # the call returned meanwhile
        waited = time.monotonic() - self.since
        if kick[1] == "timeout":
            from harl.errors import EnvCrashedError

            raise EnvCrashedError(
                f"{self._what()} did not return within {self.timeout_s:g} s (it was interrupted after "
                f"{waited:.0f} s). An env call should never take this long: raise [collector] step_timeout_s for "
                "a slow simulator (0: no limit)")
        if _holding():
            return
        if _active is not None:
            _active.shutting_down()
        raise StopNow(f"{self._what()} did not return within {STOP_WAIT_S:g} s of the stop request; "
                      "it was interrupted")


WATCH = EnvWatch()
"""This process's env watch (``InlineVectorEnv`` marks its calls on it)."""
