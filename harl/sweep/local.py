"""Trials on this machine: one after the other in this process (``--jobs 1``), or up to N
at once, each in its own ``python -m harl.sweep.trial RUN_DIR`` process (``--jobs N``)
whose output goes to ``train.log`` in its run directory.  Every process sets its own
torch threads (``[run] torch_threads``), so N jobs use about N cores.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

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


def in_processes(states: list[TrialState], jobs: int, max_retries: int, display: Display) -> None:
    """Up to ``jobs`` trial processes at once; one killed by a signal runs again (resumes)."""
    waiting = list(states)
    running: dict[TrialState, subprocess.Popen[bytes]] = {}
    interrupts = 0
    with display, _terminate_on_error(running):
        while waiting or running:
            try:
                while waiting and len(running) < jobs and not interrupts:
                    state = waiting.pop(0)
                    running[state] = _start(state, display)
                    state.status = "running"
                for state, process in list(running.items()):
                    code = process.poll()
                    if code is not None:
                        del running[state]
                        if code >= 0 or interrupts:
                            _finish(state, code)
                        elif state.died(f"its process was killed (signal {-code})", max_retries, display.say):
                            waiting.insert(0, state)
                    display.update(state)
                time.sleep(0.5)
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


def _start(state: TrialState, display: Display) -> subprocess.Popen[bytes]:
    state.started_at.append(checkpoint_iteration(state.run_dir))
    if not display.live:
        display.say(f"{state.label}: {state.run_dir} (output in {state.run_dir / LOG})")
    with (state.run_dir / LOG).open("ab") as log:
        return subprocess.Popen([sys.executable, "-m", "harl.sweep.trial", str(state.run_dir)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


@contextlib.contextmanager
def _terminate_on_error(running: dict[TrialState, subprocess.Popen[bytes]]) -> Iterator[None]:
    """If the sweep itself fails, stop the trials it started rather than leave them orphaned."""
    try:
        yield
    except BaseException:
        for process in running.values():
            process.terminate()
        for process in running.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)
        raise
