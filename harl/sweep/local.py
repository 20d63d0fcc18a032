"""Trials on this machine: one after the other in this process (``--jobs 1``), or up to N
at once, each in its own ``python -m harl.sweep.trial RUN_DIR`` process (``--jobs N``)
whose output goes to ``train.log`` in its run directory.  Every process sets its own
torch threads (``[run] torch_threads``), so N jobs use about N cores.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Generic, TypeVar

from harl.rundir.signals import EXIT_STATUS_BASE, STOP_SIGNALS
from harl.sweep.state import Display, TrialState
from harl.sweep.trial import LOG, checkpoint_iteration, run_trial


def in_process(states: list[TrialState], display: Display, quiet: bool) -> None:
    """One trial after the other here; a stop signal stops this trial and starts no other."""
    for state in states:
        display.say(f"{state.label}: {state.run_dir}")
        outcome = run_trial(state.run_dir, quiet)
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
    ``new_session``: a terminal's Ctrl-C reaches the driver only (harl tune passes each signal
    on itself); else the children get it too (a sweep).
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


def in_processes(states: list[TrialState], jobs: int, max_retries: int, display: Display) -> None:
    """Up to ``jobs`` trial processes at once; one killed by a signal runs again (resumes)."""
    waiting = list(states)
    pool: Processes[TrialState] = Processes()
    interrupts = 0
    with display:
        try:
            while waiting or pool:
                try:
                    _poll(pool, waiting, jobs, interrupts, max_retries, display)
                except KeyboardInterrupt:
                    # A terminal's Ctrl-C reaches the trials too (one process group): each stops
                    # after its iteration, or at once on a second Ctrl-C.  Start no more.
                    interrupts += 1
                    for state in waiting:
                        state.left_waiting()
                    waiting.clear()
                    if interrupts == 1:
                        display.say("Ctrl-C: the running trials stop after their iteration, with a "
                                    "checkpoint (Ctrl-C again to stop them now)")
        except BaseException:
            pool.close()
            raise


def _poll(pool: Processes[TrialState], waiting: list[TrialState], jobs: int, interrupts: int, max_retries: int,
          display: Display) -> None:
    """Start trials up to ``jobs``, settle those that ended, wait half a second."""
    while waiting and len(pool) < jobs and not interrupts:
        state = waiting.pop(0)
        _start(pool, state, display)
        state.status = "running"
    for state, code in pool.ended():
        if code >= 0 or interrupts:
            _finish(state, code)
        elif state.died(f"its process was killed (signal {-code})", max_retries, display.say):
            waiting.insert(0, state)
        display.update(state)
    for state in pool.running.values():
        display.update(state)
    time.sleep(0.5)


def _finish(state: TrialState, code: int) -> None:
    stopped = {EXIT_STATUS_BASE + int(s) for s in STOP_SIGNALS}
    if code == 0:
        state.status = "finished"
    elif code in stopped:
        state.status = "stopped"
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
    pool.launch(state, "harl.sweep.trial", [str(state.run_dir)], state.run_dir / LOG)
