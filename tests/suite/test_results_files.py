"""benchmarks/suite_results.py: finished runs saved as small files; a suite resumed from them alone."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from harl import api

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("suite_results", ROOT / "benchmarks" / "suite_results.py")
suite_results = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite_results)

SUITE = f"""
[suite]
name = "tiny"
about = "two seeds of a tiny HAPPO"

[[entry]]
name = "happo"
pipeline = "{(ROOT / 'pipelines' / 'happo_mpe_spread.toml').as_posix()}"
seeds = "1-2"
budget = 100
set = ["collector.n_envs=2", "collector.rollout_length=25", "collector.backend=inline",
       "evaluator.every_iterations=1", "evaluator.episodes=2", "evaluator.n_envs=2"]
"""


def _statuses(entry: Path) -> dict[str, str]:
    with (entry / "trials.csv").open(newline="", encoding="utf-8") as f:
        return {row["run_dir"]: row["status"] for row in csv.DictReader(f)}


@pytest.fixture(scope="module")
def finished_suite(tmp_path_factory):
    pytest.importorskip("mpe2", reason='needs MPE: pip install "harl[mpe]"')
    tmp = tmp_path_factory.mktemp("suite")
    (tmp / "tiny.toml").write_text(SUITE, encoding="utf-8")
    api.suite(tmp / "tiny.toml", tmp / "run", quiet=True)
    return tmp


def test_save_keeps_small_files_only(finished_suite):
    dest = finished_suite / "results"
    saved = suite_results.save(finished_suite / "run", dest)
    assert sorted(saved) == ["happo/happo-mpe-spread-s1", "happo/happo-mpe-spread-s2"]
    files = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
    assert "suite.json" in files and "happo/trials.csv" in files
    assert "happo/happo-mpe-spread-s1/metrics.csv" in files
    assert not [f for f in files if "checkpoint" in f or f.endswith(".pt")]
    assert set(_statuses(dest / "happo").values()) == {"finished"}


def test_a_run_still_going_is_saved_as_not_started(finished_suite, tmp_path):
    """A suite still running has no trials.csv yet: a run short of its budget is unfinished."""
    import shutil

    live = tmp_path / "live"
    shutil.copytree(finished_suite / "run", live)
    (live / "happo" / "trials.csv").unlink()
    metrics = live / "happo" / "happo-mpe-spread-s2" / "metrics.csv"
    lines = metrics.read_text(encoding="utf-8").splitlines()
    metrics.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")  # its last iteration not yet written
    suite_results.save(live, tmp_path / "results")
    assert _statuses(tmp_path / "results" / "happo") == {"happo-mpe-spread-s1": "finished",
                                                          "happo-mpe-spread-s2": "not started"}
    assert not (tmp_path / "results" / "happo" / "happo-mpe-spread-s2" / "metrics.csv").exists()


def test_resume_from_the_saved_files_alone_runs_only_the_unfinished(finished_suite, tmp_path):
    results = tmp_path / "results"
    suite_results.save(finished_suite / "run", results)
    s2 = results / "happo" / "happo-mpe-spread-s2"
    (s2 / "metrics.csv").unlink()  # as if seed 2 had not finished when the files were committed
    rows = [{"run_dir": "happo-mpe-spread-s1", "status": "finished"},
            {"run_dir": "happo-mpe-spread-s2", "status": "not started"}]
    suite_results._write_trials(results / "happo" / "trials.csv", rows)
    kept = (results / "happo" / "happo-mpe-spread-s1" / "metrics.csv").read_text(encoding="utf-8")

    suite_results.restore(results, tmp_path / "again")
    result = api.suite(resume=tmp_path / "again", quiet=True)
    assert result.exit_status == 0
    again = tmp_path / "again" / "happo"
    assert (again / "happo-mpe-spread-s1" / "metrics.csv").read_text(encoding="utf-8") == kept  # not rerun
    original = (finished_suite / "run" / "happo" / "happo-mpe-spread-s2" / "metrics.csv").read_text(encoding="utf-8")
    rerun = (again / "happo-mpe-spread-s2" / "metrics.csv").read_text(encoding="utf-8")
    strip = lambda text: [row.split(",")[:2] for row in text.splitlines()]  # noqa: E731
    assert strip(rerun) == strip(original)  # seed 2 trained again from scratch, to its budget


def _suite_text(*entries: tuple[str, int]) -> str:
    """SUITE with its entry once per (name, budget)."""
    head, _, entry = SUITE.partition("[[entry]]")
    return head + "".join("[[entry]]" + entry.replace('name = "happo"', f'name = "{name}"')
                          .replace("budget = 100", f"budget = {budget}") for name, budget in entries)


def test_revise_keeps_an_unchanged_entry_and_makes_a_changed_one_anew(finished_suite, tmp_path):
    """A suite moved to an edited file (one entry's budget cut, one entry added): the unchanged entry's
    runs are kept, untouched; the changed one's go, here and in the results; the provenance names the
    new commit and what was kept from the old; the resume runs the changed and the new entries only."""
    import json
    import shutil

    suite_dir, results = tmp_path / "run", tmp_path / "results"
    shutil.copytree(finished_suite / "run", suite_dir)
    shutil.copytree(suite_dir / "happo", suite_dir / "kept")  # the suite as if it had two entries, both finished
    record = json.loads((suite_dir / "suite.json").read_text(encoding="utf-8"))
    record["text"] = _suite_text(("kept", 100), ("happo", 100))
    (suite_dir / "suite.json").write_text(json.dumps(record), encoding="utf-8")
    suite_results.save(suite_dir, results)
    (results / "provenance.json").write_text(json.dumps({"commit": "aaa"}), encoding="utf-8")
    kept_metrics = (suite_dir / "kept" / "happo-mpe-spread-s1" / "metrics.csv").read_text(encoding="utf-8")
    edited = tmp_path / "edited" / "tiny.toml"
    edited.parent.mkdir()
    edited.write_text(_suite_text(("kept", 100), ("happo", 50), ("new", 100)), encoding="utf-8")

    assert suite_results.revise(suite_dir, edited, results, "bbb", dry_run=True) == ["kept"]
    assert (suite_dir / "happo").is_dir() and (results / "happo").is_dir()  # a dry run changes nothing
    assert json.loads((results / "provenance.json").read_text(encoding="utf-8")) == {"commit": "aaa"}
    assert suite_results.revise(suite_dir, edited, results, "bbb") == ["kept"]
    assert not (suite_dir / "happo").exists() and not (results / "happo").exists()
    assert (results / "kept" / "happo-mpe-spread-s1" / "metrics.csv").is_file()
    provenance = json.loads((results / "provenance.json").read_text(encoding="utf-8"))
    assert provenance["commit"] == "bbb" and provenance["revisions"][0]["from"] == "aaa"
    assert provenance["revisions"][0]["kept"] == ["kept"]
    assert api.suite(resume=suite_dir, quiet=True).exit_status == 0
    assert (suite_dir / "kept" / "happo-mpe-spread-s1" / "metrics.csv").read_text(encoding="utf-8") == kept_metrics
    out = json.loads((suite_dir / "results.json").read_text(encoding="utf-8"))
    assert {e["name"]: e["budget"] for e in out["entries"]} == {"kept": 100, "happo": 50, "new": 100}
