"""A sweep's seeds as populations (``--vectorize``; ``harl.population``): one in this process
(``--jobs 1``), or ``--jobs N`` populations of about S / N seeds, each in its own
``python -m harl.sweep.population --driver PID RUN_DIR...`` process (``harl.sweep.local.Processes``,
as ``--jobs`` trials: in its own session, dying with the driver, the driver's stop signals passed on;
one torch thread each: on few cores N single-threaded populations beat one population with N
threads, docs/population.md).  A member's outcome is written to ``outcome.json`` in its run
directory, which the driver reads when the process ends.

A resumed sweep regroups its unfinished seeds; resume is exact (bit for bit) when the groups
are the same, i.e. with the same ``--jobs`` and the same seeds left to run.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harl.errors import HarlError
from harl.sweep.local import Processes, forward, stops_now
from harl.sweep.state import Display, TrialState
from harl.sweep.trial import LOG, driver_args, watched_args

OUTCOME = "outcome.json"


Callbacks = Callable[[Path], Iterable[Any]]
"""Makes a member's callbacks from its run directory (``harl tune``'s pruning)."""


def _train(states: list[TrialState], say: Callable[[str], Any], quiet: bool,
           callbacks: Callbacks | None = None) -> dict[Path, tuple[str, str]]:
    """Train ``states`` as one population here: {run_dir: (status, message)}."""
    from harl.compare.absolute import after_run
    from harl.population.driver import Population, open_population

    source = str(states[0].run_dir / "pipeline.toml")
    trainers, venv = open_population([s.run_dir for s in states], [s.spec for s in states], source, callbacks)
    for state, trainer in zip(states, trainers):
        state.started_at.append(trainer.counters.iteration)
    with Population(trainers, venv, [s.label for s in states], say) as population:
        results = population.train(quiet)
    out = {}
    for state, result in zip(states, results):
        if result.failure:
            out[state.run_dir] = ("failed", result.failure)
            continue
        out[state.run_dir] = ("stopped" if result.interrupted else "finished", "")
        if not result.interrupted:
            after_run(state.run_dir, state.spec, result)  # [evaluator] absolute_factor
    return out


def run_states(states: list[TrialState], display: Display, quiet: bool, jobs: int = 1) -> None:
    """Train ``states``' runs as ``jobs`` populations; each run ends finished, stopped or failed."""
    stops = stops_now()
    if not states or stops.requested:
        return
    if jobs == 1:
        stops.inline = True
        try:
            outcomes = _train(states, display.say, quiet, lambda run_dir: [lambda row: stops.requested])
        except HarlError as exc:
            for state in states:
                state.status, state.message = "failed", str(exc)
            raise
        finally:
            stops.inline = False
        for state in states:
            state.status, state.message = outcomes[state.run_dir]
        return
    size = -(-len(states) // jobs)
    groups = [states[k:k + size] for k in range(0, len(states), size)]
    pool: Processes[int] = Processes(new_session=True)
    codes: dict[int, int] = {}
    told = 0
    try:
        for k, group in enumerate(groups):
            for state in group:
                (state.run_dir / OUTCOME).unlink(missing_ok=True)
                state.status = "running"
            log = group[0].run_dir / LOG
            display.say(f"population of {', '.join(s.label for s in group)}: output in {log}")
            pool.launch(k, "harl.sweep.population", [*driver_args(), *(str(s.run_dir) for s in group)], log)
        while True:
            codes.update(pool.ended())
            if not pool:
                break
            if len(stops.signals) > told:  # the populations stop themselves, with checkpoints
                told = forward(pool, stops, told, display)
            time.sleep(0.5)
    except BaseException:
        pool.stop(signal.SIGTERM)
        raise
    for k, group in enumerate(groups):
        for state in group:
            try:
                record = json.loads((state.run_dir / OUTCOME).read_text(encoding="utf-8"))
                state.status, state.message = record["status"], record["message"]
            except (OSError, ValueError, KeyError):
                if told and codes[k] < 0:  # killed by the signal passed on before its handlers were installed
                    state.left_waiting()
                    continue
                state.status = "failed"
                state.message = f"its population's process ended with exit status {codes[k]}; see {group[0].run_dir / LOG}"


def train_dirs(run_dirs: list[Path], callbacks: Callbacks | None = None) -> int:
    """Train the runs in ``run_dirs`` (each with its pipeline.toml) as one population in this
    process, each member's outcome in its outcome.json; the exit status of a population process
    (0: every member finished, 2: not)."""
    from harl.run.open import spec_of_run
    from harl.sweep.grid import Trial

    states = []
    for run_dir in run_dirs:
        spec = spec_of_run(run_dir)[0]
        states.append(TrialState(Trial(spec.run.seed, ()), run_dir, spec))
    try:
        outcomes = _train(states, lambda text: print(text, flush=True), quiet=True, callbacks=callbacks)
    except HarlError as exc:
        print(f"harl: {exc}", flush=True)
        outcomes = {s.run_dir: ("failed", str(exc)) for s in states}
    for run_dir, (status, message) in outcomes.items():
        (run_dir / OUTCOME).write_text(json.dumps({"status": status, "message": message}) + "\n", encoding="utf-8")
        print(f"{run_dir.name}: {status}" + (f": {message}" if message else ""), flush=True)
    return 0 if all(status == "finished" for status, _ in outcomes.values()) else 2


if __name__ == "__main__":  # one population of a --jobs N sweep: [--driver PID] RUN_DIR...
    sys.exit(train_dirs([Path(p) for p in watched_args(sys.argv[1:])]))
