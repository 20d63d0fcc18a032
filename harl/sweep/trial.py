"""One trial of a sweep, in whichever process runs it: this one (``--jobs 1``), a local
process (``python -m harl.sweep.trial RUN_DIR``, for ``--jobs N``) or a Ray worker.

The sweep writes each trial's resolved ``pipeline.toml`` into its run directory before
anything runs, so a trial needs nothing but that directory: it starts from
``pipeline.toml`` when the directory has no checkpoint yet, else it resumes from the
newest one, with the same exactness as ``harl train --resume``.  That is what makes a
restarted trial (its worker died) or a resumed sweep continue where it stopped.

A trial process dies with its driver (``die_with``, ``--driver PID``: what ``harl tune``'s workers,
a ``--jobs N`` sweep's or suite's trials and a ``--vectorize --jobs N`` sweep's populations all
use): it starts in its own session, so a driver killed with SIGKILL would otherwise leave it running
as an orphan, holding its run lock against the resume's trial.  On Linux the kernel sends it
SIGTERM when the driver dies (``prctl(PR_SET_PDEATHSIG)``); elsewhere a thread watches the parent
PID.  SIGTERM, not SIGKILL: the run stops after its iteration with a checkpoint, which the resume
continues.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from harl.errors import HarlError
from harl.rundir.files import PATTERN, list_checkpoints
from harl.rundir.signals import exit_status

LOG = "train.log"


@attrs.frozen
class Outcome:
    status: str
    """finished, stopped or failed."""
    message: str = ""
    """For a failed trial: the harl error's message."""
    started_at: int = 0
    """The iteration it started from (0: from scratch; k: resumed from checkpoint k)."""
    signum: int = 0
    """For a stopped trial: the signal that stopped it."""


def checkpoint_iteration(run_dir: Path) -> int:
    """The iteration of the run's newest complete checkpoint (0 when it has none)."""
    found = list_checkpoints(run_dir)
    match = PATTERN.match(found[-1].name) if found else None
    return int(match.group(1)) if match else 0


def run_trial(run_dir: Path, quiet: bool = True, callbacks: Sequence[Any] = ()) -> Outcome:
    """Start or resume the run in ``run_dir`` and train it to its end (or a stop signal, or a
    callback's stop: ``harl tune``'s pruning)."""
    from harl.compare.absolute import after_run
    from harl.run.lifecycle import on_close, resume_run, start_run

    def say(text: str) -> None:
        print(text, flush=True)

    started_at = checkpoint_iteration(run_dir)
    try:
        if started_at:
            trainer = resume_run(run_dir, callbacks=callbacks)
            if trainer.finished:
                on_close(trainer, say)
                return Outcome("finished", started_at=started_at)
            say(f"resuming {run_dir} at iteration {started_at} ({trainer.counters.env_steps:,} env steps)")
        else:
            trainer, _ = start_run(run_dir / "pipeline.toml", [], run_dir, callbacks, fresh=False)
            say(f"starting {run_dir}")
        try:
            result = trainer.train(quiet=quiet)
        finally:
            on_close(trainer, say)
        after_run(run_dir, trainer.spec, result)  # [evaluator] absolute_factor
    except HarlError as exc:
        return Outcome("failed", str(exc), started_at)
    c = result.counters
    say(f"{'stopped' if result.interrupted else 'finished'}: {c.iteration} iterations, "
        f"{c.env_steps:,} env steps in {c.wall_time:.0f} s")
    return Outcome("stopped" if result.interrupted else "finished", "", started_at, result.signum)


def run_logged(run_dir: Path, callbacks: Sequence[Any] = ()) -> Outcome:
    """``run_trial`` with this process's output appended to the run's ``train.log``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / LOG).open("a", encoding="utf-8") as log, contextlib.redirect_stdout(log), \
            contextlib.redirect_stderr(log):
        print(f"process {os.getpid()} on {socket.gethostname()}", flush=True)
        outcome = run_trial(run_dir, callbacks=callbacks)
        if outcome.status == "failed":
            print(f"harl: {outcome.message}", flush=True)
        return outcome


def exit_code(outcome: Outcome) -> int:
    """A local trial process's exit status: 0 finished, 128+signal stopped, 2 failed."""
    if outcome.status == "stopped":
        return exit_status(outcome.signum or signal.SIGINT)
    return 0 if outcome.status == "finished" else 2


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
    threading.Thread(target=_watch_parent, args=(driver,), name="harl-driver-watch", daemon=True).start()
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


def driver_args() -> list[str]:
    """What a driver puts before a worker's own arguments: ``--driver <its PID>`` (``watched_args``)."""
    return ["--driver", str(os.getpid())]


def watched_args(args: Sequence[str]) -> list[str]:
    """A worker's arguments without a leading ``--driver PID``, which arms ``die_with`` (PID)."""
    args = list(args)
    if args[:1] == ["--driver"]:
        die_with(int(args[1]))
        args = args[2:]
    return args


if __name__ == "__main__":  # python -m harl.sweep.trial [--driver PID] RUN_DIR (a --jobs N process)
    sys.exit(exit_code(run_logged(Path(watched_args(sys.argv[1:])[0]))))
