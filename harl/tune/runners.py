"""Who runs a trial's runs: local processes (``--jobs``), a population process per trial
(``--vectorize``: ``python -m harl.tune.worker --population``, the sweep's population with the
pruning callback) or Ray tasks (``--ray``).

A *unit* is what one process or task runs: one run directory, or a trial's seeds as one
population.  Each run directory ends with ``outcome.json`` (status finished, stopped or failed).
Processes start in their own session, so a terminal's Ctrl-C reaches the driver only, and the
driver passes each stop signal on once: the first stops the runs after their iteration with a
checkpoint, a second at once.  They die with the driver (``--driver PID``: SIGTERM when it ends,
``harl.sweep.trial.die_with``), so a driver killed with SIGKILL leaves no run behind.

A run that ended without its ``outcome.json`` while the driver was stopping was killed by the
driver's signal before its handlers were installed (a trial's first second): it is stopped, its
trial stays open and a resume runs it again, where any other such end is a failure.

The processes and Ray tasks themselves are the sweep's pools (``harl.sweep.local.Processes``,
``harl.sweep.ray_backend.Tasks``); what is tune's own is the unit, outcome.json and an
interface the driver polls between asking and telling the study (a sweep's loops run a fixed
list of trials to their end, with retries, so they keep their own loops over the same pools).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harl.sweep.local import Processes, last_harl_error
from harl.sweep.population import OUTCOME
from harl.sweep.ray_backend import Tasks, check_shared, trial_resources
from harl.sweep.trial import LOG

Unit = tuple[Path, ...]


def outcome(run_dir: Path, code: int | None = None, stopping: bool = False) -> tuple[str, str]:
    """(status, message) of a run that ended, from its outcome.json (else its train.log); without
    outcome.json and ``stopping`` (the driver got a stop signal), stopped (see the module doc)."""
    try:
        record = json.loads((run_dir / OUTCOME).read_text(encoding="utf-8"))
        return str(record["status"]), str(record.get("message", ""))
    except (OSError, ValueError, KeyError):
        if stopping:
            return "stopped", f"stopped before it started training (exit status {code})"
        message = last_harl_error(run_dir / LOG) or f"its process ended with exit status {code}; see {run_dir / LOG}"
        return "failed", message


class Local(Processes[Unit]):
    """Units as local processes (``python -m harl.tune.worker``), each in its own session."""

    def __init__(self, vectorize: bool) -> None:
        super().__init__(new_session=True)
        self.vectorize = vectorize

    def start(self, unit: Unit) -> None:
        for run_dir in unit:
            (run_dir / OUTCOME).unlink(missing_ok=True)
        self.launch(unit, "harl.tune.worker", ["--driver", str(os.getpid()),
                                                *(["--population"] if self.vectorize else []), *map(str, unit)],
                    unit[0] / LOG)


class OnRay(Tasks[Unit]):
    """Units as Ray tasks (one run directory each), with the CPUs and GPUs their ``[run]`` asks for."""

    def __init__(self, address: str, tune_dir: Path, specs: Sequence[Any]) -> None:
        from harl.tune.worker import ray_run

        super().__init__(address, ray_run)
        self.resources = trial_resources(specs[0], self.largest, self.gpus)
        self.slots = max(1, int(self.cpus // self.resources[0]))
        check_shared(self.ray, tune_dir, "tune.json", "tune")

    def start(self, unit: Unit) -> None:
        (unit[0] / OUTCOME).unlink(missing_ok=True)
        self.launch(unit, unit[0], *self.resources)

    def ended(self) -> list[tuple[Unit, int]]:
        out = []
        for unit, ref in self.ready(0):
            try:
                self.ray.get(ref)
                out.append((unit, 0))
            except Exception:  # noqa: BLE001 - a dead worker or a cancelled task: outcome.json says the rest
                out.append((unit, 1))
        return out

    def stop(self, signum: int) -> None:
        self.cancel(force=False)
