"""One run of a trial, or a trial's seeds as one population, in whichever process runs it,
with the pruning callback (``harl.tune.pruning``).

``python -m harl.tune.worker RUN_DIR`` runs (or resumes) the run, output in its train.log,
and writes ``outcome.json`` beside it; ``python -m harl.tune.worker --population RUN_DIR...``
trains the runs as one population (``harl.sweep.population``'s) with the callback.

``--driver PID`` (the local driver gives it): the worker dies with its driver, by the mechanism
every harl worker process shares (``harl.sweep.trial.die_with``).  It starts in its own session, so
a driver killed with SIGKILL would otherwise leave it running, holding its run lock against the
workers of ``harl tune --resume``; SIGTERM, not SIGKILL: the run stops after its iteration with a
checkpoint, which the resume continues.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harl.sweep.population import OUTCOME, train_dirs
from harl.sweep.trial import Outcome, exit_code, run_logged, watched_args
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


def ray_run(run_dir: str) -> Outcome:
    """A Ray task's body (``harl tune --ray``)."""
    return run_one(Path(run_dir))


if __name__ == "__main__":  # python -m harl.tune.worker [--driver PID] RUN_DIR | --population RUN_DIR...
    args = watched_args(sys.argv[1:])
    if args[0] == "--population":
        sys.exit(run_population([Path(p) for p in args[1:]]))
    sys.exit(exit_code(run_one(Path(args[0]))))
