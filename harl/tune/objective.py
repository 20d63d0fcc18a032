"""What a trial scores: a statistic of the evaluation returns of its seeds' runs, maximised.

- ``mean`` (the default): each seed's mean over its last K evaluations, then the mean over seeds;
- ``iqm``: the interquartile mean (as ``harl compare`` and rliable compute it: the middle 50%)
  of the last K evaluations of every seed pooled.

The intermediate value that pruning compares at evaluation k is the mean over the trial's seeds
of their k-th evaluation return (reported once every seed got there or ended).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from harl.sweep.state import metrics_rows


def evaluations(run_dir: Path) -> list[tuple[int, float]]:
    """(env steps, evaluation return) of each evaluation in a run's metrics.csv, in order."""
    out = []
    for row in metrics_rows(run_dir):
        try:
            if row.get("eval_return"):
                out.append((int(row["env_steps"]), float(row["eval_return"])))
        except ValueError:
            continue
    return out


def iqm(values: Sequence[float]) -> float:
    """The interquartile mean: scipy's ``trim_mean(values, 0.25)``, rliable's IQM."""
    x = np.sort(np.asarray(values, dtype=float))
    cut = int(0.25 * len(x))
    return float(x[cut:len(x) - cut].mean())


def score(run_dirs: Sequence[Path], statistic: str = "mean", last: int = 3) -> float | None:
    """The trial's value over its seeds' runs (None when no run has an evaluation)."""
    tails = [[r for _, r in evaluations(d)][-last:] for d in run_dirs]
    tails = [t for t in tails if t]
    if not tails:
        return None
    if statistic == "iqm":
        return iqm([r for t in tails for r in t])
    return float(np.mean([np.mean(t) for t in tails]))


def intermediate(run_dirs: Sequence[Path], reported: int, ended: Sequence[bool]) -> list[tuple[int, float]]:
    """New (evaluation index k, mean of the seeds' k-th return) after the first ``reported`` ones:
    those that every seed reached (a seed that ended without reaching k is left out of k's mean)."""
    evals = [[r for _, r in evaluations(d)] for d in run_dirs]
    out = []
    k = reported
    while True:
        if not all(len(e) > k or done for e, done in zip(evals, ended)):
            break
        reached = [e[k] for e in evals if len(e) > k]
        if not reached:
            break
        out.append((k + 1, float(np.mean(reached))))
        k += 1
    return out
