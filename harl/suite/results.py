"""Each entry's metric per seed, read from its runs' metrics.csv, and its verdict against the
entry's threshold: what ``results.json`` and the suite's table hold."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from harl.compare.runs import number
from harl.suite.spec import Entry
from harl.sweep.state import TrialState, metrics_rows


@attrs.frozen
class SeedResult:
    seed: int
    status: str
    """The trial's status: finished, stopped, failed, not started."""
    value: float | None
    """The mean of the metric's last ``window`` values (None: no value logged)."""
    first: float | None
    """The mean of its first ``window`` values: the baseline of ``min_rise``."""
    env_steps: int | None
    run_dir: Path


@attrs.frozen
class EntryResult:
    entry: Entry
    seeds: tuple[SeedResult, ...]
    verdict: str
    """passed, failed, unjudged (no threshold), incomplete (a seed has not finished) or
    no value (finished runs without the metric)."""
    reasons: tuple[str, ...] = ()
    """Why it failed: each unmet threshold, with the value and the threshold."""

    @property
    def values(self) -> list[float]:
        return [s.value for s in self.seeds if s.value is not None]

    @property
    def value(self) -> float | None:
        return float(np.mean(self.values)) if self.values else None

    @property
    def std(self) -> float | None:
        return float(np.std(self.values)) if self.values else None

    @property
    def rise(self) -> float | None:
        pairs = [(s.value, s.first) for s in self.seeds if s.value is not None and s.first is not None]
        return float(np.mean([v - f for v, f in pairs])) if pairs else None

    def to_json(self) -> dict[str, Any]:
        e = self.entry
        return {"name": e.name, "pipeline": str(e.pipeline), "seeds": list(e.seeds), "budget": e.budget,
                "set": list(e.overrides), "metric": e.metric, "window": e.window, "threshold": e.threshold,
                "min_rise": e.min_rise, "note": e.note, "verdict": self.verdict, "passed": self.verdict == "passed",
                "reasons": list(self.reasons), "value": self.value, "std": self.std, "rise": self.rise,
                "per_seed": {str(s.seed): {"status": s.status, "value": s.value, "first": s.first,
                                           "env_steps": s.env_steps, "run_dir": s.run_dir.name} for s in self.seeds},
                "references": [attrs.asdict(r) for r in e.references]}


def metric_values(run_dir: Path, metric: str) -> tuple[list[float], int | None]:
    """The finite values of ``metric`` in the run's metrics.csv, in order, and its last env steps."""
    rows = metrics_rows(run_dir)
    values = [v for v in (number(r.get(metric)) for r in rows) if v is not None]
    return values, (int(rows[-1]["env_steps"]) if rows else None)


def seed_result(state: TrialState, window: int, metric: str) -> SeedResult:
    values, steps = metric_values(state.run_dir, metric)
    value = float(np.mean(values[-window:])) if values else None
    first = float(np.mean(values[:window])) if values else None
    return SeedResult(state.trial.seed, state.status, value, first, steps, state.run_dir)


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def judge(entry: Entry, states: Sequence[TrialState]) -> EntryResult:
    """The entry's seeds and its verdict: the mean over seeds against ``threshold`` and ``min_rise``."""
    seeds = tuple(seed_result(s, entry.window, entry.metric) for s in states)
    if any(s.status != "finished" for s in seeds):
        return EntryResult(entry, seeds, "incomplete")
    result = EntryResult(entry, seeds, "unjudged")
    read = f"{entry.metric} ({'final' if entry.window == 1 else f'mean of the last {entry.window}'}, " \
           f"mean over {len(seeds)} seed{'s' if len(seeds) > 1 else ''})"
    if result.value is None or math.isnan(result.value):
        return EntryResult(entry, seeds, "no value", (f"{entry.name}: no {entry.metric} in its runs' metrics.csv "
                                                      "(a column the pipeline logs?)",))
    if not entry.judged:
        return result
    reasons = []
    if entry.threshold is not None and result.value < entry.threshold:
        reasons.append(f"{entry.name}: {read} {_fmt(result.value)} is below the threshold {_fmt(entry.threshold)}")
    rise = result.rise
    if entry.min_rise is not None and (rise is None or rise < entry.min_rise):
        shown = "none" if rise is None else _fmt(rise)
        reasons.append(f"{entry.name}: {read} rose {shown} over its first "
                       f"{'value' if entry.window == 1 else f'{entry.window} values'}, below the threshold "
                       f"min_rise = {_fmt(entry.min_rise)}")
    return EntryResult(entry, seeds, "failed" if reasons else "passed", tuple(reasons))
