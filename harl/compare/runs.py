"""Runs as scores: each run directory's algorithm, task, seed and the values a comparison uses.

The algorithm and the task come from the run's own ``pipeline.toml`` (what was trained, not
what the directory is called), so runs from different sweeps and machines pool by meaning.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from harl.algorithms import kinds_of, name_of
from harl.config.loading import parse_toml
from harl.errors import HarlError
from harl.logging.csv_log import read_metrics
from harl.plot import find_runs, flatten

TASK_KEYS = ("scenario", "task", "map_name", "env", "id", "factory", "agent_conf")
"""``[env]`` keys that name a task, in the order they are joined (``HalfCheetah-2x3``)."""

SAME_EXPERIMENT_IGNORES = ("run.seed", "run.name", "run.device", "run.torch_threads", "logging.",
                           "checkpoint.", "evaluator.every_iterations", "evaluator.n_envs")
"""Settings in which seeds of one experiment may differ (prefixes end with a dot)."""

ABSOLUTE_FILE = "absolute_metric.json"


@attrs.frozen
class Evaluation:
    """One evaluation row of metrics.csv: the mean (and std) over its episodes."""

    env_steps: int
    mean: float
    std: float | None


@attrs.frozen
class RunRecord:
    path: Path
    env: str
    """``[env] kind``: marl-eval's environment level."""
    task: str
    algorithm: str
    seed: int
    evaluations: tuple[Evaluation, ...]
    absolute: dict[str, Any] | None
    """The run's ``absolute_metric.json``, when ``absolute_metric`` wrote one."""
    settings: dict[str, Any] = attrs.field(repr=False, eq=False)
    """The flattened pipeline, to find what differs inside a group."""

    @property
    def final(self) -> float:
        """The last evaluation's mean return."""
        return self.evaluations[-1].mean

    def score(self, kind: str) -> float | None:
        """``final`` (last eval_return) or ``absolute`` (its absolute metric's mean, None without one)."""
        if kind == "final":
            return self.final
        return None if self.absolute is None else float(self.absolute["mean_return"])

    def curve(self) -> tuple[np.ndarray, np.ndarray]:
        x = np.array([e.env_steps for e in self.evaluations], dtype=np.float64)
        return x, np.array([e.mean for e in self.evaluations], dtype=np.float64)


def algorithm_of(pipeline: Mapping[str, Any]) -> str:
    """The name harl.algorithms' table gives the pipeline's kinds (HAPPO, IPPO, QMIX, ...); kinds
    the table does not name read ``<objective>/<updater>``."""
    kinds = kinds_of(pipeline)
    return name_of(kinds) or f"{kinds.objective or '?'}/{kinds.updater or '?'}"


def task_of(pipeline: Mapping[str, Any]) -> tuple[str, str]:
    """(environment, task): ``[env] kind`` and the ``[env]`` keys that name a task, e.g.
    ``("mamujoco", "HalfCheetah-2x3")``; discrete actions add ``-discrete`` (another task)."""
    env = pipeline.get("env", {})
    parts = [str(env[k]).rsplit(".", 1)[-1] if k == "env" else str(env[k]) for k in TASK_KEYS if k in env]
    task = "-".join(parts) or str(env.get("kind", "?"))
    if env.get("continuous_actions") is False:
        task += "-discrete"
    return str(env.get("kind", "?")), task


def number(text: str | None) -> float | None:
    """A metrics.csv cell as a finite float (None: empty, not a number, or not finite)."""
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def _evaluations(rows: Sequence[Mapping[str, str]]) -> tuple[Evaluation, ...]:
    out = []
    for row in rows:
        mean = number(row.get("eval_return"))
        steps = number(row.get("env_steps"))
        if mean is not None and steps is not None:
            out.append(Evaluation(int(steps), mean, number(row.get("eval_return_std"))))
    return tuple(out)


def _matches(path: Path, target: str) -> bool:
    target_path = Path(target).resolve()
    return path.resolve() == target_path or target_path in path.resolve().parents


def load_run(path: Path, labels: Mapping[str, str] | None = None, split_by: Sequence[str] = ()) -> RunRecord | None:
    """A run's record; None when it has no evaluation yet.  ``labels``: a directory (a run or a
    folder above runs) -> the algorithm name its runs take; ``split_by``: dotted pipeline keys
    whose values are added to the algorithm's name (``HAPPO (updater.objective.lr=0.0005)``)."""
    pipeline = path / "pipeline.toml"
    data = parse_toml(pipeline.read_text(encoding="utf-8"), str(pipeline))  # ConfigError: line, column
    metrics = path / "metrics.csv"
    evaluations = _evaluations(read_metrics(metrics)) if metrics.is_file() else ()
    if not evaluations:
        return None
    settings = flatten(data)
    algorithm = next((name for target, name in (labels or {}).items() if _matches(path, target)), None)
    if algorithm is None:
        algorithm = algorithm_of(data)
        shown = [f"{key}={settings.get(key, '-')}" for key in split_by]
        if shown:
            algorithm += f" ({', '.join(shown)})"
    env, task = task_of(data)
    absolute_path = path / ABSOLUTE_FILE
    absolute = json.loads(absolute_path.read_text(encoding="utf-8")) if absolute_path.is_file() else None
    return RunRecord(path, env, task, algorithm, int(data.get("run", {}).get("seed", 0)), evaluations,
                     absolute, settings)


def load_runs(paths: Iterable[str | Path], labels: Mapping[str, str] | None = None,
              split_by: Sequence[str] = ()) -> tuple[list[RunRecord], list[str]]:
    """Every evaluated run under ``paths`` (run or sweep directories), sorted by algorithm, task
    and seed, and notes on what was left out or looks mixed."""
    dirs = find_runs(paths)
    records, notes = [], []
    for path in dirs:
        record = load_run(path, labels, split_by)
        if record is None:
            notes.append(f"{path}: no evaluation row in metrics.csv yet, left out")
        else:
            records.append(record)
    if not records:
        raise HarlError(f"{', '.join(map(str, paths))}: no run has an evaluation (an eval_return row in "
                        "metrics.csv) yet, nothing to compare")
    records.sort(key=lambda r: (r.algorithm, r.env, r.task, r.seed, str(r.path)))
    notes.extend(mixed_groups(records))
    return records, notes


def mixed_groups(records: Sequence[RunRecord]) -> list[str]:
    """A note per (algorithm, task) whose runs' pipelines differ in more than the seed and
    bookkeeping: they are probably different experiments that ``split_by`` should separate."""
    groups: dict[tuple[str, str, str], list[RunRecord]] = {}
    for record in records:
        groups.setdefault((record.algorithm, record.env, record.task), []).append(record)
    notes = []
    for (algorithm, env, task), members in groups.items():
        keys = set().union(*(m.settings for m in members))
        differing = sorted(
            k for k in keys
            if not any(k == p or (p.endswith(".") and k.startswith(p)) for p in SAME_EXPERIMENT_IGNORES)
            and len({json.dumps(m.settings.get(k), default=str) for m in members}) > 1)
        if differing:
            notes.append(f"{algorithm} on {env}/{task}: its {len(members)} runs differ in "
                         f"{', '.join(differing[:5])}{', ...' if len(differing) > 5 else ''}; pass "
                         f"--split-by {differing[0]} to compare them as separate algorithms")
    return notes
