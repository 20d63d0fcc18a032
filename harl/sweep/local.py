"""Trials on this machine: one after the other in this process (``--jobs 1``), or up to N
at once, each in its own ``python -m harl.sweep.trial --driver PID RUN_DIR`` process (``--jobs N``)
whose output goes to ``train.log`` in its run directory.  Every process sets its own
torch threads (``[run] torch_threads``), so N jobs use about N cores.

The driver (a sweep's or a suite's) and its trials, under stop signals (``driver_stops``):

- Its trial processes start in their own session, so a terminal's Ctrl-C reaches the driver only,
  and the driver passes each SIGINT, SIGTERM or SIGUSR1 on to them, whoever sent it (``kill -INT
  DRIVER`` used to print the notice and let the trials run to their end): the first stops them
  after their iteration with a checkpoint, a second at once; no trial starts after it.  The driver
  exits with 128 + the first signal (130 Ctrl-C, 143 SIGTERM), never killed by it.
- They die with the driver (``harl.sweep.trial.die_with``): a driver killed with SIGKILL leaves no
  trial running on as an orphan; each gets SIGTERM and stops after its iteration with a checkpoint.
- A resume that finds a run still written by another process (such a trial, finishing its
  iteration) waits for it up to ``HELD_WAIT_S`` (``wait_for_holders``), then says what holds the
  run and runs nothing, where the trial used to meet the run's lock and fail.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Generic, TypeVar

from harl.errors import HarlError
from harl.rundir import signals as run_signals
from harl.rundir.lock import LOCK_FILE, RunLockedError, take
from harl.rundir.signals import EXIT_STATUS_BASE, STOP_SIGNALS, signal_name
from harl.sweep.state import Display, TrialState
from harl.sweep.trial import LOG, checkpoint_iteration, driver_args, run_trial

HELD_WAIT_S = 120.0
"""How long a resume waits for a run another process still writes (a trial of the driver it
follows, killed or stopped, finishing its iteration) before it says so and runs nothing."""


class Stops:
    """The stop signals a sweep's or suite's driver received, in order (``driver_stops``)."""

    def __init__(self) -> None:
        self.signals: list[int] = []
        self.inline = False
        """A trial trains in this process (``--jobs 1``): outside its own handlers (its setup), a
        second signal stops it at once, as a second Ctrl-C stops ``harl train``."""

    @property
    def requested(self) -> bool:
        return bool(self.signals)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        run_signals._note(signum, request=True)  # first_signal(): the exit status, 128 + this one
        self.signals.append(signum)
        if self.inline and len(self.signals) > 1:
            raise KeyboardInterrupt

    def notice(self, display: Display, what: str = "the running trials") -> None:
        """The driver's line for its first signal."""
        name = signal_name(self.signals[0])
        display.notice(f"{name}: {what} stop after their iteration, with a checkpoint, and no other starts "
                       f"({name} again to stop them now)")


_active: Stops | None = None


@contextlib.contextmanager
def driver_stops() -> Iterator[Stops]:
    """SIGINT, SIGTERM and SIGUSR1 to a driver, for the block: recorded (``Stops``), not raised, so
    that the backends pass each on to the trials and the driver ends with its records and results
    written, exiting 128 + the first (``harl.rundir.signals.first_signal``).  A block inside another
    shares the outer one's; a signal ignored when the block began (a background job's SIGINT) stays
    ignored; off the main thread nothing is installed."""
    global _active
    if _active is not None:
        yield _active
        return
    stops = Stops()
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, stops.handle)
    _active = stops
    try:
        yield stops
    finally:
        _active = None
        for number, handler in previous.items():
            signal.signal(number, handler)


def stops_now() -> Stops:
    """The driver's ``Stops`` (a fresh one, with no handler, outside ``driver_stops``)."""
    return _active if _active is not None else Stops()


def holder(run_dir: Path) -> str:
    """Who writes ``run_dir`` ("PID N on HOST", from its run lock), '' when no live process does."""
    try:
        with take(run_dir):
            return ""
    except RunLockedError:
        try:
            return (run_dir / LOCK_FILE).read_text(encoding="utf-8").strip() or "another process"
        except OSError:
            return "another process"


def wait_for_holders(states: Sequence[TrialState], display: Display, stops: Stops,
                     wait_s: float | None = None) -> None:
    """Wait until no other process writes the trials' run directories, up to ``wait_s`` (default
    ``HELD_WAIT_S``): a resume started while the trials of the driver it follows still stop (they
    finish their iteration and write a checkpoint first).  Then a ``HarlError`` naming each run and
    its writer, before any trial starts (they used to meet its lock and fail, and the results of
    half-finished runs were written as final); a stop signal ends the wait."""
    wait_s = HELD_WAIT_S if wait_s is None else wait_s
    deadline = time.monotonic() + wait_s
    told: set[Path] = set()
    while not stops.requested:
        held = [(s, who) for s in states if (who := holder(s.run_dir))]
        if not held:
            return
        for state, who in held:
            if state.run_dir not in told:
                told.add(state.run_dir)
                display.notice(f"{state.label}: {state.run_dir} is still written by {who} (a trial of an earlier "
                               f"driver, stopping after its iteration?); waiting up to {wait_s:.0f} s for it to end")
        if time.monotonic() >= deadline:
            runs = "; ".join(f"{s.run_dir} by {who}" for s, who in held)
            raise HarlError(f"{len(held)} run(s) are still written by another process after {wait_s:.0f} s: "
                            f"{runs}. Nothing was run: wait for that process to end (a trial of a stopped or "
                            "killed driver ends after its iteration, with a checkpoint) or stop it, then run this "
                            "--resume again")
        time.sleep(0.5)


def in_process(states: list[TrialState], display: Display, quiet: bool) -> None:
    """One trial after the other here; a stop signal stops this trial and starts no other (one that
    came while a trial was being set up, outside its own handlers, stops it after its first iteration)."""
    stops = stops_now()
    for state in states:
        if stops.requested:
            break
        display.say(f"{state.label}: {state.run_dir}")
        stops.inline = True
        try:
            outcome = run_trial(state.run_dir, quiet, callbacks=[lambda row: stops.requested])
        finally:
            stops.inline = False
        state.status, state.message = outcome.status, outcome.message
        state.started_at.append(outcome.started_at)
        if outcome.status == "failed":
            display.say(f"{state.label}: harl: {outcome.message}")
        if outcome.status == "stopped":
            break


K = TypeVar("K")


class Processes(Generic[K]):
    """Child processes ``python -m MODULE ARGS...`` by key, each one's output appended to a log.

    What ``--jobs N`` trials (``in_processes``), ``--vectorize --jobs N`` populations
    (``harl.sweep.population``) and ``harl tune``'s local runs (``harl.tune.runners.Local``)
    share: starting, polling, passing a signal on, and stopping them all when the driver fails.
    ``new_session``: a terminal's Ctrl-C reaches the driver only, which passes each signal on
    itself (``stop``); else the children get it too.
    """

    def __init__(self, new_session: bool = False) -> None:
        self.new_session = new_session
        self.running: dict[subprocess.Popen[bytes], K] = {}

    def __len__(self) -> int:
        return len(self.running)

    def launch(self, key: K, module: str, args: Sequence[str], log: Path) -> None:
        with log.open("ab") as out:
            process = subprocess.Popen([sys.executable, "-m", module, *args], stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=self.new_session)
        self.running[process] = key

    def ended(self) -> list[tuple[K, int]]:
        """(key, exit status; -N: killed by signal N) of each process that ended since the last call."""
        done = [(p, k) for p, k in self.running.items() if p.poll() is not None]
        for process, _ in done:
            del self.running[process]
        return [(key, int(process.returncode)) for process, key in done]

    def stop(self, signum: int) -> None:
        for process in self.running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signum)

    def close(self) -> None:
        """The driver itself failed: stop what it started rather than leave it orphaned."""
        self.stop(signal.SIGTERM)
        for process in self.running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)


def forward(pool: Processes[Any], stops: Stops, told: int, display: Display) -> int:
    """Pass the signals the driver received since ``told`` on to the pool's processes (the first:
    stop after the iteration; the next: now); the new ``told``."""
    if told == 0 and stops.requested:
        stops.notice(display)
    for signum in stops.signals[told:]:
        pool.stop(signum)
    return len(stops.signals)


def in_processes(states: list[TrialState], jobs: int, max_retries: int, display: Display) -> None:
    """Up to ``jobs`` trial processes at once, each in its own session, dying with the driver; one
    killed by a signal runs again (resumes).  The driver's stop signals are passed on (``forward``)."""
    waiting = list(states)
    pool: Processes[TrialState] = Processes(new_session=True)
    stops = stops_now()
    told = 0
    with display:
        try:
            while waiting or pool:
                if len(stops.signals) > told:
                    for state in waiting:
                        state.left_waiting()
                    waiting.clear()
                    told = forward(pool, stops, told, display)
                _poll(pool, waiting, jobs, bool(told), max_retries, display)
        except BaseException:
            pool.close()
            raise


def _poll(pool: Processes[TrialState], waiting: list[TrialState], jobs: int, stopping: bool, max_retries: int,
          display: Display) -> None:
    """Start trials up to ``jobs``, settle those that ended, wait half a second."""
    while waiting and len(pool) < jobs and not stopping:
        state = waiting.pop(0)
        _start(pool, state, display)
        state.status = "running"
    for state, code in pool.ended():
        if code >= 0 or stopping:
            _finish(state, code, stopping)
        elif state.died(f"its process was killed (signal {-code})", max_retries, display.say):
            waiting.insert(0, state)
        display.update(state)
    for state in pool.running.values():
        display.update(state)
    time.sleep(0.5)


def _finish(state: TrialState, code: int, stopping: bool = False) -> None:
    """A trial process's end: finished (0), stopped (128 + a stop signal; or killed by the signal the
    driver passed on before its handlers were installed, its first second), else failed."""
    stopped = {EXIT_STATUS_BASE + int(s) for s in STOP_SIGNALS}
    if code == 0:
        state.status = "finished"
    elif code in stopped:
        state.status = "stopped"
    elif stopping and code < 0:
        state.left_waiting()
        state.message = f"its process ended by signal {-code} as the sweep stopped"
    else:
        state.status = "failed"
        state.message = last_harl_error(state.run_dir / LOG) or f"exit status {code}; see {state.run_dir / LOG}"


def last_harl_error(log: Path) -> str:
    """The message of the last ``harl: ...`` paragraph in a trial's log ('' if none)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    found = re.findall(r"^harl: (.*?)(?=\n\S|\Z)", text, flags=re.S | re.M)
    return found[-1].strip() if found else ""


def _start(pool: Processes[TrialState], state: TrialState, display: Display) -> None:
    state.started_at.append(checkpoint_iteration(state.run_dir))
    if not display.live:
        display.say(f"{state.label}: {state.run_dir} (output in {state.run_dir / LOG})")
    pool.launch(state, "harl.sweep.trial", [*driver_args(), str(state.run_dir)], state.run_dir / LOG)
