"""harl suite: a suite file's entries run as --seeds sweeps, judged against their thresholds,
resumed with the unfinished entries only; a bad suite file is one paragraph, exit 2."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from harl.cli import main
from harl.errors import ConfigError
from harl.suite.spec import EVERY_RUN_COLUMNS, load_suite, metric_problem
from tests.test_cli import HAPPO

TINY = ['"collector.n_envs=2"', '"collector.backend=inline"', '"collector.rollout_length=25"', '"evaluator.episodes=2"',
        '"evaluator.n_envs=2"', '"evaluator.every_iterations=1"', '"checkpoint.every_iterations=1"',
        '"logging.progress=false"']
"""--set overrides of a HAPPO run of 50 env steps per iteration, evaluated every iteration."""


def entry(name: str, threshold: float | None = None, budget: int = 100, **more: str) -> str:
    lines = ["[[entry]]", f'name = "{name}"', f'pipeline = "{HAPPO}"', "seeds = [1]", f"budget = {budget}",
             f"set = [{', '.join(TINY)}]"]
    if threshold is not None:
        lines.append(f"threshold = {threshold}")
    lines += [f"{key} = {value}" for key, value in more.items()]
    return "\n".join(lines) + "\n"


def write_suite(tmp_path: Path, *entries: str, name: str = "suite.toml") -> Path:
    path = tmp_path / name
    path.write_text('[suite]\nname = "tiny"\n\n' + "\n".join(entries), encoding="utf-8")
    return path


def results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def test_a_tiny_suite_runs_and_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One entry, 100 env steps: its sweep directory, results.json with the metric per seed and a pass,
    results.md with the reference beside it, marl-eval JSON and the curves."""
    suite = write_suite(tmp_path, entry("happo", threshold=-1e9, window=2)
                        + '[[entry.reference]]\nvalue = -53.1\nsource = "HARL paper"\n')
    out = tmp_path / "out"
    assert main(["suite", str(suite), "--out", str(out), "--quiet", "--reps", "200"]) == 0
    data = results(out)
    assert data["passed"] and data["failures"] == []
    (only,) = data["entries"]
    assert only["verdict"] == "passed" and only["metric"] == "eval_return" and only["budget"] == 100
    assert set(only["per_seed"]) == {"1"} and only["per_seed"]["1"]["status"] == "finished"
    assert only["per_seed"]["1"]["env_steps"] == 100 and only["value"] == only["per_seed"]["1"]["value"]
    assert (out / "happo" / "sweep.json").is_file() and (out / "happo" / "trials.csv").is_file()
    assert "-53.1 (HARL paper)" in (out / "results.md").read_text(encoding="utf-8")
    assert "mpe" in json.loads((out / "marl_eval.json").read_text(encoding="utf-8"))
    assert (out / "curves" / "mpe_simple_spread-eval_return.png").is_file()
    assert "passed" in capsys.readouterr().out
    with (out / "happo" / "happo-mpe-spread-s1" / "metrics.csv").open(newline="") as f:
        assert set(EVERY_RUN_COLUMNS) <= set(next(csv.reader(f)))  # what the metric check takes as always there


def test_a_threshold_not_met_fails_naming_the_entry_value_and_threshold(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = write_suite(tmp_path, entry("happo", threshold=1e9))
    out = tmp_path / "out"
    assert main(["suite", str(suite), "--out", str(out), "--quiet", "--reps", "200"]) == 1
    err = capsys.readouterr().err
    value = results(out)["entries"][0]["value"]
    assert "harl: threshold failed: happo: eval_return (final, mean over 1 seed) " in err
    assert f"{value:.4g} is below the threshold 1e+09" in " ".join(err.split())
    assert results(out)["entries"][0]["verdict"] == "failed" and not results(out)["passed"]


def test_resume_reruns_only_the_unfinished_entry(tmp_path: Path) -> None:
    """A suite stopped after its first entry: --resume runs the second and leaves the first alone."""
    suite = write_suite(tmp_path, entry("first"), entry("second"))
    out = tmp_path / "out"
    assert main(["suite", str(suite), "--out", str(out), "--quiet", "--reps", "200"]) == 0
    first = out / "first" / "happo-mpe-spread-s1" / "metrics.csv"
    second_run = out / "second" / "happo-mpe-spread-s1"
    # As a stop before the second entry's run began leaves it: its run directory holds pipeline.toml only.
    for path in second_run.iterdir():
        if path.name != "pipeline.toml":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    trials = out / "second" / "trials.csv"
    trials.write_text(trials.read_text(encoding="utf-8").replace(",finished,", ",not started,"), encoding="utf-8")
    os.utime(first, (1, 1))
    assert main(["suite", "--resume", str(out), "--quiet", "--reps", "200"]) == 0
    assert first.stat().st_mtime == 1  # not run again
    assert (second_run / "metrics.csv").is_file()
    assert [e["verdict"] for e in results(out)["entries"]] == ["unjudged", "unjudged"]
    assert [e["per_seed"]["1"]["env_steps"] for e in results(out)["entries"]] == [100, 100]


def test_a_vectorized_entry_trains_its_seeds_as_one_population_beside_a_plain_entry(tmp_path: Path) -> None:
    """``vectorize = true``: the entry's seeds are one population (its sweep records it, so a resume
    does so again), the next entry's runs go as usual, and both are judged."""
    vectorized = entry("pop", vectorize="true").replace("seeds = [1]", "seeds = [1, 2]")
    suite = write_suite(tmp_path, vectorized, entry("plain"))
    out = tmp_path / "out"
    assert main(["suite", str(suite), "--out", str(out), "--quiet", "--reps", "200"]) == 0
    assert json.loads((out / "pop" / "sweep.json").read_text(encoding="utf-8"))["vectorize"] is True
    assert json.loads((out / "plain" / "sweep.json").read_text(encoding="utf-8"))["vectorize"] is False
    pop, plain = results(out)["entries"]
    assert set(pop["per_seed"]) == {"1", "2"} and plain["per_seed"]["1"]["status"] == "finished"
    assert all(s["status"] == "finished" and s["env_steps"] == 100 for s in pop["per_seed"].values())


def test_a_vectorized_entry_whose_pipeline_cannot_be_a_population_is_refused_before_any_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = write_suite(tmp_path, entry("first"), entry("trpo", vectorize="true",
                                                        ).replace('set = [', 'set = ["updater.objective.kind=trpo", '))
    out = tmp_path / "out"
    assert main(["suite", str(suite), "--out", str(out), "--quiet"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert 'entry "trpo"' in err and "vectorize" in err
    assert not out.exists()


@pytest.mark.parametrize(("text", "message"), [
    ('[[entry]]\nname = "a"\npipeline = "{p}"\nseeds = [1]\nbudget = 100\nthreshhold = 1.0\n',
     '{f}: [[entry]] 1 ("a"): unknown key "threshhold" (did you mean "threshold"?); the keys are name, '
     "pipeline, seeds, budget, set, vectorize, metric, window, threshold, min_rise, label, note, reference"),
    ('[[entry]]\nname = "a"\nseeds = [1]\nbudget = 100\n',
     '{f}: [[entry]] 1 ("a"): missing key "pipeline" (every entry names its name, pipeline, seeds and budget)'),
    ('[[entry]]\nname = "a"\npipeline = "nowhere.toml"\nseeds = [1]\nbudget = 100\n',
     '{f}: [[entry]] 1 ("a"): pipeline = "nowhere.toml": no such file ({d}/nowhere.toml); a relative path is '
     "read from the suite file's folder"),
    ('[suite]\nnmae = "x"\n[[entry]]\nname = "a"\npipeline = "{p}"\nseeds = [1]\nbudget = 100\n',
     '{f}: [suite]: unknown key "nmae" (did you mean "name"?); the keys are name, about'),
    ('[[entry]]\nname = "a"\npipeline = "{p}"\nseeds = [1]\nbudget = 0\n',
     '{f}: [[entry]] 1 ("a"): budget = 0: expected a positive integer'),
])
def test_a_bad_suite_file_is_one_paragraph_naming_the_file_and_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text.replace("{p}", str(HAPPO)), encoding="utf-8")
    expected = message.format(f=path, d=tmp_path)
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    assert str(info.value) == expected
    out = tmp_path / "out"
    assert main(["suite", str(path), "--out", str(out)]) == 2
    assert " ".join(capsys.readouterr().err.split()) == " ".join(f"harl: {expected}".split())
    assert not out.exists()


def test_a_bad_pipeline_key_names_the_entry_and_leaves_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every entry's pipeline is validated before any run: a bad --set in the second entry refuses the
    suite and leaves no directory behind."""
    suite = write_suite(tmp_path, entry("good"), entry("bad").replace('set = [', 'set = ["updater.objective.lrr=1", '))
    out = tmp_path / "out"
    assert main(["suite", str(suite), "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith(f'harl: {suite.resolve()}: entry "bad": ') and "lrr" in err
    assert not out.exists()


def test_a_suite_name_that_leaves_runs_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A [suite] name names runs/<name>-suite-<time>: "../../up" (which wrote outside runs/ without
    --out) is refused as an entry's name is, before anything is written."""
    path = write_suite(tmp_path, entry("a")).with_name("up.toml")
    path.write_text('[suite]\nname = "../../up"\n\n' + entry("a"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["suite", str(path)]) == 2
    assert " ".join(capsys.readouterr().err.split()) == (
        f"harl: {path}: [suite]: name = '../../up': letters, digits and . _ + - only, starting with a letter or "
        "digit, at most 200 bytes (it names the suite's directory, runs/<name>-suite-<time>); write one plain "
        'name, e.g. name = "smoke"')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["suite.toml", "up.toml"]
    assert not (tmp_path.parent / "up-suite").exists()


@pytest.mark.parametrize(("metric", "hint"), [("eval_retrun", ' (did you mean "eval_return"?)'),
                                              ("trian_return", ' (did you mean "train_return"?)'),
                                              ("win_rate", "")])
def test_a_metric_no_run_writes_is_refused_before_any_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], metric: str, hint: str) -> None:
    """Every entry's metric is checked before any run starts (it was found only once the whole suite
    had run): a name no harl run writes is one paragraph naming the file, the entry and the key."""
    suite = write_suite(tmp_path, entry("good"), entry("bad", metric=f'"{metric}"'))
    out = tmp_path / "out"
    assert main(["suite", str(suite), "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith(f'harl: {suite}: [[entry]] 2 ("bad"): metric = "{metric}": no harl run writes this '
                          f"column to metrics.csv{hint}; every run writes env_steps, wall_time, "), err
    assert "eval_<name>" in err and "\n" not in err
    assert not out.exists()


@pytest.mark.parametrize("metric", ["eval_win", "eval_return_red", "value_loss", "agent1_policy_loss",
                                    "critic_loss", "td_error_abs", "train_length"])
def test_metrics_some_run_writes_pass(metric: str) -> None:
    assert metric_problem(metric, HAPPO) is None



def test_an_entry_whose_replay_checkpoints_leave_out_is_named_before_it_runs(tmp_path: Path) -> None:
    """A suite is stopped and resumed; a run of a family with a replay then goes on from an empty one
    unless its checkpoints hold it: the suite says so, entry by entry, before any run."""
    pytest.importorskip("mpe2", reason="the entries use MPE (pip install harl[mpe])")
    from harl.suite.command import _prepare, _replay_notes

    qmix = Path(HAPPO).parent / "qmix_mpe_spread_discrete.toml"
    value = "\n".join(f'[[entry]]\nname = "{name}"\npipeline = "{qmix}"\nseeds = [1]\nbudget = 100\nset = {sets}\n'
                      for name, sets in (("qmix", "[]"), ("qmix-saved", '["checkpoint.replay_buffer=true"]')))
    suite = load_suite(write_suite(tmp_path, entry("happo"), value))
    notes = _replay_notes(suite, _prepare(suite, tmp_path / "out", fresh=True))
    assert len(notes) == 1 and notes[0].startswith('entry "qmix" keeps a replay its checkpoints leave out')
    assert '"checkpoint.replay_buffer=true"' in notes[0]
