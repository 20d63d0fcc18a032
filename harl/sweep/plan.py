"""A sweep directory: its trials, their run directories, and ``sweep.json`` (what was asked,
so that ``harl train --resume SWEEP_DIR`` continues the unfinished trials)::

    happo-mpe-spread-sweep-20260101-120000/
        sweep.json                       pipeline, --set, --seeds and --grid of the sweep
        happo-mpe-spread-lr_0.0001-s1/   pipeline.toml  metrics.csv  checkpoints/  train.log
        ...
        trials.csv                       a row per trial: status, retries, started_at, results
        summary.csv                      a row per grid point: the return over its seeds

Every trial's pipeline (with its grid values and seed) is validated, and its resolved
``pipeline.toml`` written, before any trial starts: a bad key or value is one message.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console

from harl.config.dump import dump_pipeline
from harl.config.loading import load_spec_and_notes
from harl.errors import ConfigError, HarlError
from harl.run.lifecycle import spec_of_run
from harl.rundir.naming import stamped
from harl.sweep import local, population, ray_backend
from harl.sweep.grid import Trial, parse_grid, parse_seeds, point_label, trials
from harl.sweep.report import write_summary, write_trials
from harl.sweep.state import Display, TrialState

RECORD = "sweep.json"


@attrs.frozen
class Request:
    """What the command line asks: the pipeline, its ``--set``, the seeds and the grid."""

    pipeline: str
    overrides: list[str]
    seeds: list[int] | None
    grid: list[tuple[str, list[str]]]

    @classmethod
    def parse(cls, pipeline: str, overrides: Sequence[str], seeds: str | None, grid: Sequence[str]) -> Request:
        if any(o.partition("=")[0].strip() == "run.seed" for o in overrides):
            raise HarlError("--seeds sets run.seed for each run; drop --set run.seed=...")
        return cls(str(Path(pipeline).resolve()), list(overrides), parse_seeds(seeds) if seeds else None,
                   parse_grid(grid, overrides))


def _named_by_its_algorithm(spec: Any) -> Any:
    """The spec with ``run.name``'s algorithm word the one its stages compose (harl.algorithms):
    ``--set updater.kind=simultaneous`` on ``happo-mpe-spread`` names the runs, their folders and
    plot legends ``mappo-mpe-spread``."""
    from harl.algorithms import Kinds, rename
    from harl.registry import kind_name

    kinds = Kinds(kind_name(spec.collector), kind_name(spec.critic), bool(getattr(spec.critic, "twin", False)),
                  kind_name(spec.updater), kind_name(spec.updater.objective))
    name = rename(spec.run.name, kinds)
    return spec if name == spec.run.name else attrs.evolve(spec, run=attrs.evolve(spec.run, name=name))


def _validate(request: Request) -> tuple[list[tuple[Trial, Any, str]], list[str]]:
    """Every trial's spec and resolved pipeline text, named by its algorithm; the notes of the first."""
    first, notes = load_spec_and_notes(request.pipeline, request.overrides)
    if _named_by_its_algorithm(first).run.name != first.run.name:
        notes.append(f'run.name "{first.run.name}" names another algorithm than the stages compose: '
                     f'the runs are named "{_named_by_its_algorithm(first).run.name}"')
    seeds = request.seeds or [first.run.seed]
    planned = []
    for trial in trials(seeds, request.grid):
        try:
            spec, _ = load_spec_and_notes(request.pipeline, [*request.overrides, *trial.overrides])
        except ConfigError as exc:
            raise ConfigError(f"--grid point {point_label(trial.point)}: {exc}") from None
        spec = _named_by_its_algorithm(spec)
        planned.append((trial, spec, dump_pipeline(spec)))
    return planned, notes


class Sweep:
    """The trials of one sweep directory; ``run()`` runs the unfinished ones."""

    def __init__(self, sweep_dir: Path, states: list[TrialState], notes: list[str], vectorize: bool = False) -> None:
        self.sweep_dir, self.states, self.notes = sweep_dir, states, notes
        self.vectorize = vectorize
        """Trained as populations (``--vectorize``): a resume does so again (recorded in sweep.json)."""

    @classmethod
    def new(cls, request: Request, sweep_dir: Path | None, storage: Path | None, vectorize: bool = False) -> Sweep:
        planned, notes = _validate(request)
        spec = planned[0][1]
        if vectorize:  # before any directory is made
            from harl.population.check import check_population

            check_population([trial_spec for _, trial_spec, _ in planned], request.pipeline)
        if sweep_dir is None:
            sweep_dir = stamped(storage or Path(spec.logging.dir), f"{spec.run.name}-sweep")
        elif sweep_dir.exists() and any(sweep_dir.iterdir()):
            raise HarlError(f"--run-dir {sweep_dir}: not empty; a sweep needs a new (or empty) directory "
                            f"(continue a stopped sweep with harl train --resume {sweep_dir})")
        sweep_dir = sweep_dir.resolve()
        states = [TrialState(trial, sweep_dir / trial.dir_name(spec.run.name), trial_spec)
                  for trial, trial_spec, _ in planned]
        names = [s.run_dir.name for s in states]
        if len(set(names)) < len(names):
            raise HarlError("--grid: two grid points give the same run directory name; use values that "
                            "differ in letters or digits")
        sweep_dir.mkdir(parents=True, exist_ok=True)
        for state, (_, _, text) in zip(states, planned):
            state.run_dir.mkdir()
            (state.run_dir / "pipeline.toml").write_text(text, encoding="utf-8")
        record = {**attrs.asdict(request), "name": spec.run.name, "seed": spec.run.seed, "vectorize": vectorize}
        (sweep_dir / RECORD).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        return cls(sweep_dir, states, notes, vectorize)

    @classmethod
    def resume(cls, sweep_dir: Path, request: Request | None) -> Sweep:
        """The sweep in ``sweep_dir``; ``request`` (a repeated command) must be the one it ran."""
        try:
            data = json.loads((sweep_dir / RECORD).read_text(encoding="utf-8"))
            recorded = Request(data["pipeline"], data["overrides"], data["seeds"],
                               [(k, list(v)) for k, v in data["grid"]])
        except (OSError, ValueError, KeyError) as exc:
            raise HarlError(f"{sweep_dir / RECORD}: cannot read the sweep's record ({exc}); "
                            "is this a sweep directory of harl train --seeds/--grid?") from None
        if request is not None and request != recorded:
            raise HarlError(f"--resume {sweep_dir}: this sweep was started with other settings "
                            f"({_describe(recorded)}); repeat its command, or give --resume {sweep_dir} alone")
        sweep_dir = sweep_dir.resolve()
        previous = _previous_statuses(sweep_dir)
        name = data.get("name", "run")
        states = []
        for trial in trials(recorded.seeds or [data.get("seed", 1)], recorded.grid):
            run_dir = sweep_dir / trial.dir_name(name)
            state = TrialState(trial, run_dir, spec_of_run(run_dir)[0])  # its own pipeline.toml
            if previous.get(run_dir.name) == "finished":
                state.status = "finished"
            else:
                state.left_waiting()  # stopped (it has a checkpoint) or not started, until it runs
            states.append(state)
        return cls(sweep_dir, states, [], bool(data.get("vectorize", False)))

    def run(self, jobs: int, address: str | None, max_retries: int, quiet: bool, console: Console,
            vectorize: bool = False) -> None:
        """Run the trials that have not finished, then write trials.csv and summary.csv."""
        todo = [s for s in self.states if s.status != "finished"]
        for note in self.notes:
            console.print(f"note: {note}", highlight=False)
        where = (("as one population in this process" if jobs == 1 else f"as {min(jobs, len(todo))} populations, "
                  "one process each") if vectorize else f"on Ray ({address})" if address else
                 "one at a time" if jobs == 1 else f"{min(jobs, len(todo))} at a time")
        n = len(self.states)
        console.print(f"sweep directory: {self.sweep_dir} ({n} trial{'s' if n > 1 else ''}, {len(todo)} to run; "
                      f"{where})", highlight=False)
        try:
            run_trials(todo, Display(todo, console, quiet), jobs, address, max_retries, quiet, vectorize)
        finally:
            self.write_records()

    def write_records(self) -> None:
        """trials.csv and summary.csv, as the trials stand."""
        write_trials(self.sweep_dir / "trials.csv", self.states)
        write_summary(self.sweep_dir / "summary.csv", self.states)


def run_trials(todo: list[TrialState], display: Display, jobs: int, address: str | None, max_retries: int,
               quiet: bool, vectorize: bool = False) -> None:
    """The trials ``todo`` by the backend asked for: populations, Ray tasks, this process, or ``jobs``
    processes; under the driver's stop signals (``harl.sweep.local.driver_stops``: each passed on to
    the trials, none kills the driver) and, on this machine, once no other process writes their runs
    (``harl.sweep.local.wait_for_holders``: the trials of a driver that was killed or stopped, still
    finishing their iteration, when this is its resume)."""
    with local.driver_stops() as stops:
        if not address:
            local.wait_for_holders(todo, display, stops)
        if vectorize:
            population.run_states(todo, display, quiet, jobs)
        elif address:
            ray_backend.on_ray(todo, address, max_retries, display)
        elif jobs == 1:
            local.in_process(todo, display, quiet)
        else:
            local.in_processes(todo, jobs, max_retries, display)


def _previous_statuses(sweep_dir: Path) -> dict[str, str]:
    try:
        with (sweep_dir / "trials.csv").open(newline="", encoding="utf-8") as f:
            return {row["run_dir"]: row["status"] for row in csv.DictReader(f)}
    except (OSError, KeyError):
        return {}


def _describe(request: Request) -> str:
    parts = [request.pipeline, *(f"--set {o}" for o in request.overrides)]
    if request.seeds:
        parts.append("--seeds " + ",".join(map(str, request.seeds)))
    parts += [f"--grid {k}={','.join(v)}" for k, v in request.grid]
    return " ".join(parts)
