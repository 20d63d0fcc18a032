"""Results in marl-eval's JSON (Gorsane et al. 2022), the format BenchMARL and Mava write, so
harl's runs pool with other libraries' in marl-eval's tools::

    {env: {task: {algorithm: {run: {"step_0": {"step_count": N, "return": [...]}, ...,
                                    "absolute_metrics": {"return": [...]}}}}}}

metrics.csv keeps each evaluation's mean (and std), not its episodes' returns, so each step's
``return`` is a one-element list, that mean: marl-eval's README allows one element for a
metric computed over several episodes.  ``absolute_metrics`` holds the per-episode returns of
``absolute_metric.json`` when the run has one, else (``missing_absolute="last"``) the last
evaluation's mean, and the export's notes say which runs those are.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from harl.compare.runs import RunRecord, load_runs
from harl.errors import HarlError
from harl.fs import atomic_write_bytes

METRIC = "return"
ABSOLUTE = "absolute_metrics"


@attrs.frozen
class Export:
    path: Path
    data: dict[str, Any]
    notes: list[str]


def run_entry(record: RunRecord, missing_absolute: str = "last") -> dict[str, Any]:
    """One run's steps (one per evaluation row) and its absolute metrics."""
    entry: dict[str, Any] = {f"step_{k}": {"step_count": e.env_steps, METRIC: [e.mean]}
                             for k, e in enumerate(record.evaluations)}
    if record.absolute is not None:
        entry[ABSOLUTE] = {METRIC: [float(v) for v in record.absolute["returns"]]}
    elif missing_absolute == "last":
        entry[ABSOLUTE] = {METRIC: [record.final]}
    return entry


def to_marl_eval(records: Sequence[RunRecord], missing_absolute: str = "last") -> tuple[dict[str, Any], list[str]]:
    """The nested dict, and notes on runs without an absolute metric."""
    if missing_absolute not in ("last", "omit"):
        raise HarlError(f'missing_absolute={missing_absolute!r}: expected "last" or "omit"')
    data: dict[str, Any] = {}
    notes = []
    for r in records:
        if "," in r.algorithm:
            raise HarlError(f'algorithm name "{r.algorithm}": marl-eval forbids commas in algorithm names; '
                            "rename it with --label DIR=NAME")
        runs = data.setdefault(r.env, {}).setdefault(r.task, {}).setdefault(r.algorithm, {})
        name, n = f"seed_{r.seed}", 1
        while name in runs:
            n += 1
            name = f"seed_{r.seed}_{n}"
        runs[name] = run_entry(r, missing_absolute)
    lacking = [r for r in records if r.absolute is None]
    if lacking:
        what = ("their last evaluation's mean stands in for it" if missing_absolute == "last"
                else "they have no absolute_metrics step (marl-eval's matrices need one)")
        notes.append(f"{len(lacking)} of {len(records)} runs have no absolute_metric.json, so {what}: "
                     + ", ".join(str(r.path) for r in lacking[:3]) + (", ..." if len(lacking) > 3 else ""))
    return data, notes + check_marl_eval(data)


def export_results(paths: Sequence[str | Path], out: str | Path, *, labels: Mapping[str, str] | None = None,
                   split_by: Sequence[str] = (), missing_absolute: str = "last") -> Export:
    """Write the runs under ``paths`` as one marl-eval JSON file ``out``; the notes list runs left
    out, stand-ins for absolute metrics, and anything marl-eval's tools would refuse."""
    records, notes = load_runs(paths, labels, split_by)
    data, more = to_marl_eval(records, missing_absolute)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=1).encode("utf-8")
    atomic_write_bytes(out, lambda f: f.write(text))
    return Export(out, data, notes + more)


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_run(where: str, steps: Any) -> tuple[list[str], int, set[str]]:
    """Problems of one run, its number of steps, and the metric names of its steps."""
    if not isinstance(steps, Mapping) or not steps:
        return [f"{where}: expected a dict of steps"], 0, set()
    problems, metrics, last = [], set(), -1
    for step, values in steps.items():
        if not isinstance(values, Mapping):
            problems.append(f"{where}/{step}: expected a dict of metrics")
            continue
        if step != ABSOLUTE:
            count = values.get("step_count")
            if not isinstance(count, int) or isinstance(count, bool):
                problems.append(f"{where}/{step}: step_count must be an integer")
            elif count <= last:
                problems.append(f"{where}/{step}: step_count {count} does not increase")
            else:
                last = count
        for name, value in values.items():
            if name == "step_count":
                continue
            metrics.add(name)
            if not isinstance(value, list) or not value or not all(_is_number(v) for v in value):
                problems.append(f"{where}/{step}/{name}: expected a non-empty list of numbers")
    if ABSOLUTE not in steps:
        problems.append(f"{where}: no {ABSOLUTE} step (marl-eval's matrices read the absolute metric from it)")
    return problems, len(steps), metrics


def check_marl_eval(data: Any) -> list[str]:
    """What marl-eval's loader and DiagnoseData would object to in ``data``, from its README's
    documented structure: env -> task -> algorithm -> run -> step -> metric lists, a final
    ``absolute_metrics`` step, and per environment the same algorithms on every task, the same
    number of runs and steps everywhere, the same metrics at every step, no comma in an
    algorithm's name.  An empty list: nothing found."""
    if not isinstance(data, Mapping) or not data:
        return ["expected a non-empty dict of environments"]
    problems = []
    for env, tasks in data.items():
        if not isinstance(tasks, Mapping) or not tasks:
            problems.append(f"{env}: expected a dict of tasks")
            continue
        algorithm_sets, run_counts, step_counts, metric_sets = set(), set(), set(), set()
        for task, algorithms in tasks.items():
            if not isinstance(algorithms, Mapping) or not algorithms:
                problems.append(f"{env}/{task}: expected a dict of algorithms")
                continue
            algorithm_sets.add(tuple(sorted(a.lower() for a in algorithms)))
            for algorithm, runs in algorithms.items():
                if "," in algorithm:
                    problems.append(f"{env}/{task}/{algorithm}: a comma in an algorithm name")
                if not isinstance(runs, Mapping) or not runs:
                    problems.append(f"{env}/{task}/{algorithm}: expected a dict of runs")
                    continue
                run_counts.add(len(runs))
                for run, steps in runs.items():
                    found, count, metrics = _check_run(f"{env}/{task}/{algorithm}/{run}", steps)
                    problems += found
                    step_counts.add(count)
                    metric_sets.add(tuple(sorted(metrics)))
        for what, seen in (("algorithms on every task", algorithm_sets), ("number of runs", run_counts),
                           ("number of steps", step_counts), ("metrics", metric_sets)):
            if len(seen) > 1:
                problems.append(f"{env}: marl-eval needs the same {what}; found {sorted(seen)}")
    return problems


def read_results(path: str | Path) -> tuple[dict[str, Any], list[str]]:
    """A marl-eval JSON file and the problems ``check_marl_eval`` finds in it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise HarlError(f"{path}: cannot read ({exc.strerror})") from None
    except ValueError as exc:
        raise HarlError(f"{path}: not JSON ({exc})") from None
    return data, check_marl_eval(data)
