"""What a sweep leaves: ``trials.csv`` (a row per trial), ``summary.csv`` and the end
table (a row per grid point: the final evaluation return, mean ± std over its seeds)."""

from __future__ import annotations

import csv
import math
import signal
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from rich.markup import escape
from rich.table import Table

from harl.rundir.signals import exit_status, first_signal
from harl.sweep.grid import point_label
from harl.sweep.state import TrialState, metrics_rows


def final_numbers(run_dir: Path) -> tuple[int | None, float | None, float | None]:
    """(env steps, last evaluation return, its std over episodes) from a run's metrics.csv."""
    rows = metrics_rows(run_dir)
    env_steps = int(rows[-1]["env_steps"]) if rows else None
    evaluated = [r for r in rows if r.get("eval_return")]
    if not evaluated:
        return env_steps, None, None
    last = evaluated[-1]
    try:
        return env_steps, float(last["eval_return"]), float(last.get("eval_return_std") or "nan")
    except ValueError:
        return env_steps, None, None


def _number(x: float | None) -> str:
    return "" if x is None or math.isnan(x) else f"{x:.6g}"


def write_trials(path: Path, states: Sequence[TrialState]) -> None:
    """A row per trial: its status, retries, the iterations its attempts started from, results."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["point", "seed", "status", "retries", "started_at", "env_steps", "eval_return",
                         "eval_return_std", "run_dir", "message"])
        for s in states:
            steps, ret, std = final_numbers(s.run_dir)
            writer.writerow([point_label(s.trial.point), s.trial.seed, s.status, s.retries,
                             ";".join(map(str, s.started_at)), "" if steps is None else steps,
                             _number(ret), _number(std), s.run_dir.name, s.message])


def points(states: Sequence[TrialState]) -> dict[str, list[TrialState]]:
    """The trials grouped by grid point, in the sweep's order."""
    grouped: dict[str, list[TrialState]] = {}
    for s in states:
        grouped.setdefault(point_label(s.trial.point), []).append(s)
    return grouped


def _over_seeds(members: Sequence[TrialState]) -> tuple[np.ndarray, int | None]:
    numbers = [final_numbers(s.run_dir) for s in members]
    returns = np.array([ret for _, ret, _ in numbers if ret is not None])
    steps = [n for n, _, _ in numbers if n is not None]
    return returns, (max(steps) if steps else None)


def _statuses(members: Sequence[TrialState]) -> str:
    counts: dict[str, int] = {}
    for s in members:
        counts[s.status] = counts.get(s.status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in counts.items())


def write_summary(path: Path, states: Sequence[TrialState]) -> None:
    """A row per grid point: its key values, seeds, statuses and the return over seeds."""
    keys = [key for key, _ in states[0].trial.point] if states else []
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([*keys, "seeds", "status", "env_steps", "eval_return_mean", "eval_return_std",
                         "evaluated_seeds"])
        for members in points(states).values():
            returns, steps = _over_seeds(members)
            mean, std = (returns.mean(), returns.std()) if len(returns) else (None, None)
            writer.writerow([*(v for _, v in members[0].trial.point), " ".join(str(s.trial.seed) for s in members),
                             _statuses(members), "" if steps is None else steps, _number(mean), _number(std),
                             len(returns)])


def summary_table(states: Sequence[TrialState], title: str) -> Table:
    """A row per grid point: statuses, env steps, final evaluation return (mean ± std over seeds)."""
    table = Table(title=escape(title), title_justify="left")
    keys = [key for key, _ in states[0].trial.point] if states else []
    for key in keys:
        table.add_column(escape(key))
    table.add_column("seeds", justify="right")
    table.add_column("status")
    table.add_column("env steps", justify="right")
    table.add_column("final eval return (over seeds)", justify="right")
    for members in points(states).values():
        returns, steps = _over_seeds(members)
        ret = f"{returns.mean():.2f} ± {returns.std():.2f}" if len(returns) else "-"
        if 0 < len(returns) < len(members):
            ret += f" ({len(returns)} seeds)"
        table.add_row(*(escape(v) for _, v in members[0].trial.point), str(len(members)), _statuses(members),
                      "-" if steps is None else f"{steps:,}", ret)
    return table


def exit_code(states: Sequence[TrialState]) -> int:
    """0 when every trial finished, 128 + the first stop signal when the sweep was stopped (130 for
    Ctrl-C, 143 for SIGTERM), else 1."""
    statuses = {s.status for s in states}
    if statuses <= {"finished"}:
        return 0
    if statuses & {"stopped", "not started", "waiting", "running"}:
        return exit_status(first_signal() or signal.SIGINT)
    return 1


def follow_ups(sweep_dir: Path, states: Sequence[TrialState]) -> list[str]:
    """Lines after the table: each failure's message, and how to continue a stopped sweep."""
    lines = [f"{s.label} failed: {s.message}" for s in states if s.status == "failed"]
    if any(s.status not in ("finished", "failed") for s in states):
        lines.append(f"continue the sweep with: harl train --resume {sweep_dir}")  # sweep.json holds the rest
    return lines
