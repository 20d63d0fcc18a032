"""harl.compare.report: a whole comparison of synthetic runs, its tables, figures and notes."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from rich.console import Console

from harl.compare.bounds import parse_bounds
from harl.compare.report import compare, show
from harl.errors import HarlError
from tests.compare.helpers import needs_rliable
from tests.compare.synthetic import make_run, two_algorithms

pytestmark = needs_rliable


def test_two_algorithms_one_task(tmp_path: Path) -> None:
    """HAPPO 10 above MAPPO on every seed: its IQM is 10 higher, P(HAPPO > MAPPO) is 1, every file written."""
    pytest.importorskip("matplotlib", reason='the figures need matplotlib (pip install "harl[compare]")')
    sweep = two_algorithms(tmp_path)
    result = compare([sweep], reps=200)
    iqm = {e.algorithm: e.value for e in result.estimates if e.metric == "IQM"}
    assert iqm == {"HAPPO": pytest.approx(-57.0), "MAPPO": pytest.approx(-67.0)}  # seeds 2..4 of -70 + seed
    (item,) = result.improvements
    assert (item.x, item.y, item.value) == ("HAPPO", "MAPPO", 1.0)
    names = sorted(f.name for f in result.files)
    assert names == sorted(["results.md", "results.tex", "aggregates.csv", "improvement.csv", "runs.csv",
                            "mpe_simple_spread-final-aggregates.png", "mpe_simple_spread-final-improvement.png",
                            "mpe_simple_spread-final-profile.png", "mpe_simple_spread-sample_efficiency.png"])
    assert all(f.parent == sweep / "compare" and f.stat().st_size > 0 for f in result.files)
    markdown = (sweep / "compare" / "results.md").read_text(encoding="utf-8")
    assert "| HAPPO | 5 | -57 [" in markdown
    assert "*The final evaluation return (each run's last eval_return in metrics.csv" in markdown
    assert "episodes), on mpe/simple_spread. Point estimate" in markdown
    assert r"\caption{The final evaluation return" in (sweep / "compare" / "results.tex").read_text()
    with (sweep / "compare" / "aggregates.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6 and rows[0]["metric"] == "IQM"
    console = Console(record=True, width=160)
    show(result, console)
    assert "probability of improvement" in console.export_text()


def test_normalised_tasks_and_absolute_metric(tmp_path: Path) -> None:
    """Two bounded tasks add an all-tasks section with the optimality gap; absolute metrics add their own."""
    for seed in (1, 2, 3):
        for scenario in ("a", "b"):
            make_run(tmp_path, "sequential", "ppo", seed, [0.0, 50.0], scenario=scenario, absolute=[100.0, 100.0])
            make_run(tmp_path, "simultaneous", "ppo", seed, [0.0, 25.0], scenario=scenario, absolute=[50.0])
    result = compare([tmp_path], tmp_path / "out", bounds=parse_bounds(["a=0,100", "mpe/b=0,50"]), reps=200,
                     draw=False)
    assert [(s.name, s.score) for s in result.sections] == [
        ("mpe/a", "final"), ("mpe/b", "final"), ("all tasks", "final"),
        ("mpe/a", "absolute"), ("mpe/b", "absolute"), ("all tasks", "absolute")]
    values = {(e.section, e.score, e.algorithm, e.metric): e.value for e in result.estimates}
    assert values["all tasks", "final", "HAPPO", "mean"] == pytest.approx((0.5 + 1.0) / 2)
    assert values["all tasks", "final", "MAPPO", "optimality gap"] == pytest.approx(1 - (0.25 + 0.5) / 2)
    assert values["mpe/b", "absolute", "MAPPO", "IQM"] == pytest.approx(1.0)
    assert result.notes == []


def test_unbounded_tasks_are_not_pooled(tmp_path: Path) -> None:
    """Without bounds for every task, each task stands alone and a note says why."""
    for seed in (1, 2, 3):
        make_run(tmp_path, "sequential", "ppo", seed, [1.0], scenario="a")
        make_run(tmp_path, "sequential", "ppo", seed, [1.0], scenario="b")
    result = compare([tmp_path], tmp_path / "out", bounds=parse_bounds(["a=0,1"]), reps=200, draw=False)
    assert [s.name for s in result.sections] == ["mpe/a", "mpe/b"]
    assert "no aggregate over all tasks: no --bounds for mpe/b (returns of different tasks are on different " \
           "scales)" in result.notes


def test_few_reps_refused(tmp_path: Path) -> None:
    """A bootstrap of a handful of resamples is refused with the reason."""
    with pytest.raises(HarlError, match="--reps 10: a bootstrap needs 100 resamples or more"):
        compare([two_algorithms(tmp_path, seeds=1)], reps=10)
