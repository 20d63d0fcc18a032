"""``harl plot RUN_DIR...``: learning curves against env steps, seeds as mean ± std bands.

Runs are grouped by their resolved ``pipeline.toml`` with ``run.seed``, ``run.name``,
``[logging]`` and ``[checkpoint]`` left out: runs of one pipeline with different seeds
form one group, drawn as its mean with a ± one standard deviation band (over seeds, on a
common grid of env steps: each run's curve is linearly interpolated onto it, over the
steps every run of the group reached).  A group of one run is a plain line.  Groups are
labelled by the run name and the settings in which they differ.

matplotlib is an optional extra (``pip install "harl[plot]"``).
"""

from __future__ import annotations

import copy
import difflib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from harl.errors import HarlError, MissingExtraError
from harl.logging import headline
from harl.logging.csv_log import read_metrics

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

IGNORED = (("run", "seed"), ("run", "name"), ("logging",), ("checkpoint",))
"""Pipeline keys that do not make runs different experiments."""
GRID_POINTS = 200


@attrs.frozen
class Run:
    path: Path
    name: str
    seed: int
    key: dict[str, Any]
    """The pipeline without ``IGNORED`` keys: runs with equal keys are seeds of one experiment."""
    rows: list[dict[str, str]]


@attrs.frozen
class Group:
    label: str
    runs: list[Run]
    x: np.ndarray
    mean: np.ndarray
    std: np.ndarray | None
    """None for a group of one run."""


def find_runs(paths: Iterable[str | Path]) -> list[Path]:
    """Run directories: each path that is one, else the runs below it (a sweep, ``runs/``)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise HarlError(f"{path}: no such directory (harl plot takes run directories, or directories "
                            "that hold runs, like a sweep directory)")
        if (path / "pipeline.toml").is_file():
            found.append(path)
            continue
        below = sorted(p.parent for p in path.rglob("pipeline.toml"))
        if not below:
            raise HarlError(f"{path}: no harl run in it (a run directory holds pipeline.toml and metrics.csv)")
        found.extend(below)
    return list(dict.fromkeys(found))


def load_run(path: Path) -> Run | None:
    """A run's pipeline and metrics; None when it has no metrics row yet."""
    metrics = path / "metrics.csv"
    if not metrics.is_file():
        return None
    try:
        data = tomllib.loads((path / "pipeline.toml").read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise HarlError(f"{path / 'pipeline.toml'}: malformed TOML: {exc}") from None
    rows = read_metrics(metrics)  # a file that is not UTF-8 CSV: a CheckpointError naming it
    if not rows:
        return None
    key = copy.deepcopy(data)
    for path_parts in IGNORED:
        table = key
        for part in path_parts[:-1]:
            table = table.get(part, {})
        table.pop(path_parts[-1], None)
    run = data.get("run", {})
    return Run(path, str(run.get("name", path.name)), int(run.get("seed", 0)), key, renamed(rows, data))


OLD_POOL_COLUMNS = ("pool_size", "score")
"""A self-play pool's columns, once named after the pool's team (``blue_score``, though it is the
learner's score) and now after the learner (``red_score``, beside ``rating_red``)."""


def renamed(rows: list[dict[str, str]], pipeline: Mapping[str, Any]) -> list[dict[str, str]]:
    """``rows`` with a self-play run's old column names read under their new ones (where the new is absent)."""
    teams = pipeline.get("teams")
    if not isinstance(teams, Mapping) or not rows:
        return rows
    pools = [(name, t["of"]) for name, t in teams.items()
             if isinstance(t, Mapping) and t.get("role") == "self_play" and t.get("of")]
    learners = [learner for _, learner in pools]
    moves = {f"{team}_{column}": f"{learner if learners.count(learner) == 1 else f'{learner}_vs_{team}'}_{column}"
             for team, learner in pools for column in OLD_POOL_COLUMNS}
    moves = {old: new for old, new in moves.items() if old in rows[0] and new not in rows[0]}
    if not moves:
        return rows
    return [{**row, **{new: row[old] for old, new in moves.items()}} for row in rows]


def default_metric(runs: Sequence[Run]) -> str:
    """``eval_return`` when any run has an evaluation, else ``train_return``."""
    return "eval_return" if any(r.get("eval_return") for run in runs for r in run.rows) else "train_return"


def team_metrics(runs: Sequence[Run]) -> list[str]:
    """Runs of teams: each team's return, the columns ``harl plot`` draws without ``--metric`` (the mean
    over every agent, ``eval_return``, mixes sides that score against each other).  Each team's
    evaluation return (``eval_return_NAME``) where the runs evaluated every team, else each team's
    training return (``NAME_train_return``); empty when a run has no teams."""
    if not runs or not all(isinstance(run.key.get("teams"), Mapping) for run in runs):
        return []
    columns = list(dict.fromkeys(name for run in runs for name in run.rows[0]))
    evaluated = [f"eval_return_{name}" for name in headline.team_names(columns, "eval_")]
    if any(_number(r.get(c)) is not None for run in runs for r in run.rows for c in evaluated):
        return evaluated
    return [f"{name}{headline.TRAIN_SUFFIX}" for name in headline.train_returns(dict.fromkeys(columns))]


def numeric_columns(runs: Sequence[Run]) -> list[str]:
    columns: dict[str, None] = {}
    for run in runs:
        for name in run.rows[0]:
            if any(_number(r.get(name)) is not None for r in run.rows):
                columns[name] = None
    return list(columns)


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def curve(run: Run, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(env steps, metric) over the rows where the metric has a value."""
    points = [(float(r["env_steps"]), value) for r in run.rows if (value := _number(r.get(metric))) is not None]
    x, y = (np.array(v, dtype=np.float64) for v in zip(*points)) if points else (np.empty(0), np.empty(0))
    return x, y


def team_of(column: str) -> str:
    """The team a per-team return column is of (``eval_return_prey``, ``prey_train_return``: prey)."""
    if column.startswith("eval_return_"):
        return column[len("eval_return_"):]
    return column[:-len(headline.TRAIN_SUFFIX)] if column.endswith(headline.TRAIN_SUFFIX) else column


def smooth(y: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over the last ``window`` points (fewer at the start); 1 leaves ``y`` as it is."""
    if window <= 1 or len(y) == 0:
        return y
    sums = np.cumsum(np.concatenate([[0.0], y]))
    ends = np.arange(1, len(y) + 1)
    starts = np.maximum(ends - window, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables as one level of dotted keys (``{"run": {"seed": 1}}`` -> ``{"run.seed": 1}``)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def group_runs(runs: Sequence[Run], metric: str, window: int = 1) -> list[Group]:
    """One group per distinct pipeline (seeds together), with its mean and std curve (each
    run's curve smoothed over ``window`` points first)."""
    by_key: dict[str, list[Run]] = {}
    for run in runs:
        by_key.setdefault(json.dumps(run.key, sort_keys=True, default=str), []).append(run)
    flat = [flatten(members[0].key) for members in by_key.values()]
    differing = sorted(k for k in set().union(*flat) if len({json.dumps(f.get(k)) for f in flat}) > 1)
    last = [k.rpartition(".")[2] for k in differing]
    short_keys = {k: end if last.count(end) == 1 else k for k, end in zip(differing, last)}  # clip, not updater.objective.clip
    groups = []
    for members, settings in zip(by_key.values(), flat):
        names = sorted({r.name for r in members})
        label = " / ".join(names)
        shown = [f"{short_keys[k]}={_short(settings.get(k, '-'))}" for k in differing[:3]]
        if shown:
            label += f" ({', '.join(shown)}{', ...' if len(differing) > 3 else ''})"
        seeds = sorted({r.seed for r in members})
        if len(seeds) == len(members):
            label += f" · {len(members)} seed{'s' if len(members) > 1 else ''}"
        else:
            label += f" · {len(members)} runs (seeds {', '.join(map(str, seeds))})"
        x, mean, std = band([(x, smooth(y, window)) for x, y in (curve(r, metric) for r in members)])
        groups.append(Group(label, members, x, mean, std))
    return groups


def _short(value: Any) -> str:
    """A setting as a legend shows it: floats to 3 significant digits (a tuned ``clip`` is
    ``0.362``, not ``0.3621205502737279``, which squeezed the axes), lists element by element."""
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_short(v) for v in value) + "]"
    return str(value)


def band(curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Mean and std of curves over env steps: on their own steps when all share them, else
    interpolated onto ``GRID_POINTS`` steps over the range every curve covers."""
    curves = [(x, y) for x, y in curves if len(x)]
    if not curves:
        return np.empty(0), np.empty(0), None
    if len(curves) == 1:
        return curves[0][0], curves[0][1], None
    first = curves[0][0]
    if all(len(x) == len(first) and np.array_equal(x, first) for x, _ in curves):
        ys = np.stack([y for _, y in curves])
        return first, ys.mean(axis=0), ys.std(axis=0)
    low, high = max(x[0] for x, _ in curves), min(x[-1] for x, _ in curves)
    if high <= low:  # no common range: nothing honest to average
        return np.empty(0), np.empty(0), None
    grid = np.linspace(low, high, GRID_POINTS)
    ys = np.stack([np.interp(grid, x, y) for x, y in curves])
    return grid, ys.mean(axis=0), ys.std(axis=0)


def _steps(value: float, _: object = None) -> str:
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}"


def legend_below(figure: Any, columns: int) -> Any:
    """The legend under the axes, outside them (inside, ``loc="best"`` covered a y tick); the
    figure is made taller by its rows, so the axes keep their size."""
    return figure.legend(loc="outside lower center", ncols=columns, fontsize="small", frameon=False)


def plot(paths: Sequence[str | Path], metric: str | None, out: Path | None,
         window: int = 1) -> tuple[Path, list[Group]]:
    """Draw the curves of the runs under ``paths`` (each a trailing mean over ``window`` of its
    points); returns the PNG written and the groups."""
    if window < 1:
        raise HarlError(f"--smooth {window}: expected a number of points, 1 or more (1: no smoothing)")
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter
    except ImportError as exc:
        raise MissingExtraError("harl plot", "plot", "matplotlib") from exc

    dirs = find_runs(paths)
    runs = [run for run in (load_run(d) for d in dirs) if run is not None]
    if not runs:
        raise HarlError(f"{', '.join(map(str, paths))}: no run has a metrics row yet, nothing to plot")
    per_team = team_metrics(runs) if metric is None else []
    metric = metric or default_metric(runs)
    columns = numeric_columns(runs)
    if per_team:  # runs of teams: one curve per team (and group), each team's own return
        groups = [attrs.evolve(g, label=f"{g.label} · {team_of(column)}") for column in per_team
                  for g in group_runs(runs, column, window) if len(g.x)]
        metric = "eval_return_by_team" if per_team[0].startswith("eval_") else "train_return_by_team"
    else:
        if metric not in columns:
            near = difflib.get_close_matches(metric, columns, n=1)
            hint = f' (did you mean "{near[0]}"?)' if near else ""
            raise HarlError(f"--metric {metric}: no such numeric column in these runs' metrics.csv{hint}; "
                            f"columns: {', '.join(c for c in columns if c != 'env_steps')}")
        groups = [g for g in group_runs(runs, metric, window) if len(g.x)]
    if not groups:
        raise HarlError(f"--metric {metric}: the runs' curves share no range of env steps to plot")

    legend_columns = 2 if len(groups) > 1 and max(len(g.label) for g in groups) <= 45 else 1
    rows = -(-len(groups) // legend_columns)
    figure = Figure(figsize=(7.5, 4.5 + 0.22 * rows), dpi=120, layout="constrained")
    ax = figure.add_subplot()
    for index, group in enumerate(groups):
        color = f"C{index % 10}"
        ax.plot(group.x, group.mean, color=color, linewidth=1.8, label=group.label)
        if group.std is not None:
            ax.fill_between(group.x, group.mean - group.std, group.mean + group.std, color=color,
                            alpha=0.22, linewidth=0)
    banded = any(g.std is not None for g in groups)
    ax.set_xlabel("env steps")
    ax.set_ylabel("each team's return" if per_team else metric)
    smoothed = f", mean of the last {window} points" if window > 1 else ""
    title = (f"each team's {'evaluation' if metric.startswith('eval_') else 'training'} return "
             f"({', '.join(per_team)})" if per_team else metric)
    ax.set_title(title + (f" (mean ± std over seeds{smoothed})" if banded else
                          f" ({smoothed[2:]})" if smoothed else ""))
    ax.xaxis.set_major_formatter(FuncFormatter(_steps))
    ax.grid(True, alpha=0.3)
    legend_below(figure, legend_columns)
    if out is None:
        single = len(paths) == 1 and Path(paths[0]).is_dir()
        out = (Path(paths[0]) if single else Path()) / f"{metric}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out)
    return out, groups
