"""The protocol's statistics, all computed by rliable (Agarwal et al. 2021): aggregates with
stratified-bootstrap confidence intervals, probability of improvement, performance profiles
and IQM learning curves.  Nothing here resamples by hand.

rliable is an optional extra (``pip install "harl[compare]"``).
"""

from __future__ import annotations

import contextlib
import itertools
import warnings
from collections.abc import Iterator
from types import ModuleType

import attrs
import numpy as np

from harl.compare.sections import Section
from harl.errors import MissingExtraError

CONFIDENCE = 0.95


def require_rliable(what: str = "harl compare") -> tuple[ModuleType, ModuleType]:
    """rliable's ``library`` and ``metrics``, or a ``MissingExtraError`` naming the extra."""
    try:
        from rliable import library, metrics
    except ImportError as exc:
        raise MissingExtraError(what, "compare", "rliable") from exc
    return library, metrics


@attrs.frozen
class Estimate:
    section: str
    score: str
    algorithm: str
    metric: str
    """IQM, mean, median or optimality gap."""
    value: float
    low: float
    high: float
    runs: int
    tasks: int


@attrs.frozen
class Improvement:
    section: str
    score: str
    x: str
    y: str
    value: float
    """P(X > Y): the chance that a run of X beats a run of Y on a task, averaged over tasks."""
    low: float
    high: float


@attrs.frozen
class Curve:
    """An algorithm's estimate at each point of ``x`` with its confidence band."""

    algorithm: str
    x: np.ndarray = attrs.field(eq=False)
    value: np.ndarray = attrs.field(eq=False)
    low: np.ndarray = attrs.field(eq=False)
    high: np.ndarray = attrs.field(eq=False)


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[np.random.RandomState]:
    """A RandomState for rliable, and numpy's global generator seeded meanwhile (rliable's
    paired bootstrap for probability of improvement draws from it); restored afterwards."""
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():  # arch's note that random_state will become a Generator
            warnings.simplefilter("ignore", FutureWarning)
            yield np.random.RandomState(seed)
    finally:
        np.random.set_state(saved)


def metric_names(section: Section) -> list[str]:
    return ["IQM", "mean", "median"] + (["optimality gap"] if section.gap_target is not None else [])


def aggregates(section: Section, reps: int = 2000, seed: int = 0) -> list[Estimate]:
    """IQM, mean, median (and the optimality gap for normalised scores) of each algorithm,
    with percentile stratified-bootstrap 95 % CIs (runs resampled within each task)."""
    library, metrics = require_rliable()
    target = section.gap_target

    def func(scores: np.ndarray) -> np.ndarray:
        values = [metrics.aggregate_iqm(scores), metrics.aggregate_mean(scores), metrics.aggregate_median(scores)]
        if target is not None:
            values.append(metrics.aggregate_optimality_gap(scores, target))
        return np.array(values)

    with _seeded(seed) as state:
        points, intervals = library.get_interval_estimates(
            section.scores, func, reps=reps, confidence_interval_size=CONFIDENCE, random_state=state)
    out = []
    for algorithm, scores in section.scores.items():
        for k, name in enumerate(metric_names(section)):
            out.append(Estimate(section.name, section.score, algorithm, name, float(points[algorithm][k]),
                                float(intervals[algorithm][0, k]), float(intervals[algorithm][1, k]),
                                scores.shape[0], scores.shape[1]))
    return out


def improvements(section: Section, reps: int = 2000, seed: int = 0) -> list[Improvement]:
    """P(X > Y) for each pair of algorithms (X before Y in the section's order) with its CI."""
    library, metrics = require_rliable()
    out = []
    for x, y in itertools.combinations(section.scores, 2):
        with _seeded(seed) as state:
            points, intervals = library.get_interval_estimates(
                {"pair": (section.scores[x], section.scores[y])}, metrics.probability_of_improvement,
                reps=reps, confidence_interval_size=CONFIDENCE, random_state=state)
        interval = np.asarray(intervals["pair"]).reshape(2)
        out.append(Improvement(section.name, section.score, x, y, float(points["pair"]),
                               float(interval[0]), float(interval[1])))
    return out


def profile_thresholds(section: Section, points: int = 101) -> np.ndarray:
    """Thresholds from the lowest to the highest score (0..1 at least when normalised)."""
    values = np.concatenate([s.ravel() for s in section.scores.values()])
    low, high = float(values.min()), float(values.max())
    if section.normalised:
        low, high = min(low, 0.0), max(high, 1.0)
    if high == low:
        high = low + 1.0
    return np.linspace(low, high, points)


def profiles(section: Section, reps: int = 2000, seed: int = 0) -> list[Curve]:
    """Performance profiles: the fraction of runs (over tasks) scoring above each threshold."""
    library, _ = require_rliable()
    taus = profile_thresholds(section)
    with _seeded(seed) as state:
        points, intervals = library.get_interval_estimates(
            section.scores, lambda s: library.score_distributions(s, taus), reps=reps,
            confidence_interval_size=CONFIDENCE, random_state=state)
    return [Curve(a, taus, points[a], intervals[a][0], intervals[a][1]) for a in section.scores]


def sample_efficiency(section: Section, reps: int = 2000, seed: int = 0) -> list[Curve]:
    """IQM of the evaluation return at each env step of ``section.steps``, with its CI band."""
    library, metrics = require_rliable()
    if section.steps is None or not section.curves:
        return []

    def func(curves: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(curves[..., k]) for k in range(curves.shape[-1])])

    with _seeded(seed) as state:
        points, intervals = library.get_interval_estimates(
            section.curves, func, reps=reps, confidence_interval_size=CONFIDENCE, random_state=state)
    return [Curve(a, section.steps, points[a], intervals[a][0], intervals[a][1]) for a in section.curves]
