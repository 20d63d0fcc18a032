"""One run of a trial, or a trial's seeds as one population, in whichever process runs it, and
how pruning reaches them.

The driver, which alone writes the study, decides that a trial is pruned and writes ``PRUNED``
into the trial's directory; each of its runs has a ``Pruning`` callback (``harl.callbacks``)
that sees the file after its iteration and returns True, so the run stops there with a
checkpoint, as one Ctrl-C would.  A file is all it takes, so a trial on a Ray worker of a
shared filesystem is pruned the same way (the sweep rules: docs/ray.md), and so is a
``--vectorize`` population: every member has the callback, and the population's loop
(``harl.trainer.drive``) stops all of them after the iteration, each with its checkpoint.

``python -m harl.tune.worker RUN_DIR`` runs (or resumes) the run, output in its train.log,
and writes ``outcome.json`` beside it; ``python -m harl.tune.worker --population RUN_DIR...``
trains the runs as one population (``harl.sweep.population``'s) with the callback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harl.sweep.population import OUTCOME, train_dirs
from harl.sweep.trial import Outcome, exit_code, run_logged

PRUNED = "PRUNED"


class Pruning:
    """Stops the run once the driver pruned its trial (a ``PRUNED`` file in the trial directory)."""

    def __init__(self, run_dir: Path) -> None:
        self.flag = Path(run_dir).parent / PRUNED

    def on_iteration(self, row: Mapping[str, Any]) -> bool:
        return self.flag.exists()


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


if __name__ == "__main__":  # python -m harl.tune.worker RUN_DIR (a --jobs process), or --population RUN_DIR...
    if sys.argv[1] == "--population":
        sys.exit(run_population([Path(p) for p in sys.argv[2:]]))
    sys.exit(exit_code(run_one(Path(sys.argv[1]))))
