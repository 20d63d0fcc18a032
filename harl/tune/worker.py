"""One run of a trial, or a trial's seeds as one population, in whichever process runs it,
with the pruning callback (``harl.tune.pruning``).

``python -m harl.tune.worker RUN_DIR`` runs (or resumes) the run, output in its train.log,
and writes ``outcome.json`` beside it; ``python -m harl.tune.worker --population RUN_DIR...``
trains the runs as one population (``harl.sweep.population``'s) with the callback.

``--driver PID`` (the local driver gives it): the worker dies with its driver.  It starts in its
own session, so a driver killed with SIGKILL would otherwise leave it running, holding its run
lock against the workers of ``harl tune --resume``.  On Linux the kernel sends the worker SIGTERM
when the driver dies (``prctl(PR_SET_PDEATHSIG)``); elsewhere a thread watches the parent PID.
SIGTERM, not SIGKILL: the run stops after its iteration with a checkpoint, which the resume continues.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from harl.sweep.population import OUTCOME, train_dirs
from harl.sweep.trial import Outcome, exit_code, run_logged
from harl.tune.pruning import Pruning


def run_one(run_dir: Path) -> Outcome:
    """Train (or resume) ``run_dir`` with the pruning callback; its outcome also in outcome.json."""
    outcome = run_logged(run_dir, callbacks=[Pruning(run_dir)])
    (run_dir / OUTCOME).write_text(json.dumps({"status": outcome.status, "message": outcome.message}) + "\n",
                                   encoding="utf-8")
    return outcome


def run_population(run_dirs: list[Path]) -> int:
    """Train (or resume) a trial's runs as one population, each member with the pruning callback;
    the process's exit status (``harl.sweep.population.train_dirs``)."""
    return train_dirs(run_dirs, callbacks=lambda run_dir: [Pruning(run_dir)])


PR_SET_PDEATHSIG = 1
"""prctl(2)'s option: the signal this process gets when its parent ends."""
WATCH_S = 1.0
"""How often the fallback thread looks at the parent PID."""


def die_with(driver: int) -> str:
    """SIGTERM to this process when ``driver`` (its parent) ends: the kernel's parent-death signal
    on Linux, else a thread polling the parent PID; how ("prctl" or "thread")."""
    if _parent_death_signal(signal.SIGTERM):
        if os.getppid() != driver:  # the driver ended before the request was made: nothing will signal
            os.kill(os.getpid(), signal.SIGTERM)
        return "prctl"
    threading.Thread(target=_watch_parent, args=(driver,), name="harl-tune-driver-watch", daemon=True).start()
    return "thread"


def _parent_death_signal(signum: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(driver: int) -> None:
    while os.getppid() == driver:
        time.sleep(WATCH_S)
    os.kill(os.getpid(), signal.SIGTERM)


def ray_run(run_dir: str) -> Outcome:
    """A Ray task's body (``harl tune --ray``)."""
    return run_one(Path(run_dir))


if __name__ == "__main__":  # python -m harl.tune.worker [--driver PID] RUN_DIR | --population RUN_DIR...
    args = sys.argv[1:]
    if args[0] == "--driver":
        die_with(int(args[1]))
        args = args[2:]
    if args[0] == "--population":
        sys.exit(run_population([Path(p) for p in args[1:]]))
    sys.exit(exit_code(run_one(Path(args[0]))))
