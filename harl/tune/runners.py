"""Who runs a trial's runs: local processes (``--jobs``), a population process per trial
(``--vectorize``: ``python -m harl.tune.worker --population``, the sweep's population with the
pruning callback) or Ray tasks (``--ray``).

A *unit* is what one process or task runs: one run directory, or a trial's seeds as one
population.  Each run directory ends with ``outcome.json`` (status finished, stopped or failed).
Processes start in their own session, so a terminal's Ctrl-C reaches the driver only, and the
driver passes each stop signal on once: the first stops the runs after their iteration with a
checkpoint, a second at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harl.errors import HarlError
from harl.sweep.local import last_harl_error
from harl.sweep.population import OUTCOME
from harl.sweep.trial import LOG

Unit = tuple[Path, ...]


def outcome(run_dir: Path, code: int | None = None) -> tuple[str, str]:
    """(status, message) of a run that ended, from its outcome.json (else its train.log)."""
    try:
        record = json.loads((run_dir / OUTCOME).read_text(encoding="utf-8"))
        return str(record["status"]), str(record.get("message", ""))
    except (OSError, ValueError, KeyError):
        message = last_harl_error(run_dir / LOG) or f"its process ended with exit status {code}; see {run_dir / LOG}"
        return "failed", message


class Local:
    """Units as local processes."""

    def __init__(self, vectorize: bool) -> None:
        self.vectorize = vectorize
        self.running: dict[subprocess.Popen[bytes], Unit] = {}

    def __len__(self) -> int:
        return len(self.running)

    def start(self, unit: Unit) -> None:
        for run_dir in unit:
            (run_dir / OUTCOME).unlink(missing_ok=True)
        command = [sys.executable, "-m", "harl.tune.worker", *(["--population"] if self.vectorize else []),
                   *map(str, unit)]
        with (unit[0] / LOG).open("ab") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        self.running[process] = unit

    def ended(self) -> list[tuple[Unit, int]]:
        done = [(p, u) for p, u in self.running.items() if p.poll() is not None]
        for process, _ in done:
            del self.running[process]
        return [(unit, int(process.returncode)) for process, unit in done]

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


class OnRay:
    """Units as Ray tasks (one run directory each), with the CPUs and GPUs their ``[run]`` asks for."""

    def __init__(self, address: str, tune_dir: Path, specs: Sequence[Any]) -> None:
        from harl.sweep.ray_backend import connect, import_ray, trial_resources

        self.ray = import_ray()
        self.connected = connect(address)
        nodes = [n["Resources"] for n in self.ray.nodes() if n["Alive"]]
        largest = max((n.get("CPU", 0) for n in nodes), default=0)
        gpus = sum(n.get("GPU", 0) for n in nodes)
        self.resources = trial_resources(specs[0], largest, gpus)
        self.slots = max(1, int(sum(n.get("CPU", 0) for n in nodes) // self.resources[0]))
        _check_shared(self.ray, tune_dir)
        from harl.tune.worker import ray_run

        self.remote = self.ray.remote(max_calls=1, max_retries=0)(ray_run)
        self.running: dict[Any, Unit] = {}

    def __len__(self) -> int:
        return len(self.running)

    def start(self, unit: Unit) -> None:
        (unit[0] / OUTCOME).unlink(missing_ok=True)
        cpus, gpus = self.resources
        self.running[self.remote.options(num_cpus=cpus, num_gpus=gpus).remote(str(unit[0]))] = unit

    def ended(self) -> list[tuple[Unit, int]]:
        if not self.running:
            return []
        ready, _ = self.ray.wait(list(self.running), num_returns=len(self.running), timeout=0)
        out = []
        for ref in ready:
            unit = self.running.pop(ref)
            try:
                self.ray.get(ref)
                out.append((unit, 0))
            except Exception:  # noqa: BLE001 - a dead worker or a cancelled task: outcome.json says the rest
                out.append((unit, 1))
        return out

    def stop(self, signum: int) -> None:
        for ref in self.running:
            self.ray.cancel(ref, force=False)

    def close(self) -> None:
        for ref in self.running:
            self.ray.cancel(ref, force=True)
        if self.connected:
            self.ray.shutdown()


def _check_shared(ray: Any, tune_dir: Path) -> None:
    """Every alive node must see the tune directory at the same path (a shared filesystem)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(num_cpus=0)(os.path.isfile)
    nodes = [n for n in ray.nodes() if n["Alive"]]
    seen = ray.get([probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                    .remote(str(tune_dir / "tune.json")) for n in nodes])
    blind = [n["NodeManagerAddress"] for n, ok in zip(nodes, seen) if not ok]
    if blind:
        raise HarlError(f"{tune_dir}: not reachable from the Ray node(s) {', '.join(blind)}; the tune directory "
                        "must be the same path on every node (a shared filesystem): pass one with --storage PATH")
