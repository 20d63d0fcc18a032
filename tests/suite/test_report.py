"""The results page: values, CIs and verdicts from committed runs, and the committed page kept true."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from harl.errors import HarlError
from harl.suite.report import EntryReport, load_suite_results, render, report, verdict
from harl.suite.spec import Reference, parse_suite

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "pipelines" / "happo_mpe_spread.toml"
SUITE = f"""
[suite]
name = "tiny"
about = "a fake suite"

[[entry]]
name = "happo"
label = "HAPPO"
pipeline = "{PIPELINE.as_posix()}"
seeds = "1-6"
budget = 1000
note = "cut from 10M"
[[entry.reference]]
value = 3.0
spread = 0.5
source = "Some paper, Table 1"
at = "1000 steps"
"""


def _results(tmp_path: Path, finals: list[float], statuses: list[str]) -> Path:
    folder = tmp_path / "results" / "tiny"
    entry = folder / "happo"
    entry.mkdir(parents=True)
    (folder / "suite.json").write_text(json.dumps({"suite_file": str(tmp_path / "gone" / "tiny.toml"),
                                                  "text": SUITE}), encoding="utf-8")
    (folder / "provenance.json").write_text(json.dumps({"commit": "0123456789abcdef", "machine": "2 cores"}))
    rows = []
    for seed, (final, status) in enumerate(zip(finals, statuses), start=1):
        run = entry / f"happo-s{seed}"
        run.mkdir()
        (run / "pipeline.toml").write_text(PIPELINE.read_text(encoding="utf-8"), encoding="utf-8")
        with (run / "metrics.csv").open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["iteration", "env_steps", "eval_return"])
            writer.writerows([[1, 500, final - 10], [2, 1000, final]])
        rows.append({"run_dir": run.name, "status": status})
    with (entry / "trials.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["run_dir", "status"])
        writer.writeheader()
        writer.writerows(rows)
    return folder


def test_values_over_finished_seeds_only(tmp_path):
    folder = _results(tmp_path, [1, 2, 3, 4, 10, 99], ["finished"] * 5 + ["not started"])
    suite, provenance, (r,) = load_suite_results(folder)
    assert suite.name == "tiny" and provenance["commit"].startswith("0123")
    assert r.values == (1, 2, 3, 4, 10)  # the 6th seed has not finished: its 99 is not counted
    assert r.mean == 4.0
    assert r.iqm == 3.0  # rliable's IQM of 5 values drops floor(5/4) = 1 at each end: (2 + 3 + 4) / 3
    assert r.task == "mpe_simple_spread"


def test_bootstrap_ci_is_seeded_and_brackets_the_mean(tmp_path):
    folder = _results(tmp_path, [1, 2, 3, 4, 10], ["finished"] * 5)
    r = load_suite_results(folder)[2][0]
    low, high = r.ci
    assert 1 <= low < r.mean < high <= 10
    assert r.ci == load_suite_results(folder)[2][0].ci  # the same files, the same page
    # A percentile bootstrap of the mean: by hand, with numpy's generator seeded 0.
    values = np.array([1, 2, 3, 4, 10.0])
    means = values[np.random.default_rng(0).integers(0, 5, size=(2000, 5))].mean(axis=1)
    assert (low, high) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])))


def _report(values):
    entry = parse_suite(SUITE, ROOT / "benchmarks" / "suites" / "tiny.toml").entries[0]
    return EntryReport(entry, "t", (), tuple(values))


@pytest.mark.parametrize("values, value, spread, expected", [
    ((2.9, 3.1, 3.0), 3.0, 0.0, "within"),         # the reference inside harl's CI
    ((1.0, 1.1, 1.2), 3.0, 0.5, "below"),          # harl's CI ends under 2.5
    ((1.0, 1.1, 1.2), 3.0, 1.85, "within"),        # ... but meets 3 ± 1.85
    ((5.0, 5.1, 5.2), 3.0, 0.5, "above"),
    ((), 3.0, 0.5, "no runs yet"),
])
def test_verdicts(values, value, spread, expected):
    assert verdict(_report(values), Reference(value, "src", spread=spread)) == expected


def test_another_scale_is_never_judged():
    assert verdict(_report((100.0,)), Reference(3.0, "src", comparable=False)) == "not comparable"


def test_page_names_values_references_cuts_and_commit(tmp_path):
    _results(tmp_path, [1, 2, 3, 4, 10], ["finished"] * 5)
    page = tmp_path / "docs" / "results.md"
    text = render(tmp_path / "results", None, page)
    row = next(line for line in text.splitlines() if line.startswith("| HAPPO"))
    assert "| 1,000 | 5 of 6 |" in row and "| 4 [" in row and "| 3 |" in row
    assert "3 ± 0.5 at 1000 steps: Some paper, Table 1" in row
    assert "cut from 10M" in text and "`0123456789`" in text


def test_report_writes_figure_and_check_sees_drift(tmp_path):
    pytest.importorskip("matplotlib", reason='the figures need matplotlib: pip install "harl[test]"')
    folder = _results(tmp_path, [1, 2, 3, 4, 10], ["finished"] * 5)
    page = tmp_path / "docs" / "results.md"
    report(tmp_path / "results", page)
    assert (tmp_path / "docs" / "results" / "tiny-mpe_simple_spread.png").stat().st_size > 1000
    assert "](results/tiny-mpe_simple_spread.png)" in page.read_text(encoding="utf-8")
    assert report(tmp_path / "results", page, check=True)[1]
    with (folder / "happo" / "happo-s1" / "metrics.csv").open("a", encoding="utf-8") as f:
        f.write("3,1500,50\n")  # a result changed after the page was made
    assert not report(tmp_path / "results", page, check=True)[1]


def test_the_command_writes_then_checks_the_page(tmp_path, capsys):
    from harl.cli import main

    _results(tmp_path, [1, 2, 3, 4, 10], ["finished"] * 5)
    page = tmp_path / "docs" / "results.md"
    assert main(["suite", "report", str(tmp_path / "results"), "--out", str(page), "--check"]) == 1  # no page yet
    assert not page.exists()
    assert main(["suite", "report", str(tmp_path / "results"), "--out", str(page)]) == 0
    assert main(["suite", "report", str(tmp_path / "results"), "--out", str(page), "--check"]) == 0
    assert "up to date" in capsys.readouterr().out
    assert main(["suite", "report", str(tmp_path / "nothing"), "--out", str(page)]) == 2


def test_no_results_is_one_clear_error(tmp_path):
    with pytest.raises(HarlError, match="no suite results"):
        render(tmp_path, None, tmp_path / "results.md")


def test_the_committed_page_matches_the_committed_results():
    results, page = ROOT / "benchmarks" / "results", ROOT / "docs" / "results.md"
    if not any(results.glob("*/suite.json")):
        pytest.skip("no suite results committed yet")
    assert report(results, page, check=True)[1], (
        "docs/results.md disagrees with benchmarks/results: run "
        f"{sys.executable} -m harl suite report benchmarks/results --out docs/results.md")


def test_a_revised_suite_says_which_entries_kept_runs_of_the_earlier_commit() -> None:
    from harl.suite.report import _revisions

    line, = _revisions({"commit": "b" * 40, "revisions": [{"from": "a" * 40, "to": "b" * 40, "date": "2026-12-07",
                                                            "kept": ["happo-spread"]}]})
    assert line.startswith(f"Moved from `{'a' * 10}` to `{'b' * 10}` on 2026-12-07") and line.endswith("happo-spread.")
    assert _revisions({"commit": "c" * 40}) == []
