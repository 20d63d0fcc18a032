"""harl.compare.stats: rliable's estimates on sets with known answers, and the missing extra."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from harl.compare.stats import aggregates, improvements, profiles, require_rliable, sample_efficiency
from harl.errors import MissingExtraError
from tests.compare.helpers import needs_rliable, section_of

MISSING = 'harl compare needs: pip install "harl[compare]" (the optional package "rliable" is not installed)'


@needs_rliable
class TestAggregates:
    def test_known_set(self) -> None:
        """IQM of 1..8 is the mean of 3..6 (4.5); mean 4.5, median 4.5; no gap for raw returns."""
        (iqm, mean, median) = aggregates(section_of({"A": np.arange(1.0, 9.0)[:, None]}), reps=200)
        assert (iqm.metric, iqm.value) == ("IQM", 4.5)
        assert (mean.metric, mean.value, median.metric, median.value) == ("mean", 4.5, "median", 4.5)
        assert iqm.low <= 4.5 <= iqm.high and iqm.runs == 8 and iqm.tasks == 1

    def test_iqm_trims_outliers(self) -> None:
        """One wild run moves the mean, not the IQM."""
        scores = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 1000.0])[:, None]
        iqm, mean, *_ = aggregates(section_of({"A": scores}), reps=200)
        assert iqm.value == 4.5 and mean.value == pytest.approx(128.5)

    def test_optimality_gap_of_normalised_scores(self) -> None:
        """Normalised scores add the optimality gap: 1 minus the mean of scores clipped at 1."""
        scores = np.array([[0.5, 1.5], [0.7, 0.9]])
        gap = aggregates(section_of({"A": scores}, normalised=True), reps=200)[-1]
        assert gap.metric == "optimality gap"
        assert gap.value == pytest.approx(1 - (0.5 + 1.0 + 0.7 + 0.9) / 4)

    def test_ci_covers_the_true_mean(self) -> None:
        """Over 100 seeded draws of 20 runs from N(0, 1), the mean's 95 % CI covers 0 at least 85 times (a percentile
        bootstrap of few runs covers a little less than 95 %)."""
        draws = np.random.default_rng(7).normal(size=(100, 20, 1))
        covered = 0
        for k, draw in enumerate(draws):
            mean = aggregates(section_of({"A": draw}), reps=200, seed=k)[1]
            covered += mean.low <= 0.0 <= mean.high
        assert covered >= 85

    def test_reproducible(self) -> None:
        """The same bootstrap seed gives the same intervals."""
        section = section_of({"A": np.random.default_rng(0).normal(size=(6, 2))})
        assert aggregates(section, reps=200, seed=3) == aggregates(section, reps=200, seed=3)


@needs_rliable
class TestComparisons:
    def test_dominating_algorithm(self) -> None:
        """Every run of A above every run of B: P(A > B) is 1, and so is its whole interval."""
        rng = np.random.default_rng(1)
        section = section_of({"A": rng.normal(10, 1, (5, 2)), "B": rng.normal(0, 1, (5, 2))})
        (item,) = improvements(section, reps=200)
        assert (item.x, item.y, item.value, item.low, item.high) == ("A", "B", 1.0, 1.0, 1.0)

    def test_equal_algorithms(self) -> None:
        """Identical scores: P(A > B) is one half."""
        scores = np.arange(5.0)[:, None]
        (item,) = improvements(section_of({"A": scores, "B": scores.copy()}), reps=200)
        assert item.value == 0.5

    def test_profile(self) -> None:
        """The profile is the fraction of runs above each threshold: 1 below all scores, 0 above."""
        (curve,) = profiles(section_of({"A": np.array([[1.0], [2.0], [3.0], [4.0]])}), reps=200)
        assert curve.x[0] == 1.0 and curve.x[-1] == 4.0
        assert curve.value[0] == 0.75 and curve.value[-1] == 0.0
        assert curve.value[50] == 0.5  # tau = 2.5

    def test_sample_efficiency(self) -> None:
        """The IQM at each step of a (runs, tasks, steps) array, with a band around it."""
        curves = np.arange(8.0)[:, None, None] + np.array([0.0, 10.0])  # 8 runs, 1 task, 2 steps
        section = section_of({"A": curves[:, :, -1]})
        section = type(section)(section.name, "final", False, section.tasks, section.scores,
                                np.array([100.0, 200.0]), {"A": curves}, None)
        (curve,) = sample_efficiency(section, reps=200)
        assert list(curve.value) == [3.5, 13.5]
        assert np.all(curve.low <= curve.value) and np.all(curve.value <= curve.high)


def test_missing_extra_is_one_clear_paragraph(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without rliable, the statistics say which extra to install."""
    monkeypatch.setitem(sys.modules, "rliable", None)
    with pytest.raises(MissingExtraError) as info:
        require_rliable()
    assert str(info.value) == MISSING


def test_import_without_the_extra() -> None:
    """``import harl.compare`` needs no extra: rliable is imported only when a statistic is computed."""
    code = ("import sys; sys.modules['rliable'] = None; import harl.compare, harl.compare.command; "
            "assert 'rliable' not in [m for m in sys.modules if sys.modules[m] is not None]")
    subprocess.run([sys.executable, "-c", code], check=True)
