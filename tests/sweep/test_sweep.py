"""harl.sweep and harl train --seeds/--grid: seed lists, grids, sweep directories, the summaries,
parallel jobs, retries and resume (Ray: tests/sweep/test_sweep_ray.py)."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from harl.cli import main
from harl.errors import HarlError
from harl.logging.csv_log import read_metrics
from harl.sweep.grid import Trial, parse_grid, parse_seeds, split_values, trials
from harl.sweep.report import exit_code, follow_ups
from harl.sweep.state import TrialState
from tests.fakes.bad_env import write_pipeline
from tests.test_cli import HAPPO, tiny

WALL_CLOCK = ("wall_time", "steps_per_s")


class TestParseSeeds:
    @pytest.mark.parametrize(("text", "seeds"), [
        ("1,2,3", [1, 2, 3]), ("3", [3]), ("1-4", [1, 2, 3, 4]), ("0-1, 7", [0, 1, 7]),
    ])
    def test_valid(self, text: str, seeds: list[int]) -> None:
        """Lists and ranges become the seeds in the given order."""
        assert parse_seeds(text) == seeds

    @pytest.mark.parametrize(("text", "message"), [
        ("1,x", "--seeds 1,x: expected non-negative integers separated by commas, or ranges like 1-5 "
                "(e.g. --seeds 1,2,3); got 'x'"),
        ("1,,2", "--seeds 1,,2: expected non-negative integers separated by commas, or ranges like 1-5 "
                 "(e.g. --seeds 1,2,3); got ''"),
        ("5-3", "--seeds 5-3: the range 5-3 is empty; write it low-high, e.g. 3-5"),
        ("1,2,1", "--seeds 1,2,1: seed 1 appears twice; each seed is one run"),
    ])
    def test_invalid(self, text: str, message: str) -> None:
        """A bad seed list names the bad part and shows a good one."""
        with pytest.raises(HarlError) as info:
            parse_seeds(text)
        assert str(info.value) == message

    @pytest.mark.parametrize("text", ["1-1000000", "1-100000000", "0-9999,20000", "1-" + "9" * 30])
    def test_too_many_seeds_are_refused_at_once(self, text: str) -> None:
        """A range past ``MAX_SEEDS`` is refused before any list is made (it once spun for minutes, or
        took 4 GB in 90 s), with the limit and why."""
        from harl.sweep.grid import MAX_SEEDS

        started = time.perf_counter()
        with pytest.raises(HarlError) as info:
            parse_seeds(text)
        assert time.perf_counter() - started < 0.5
        message = str(info.value)
        assert message.startswith(f"--seeds {text}: ") and f"over the limit of {MAX_SEEDS:,}: each seed is a whole run" in message

    def test_the_limit_itself_and_duplicates_are_linear(self) -> None:
        """``MAX_SEEDS`` seeds parse at once; a repeat among them is found without a quadratic scan."""
        from harl.sweep.grid import MAX_SEEDS

        started = time.perf_counter()
        assert parse_seeds(f"1-{MAX_SEEDS}") == list(range(1, MAX_SEEDS + 1))
        with pytest.raises(HarlError, match="seed 5000 appears twice"):
            parse_seeds(f"1-{MAX_SEEDS - 1},5000")
        assert time.perf_counter() - started < 0.5

    def test_train_refuses_them_with_exit_2(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["train", str(HAPPO), "--seeds", "1-1000000", "--set", f"logging.dir={tmp_path}"]) == 2
        assert "over the limit of 10,000" in capsys.readouterr().err
        assert list(tmp_path.iterdir()) == []

    def test_a_seed_of_absurd_length(self) -> None:
        with pytest.raises(HarlError, match="a seed of 5000 digits"):
            parse_seeds("9" * 5000)


class TestParseGrid:
    def test_values_are_split_outside_brackets_and_quotes(self) -> None:
        """Commas inside a TOML list or a string belong to the value."""
        assert split_values('[64,64],[128, 128], "a,b" ,x') == ["[64,64]", "[128, 128]", '"a,b"', "x"]

    def test_the_product_of_seeds_and_values(self) -> None:
        """Grid points outer (first key slowest), seeds inner."""
        grid = parse_grid(["updater.objective.lr=1e-4,5e-4", "env.scenario=a,b"], [])
        found = trials([1, 2], grid)
        assert len(found) == 8
        assert found[:3] == [Trial(1, (("updater.objective.lr", "1e-4"), ("env.scenario", "a"))),
                             Trial(2, (("updater.objective.lr", "1e-4"), ("env.scenario", "a"))),
                             Trial(1, (("updater.objective.lr", "1e-4"), ("env.scenario", "b")))]
        assert found[0].dir_name("happo") == "happo-lr_1e-4-scenario_a-s1"
        assert found[0].overrides == ["updater.objective.lr=1e-4", "env.scenario=a", "run.seed=1"]

    @pytest.mark.parametrize(("texts", "overrides", "message"), [
        (["lr"], [], "--grid lr: expected KEY=VALUE1,VALUE2,... with a dotted key path, e.g. --grid "
                     "updater.objective.lr=1e-4,5e-4"),
        (["a.b=1,,2"], [], "--grid a.b=1,,2: expected KEY=VALUE1,VALUE2,... with a dotted key path, e.g. "
                           "--grid updater.objective.lr=1e-4,5e-4"),
        (["run.seed=1,2"], [], "--grid run.seed=1,2: seeds are --seeds (e.g. --seeds 1-5), not a grid key"),
        (["a.b=1,2"], ["a.b=3"], "--grid a.b=1,2: a.b is already given (by --set or another --grid); "
                                 "give each key once"),
        (["a.b=1,1"], [], "--grid a.b=1,1: the value 1 appears twice; each value is one grid point"),
    ])
    def test_invalid(self, texts: list[str], overrides: list[str], message: str) -> None:
        """A bad --grid names itself and the fix."""
        with pytest.raises(HarlError) as info:
            parse_grid(texts, overrides)
        assert str(info.value) == message


def state(status: str, tmp_path: Path, seed: int = 1) -> TrialState:
    return TrialState(Trial(seed, ()), tmp_path / f"s{seed}", None, status)


def test_exit_code(tmp_path: Path) -> None:
    """0 when all finished, 130 when any was stopped, 1 when one failed."""
    assert exit_code([state("finished", tmp_path), state("finished", tmp_path)]) == 0
    assert exit_code([state("finished", tmp_path), state("stopped", tmp_path),
                      state("not started", tmp_path)]) == 130
    assert exit_code([state("finished", tmp_path), state("failed", tmp_path)]) == 1


def test_follow_ups(tmp_path: Path) -> None:
    """After a stop the sweep says how to continue it; a failure is listed with its message."""
    failed = state("failed", tmp_path, 2)
    failed.message = "boom"
    assert follow_ups(tmp_path, [state("stopped", tmp_path), failed]) == [
        "seed 2 failed: boom", f"continue the sweep with: harl train --resume {tmp_path}"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A 2-seed sweep of the tiny HAPPO run, one seed after the other; (sweep dir, stdout)."""
    pytest.importorskip("mpe2", reason="the sweep runs MPE (pip install harl[mpe])")
    base = tmp_path_factory.mktemp("sweep")
    capture = pytest.MonkeyPatch()  # capsys is per test; this fixture is per module
    out = io.StringIO()
    capture.setattr(sys, "stdout", out)
    try:
        assert main(["train", str(HAPPO), *tiny(base / "runs"), "--seeds", "1,2", "--quiet",
                     "--run-dir", str(base / "sweep")]) == 0
    finally:
        capture.undo()
    return base / "sweep", out.getvalue()


def rows(run_dir: Path) -> list[dict[str, str]]:
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in read_metrics(run_dir / "metrics.csv")]


class TestSweep:
    def test_one_run_directory_per_seed_and_a_summary(self, sweep: tuple[Path, str]) -> None:
        """Each seed is a complete run in the sweep directory; summary.csv and the table report them."""
        sweep_dir, out = sweep
        runs = [sweep_dir / "happo-mpe-spread-s1", sweep_dir / "happo-mpe-spread-s2"]
        for seed, run in enumerate(runs, start=1):
            assert (run / "pipeline.toml").read_text().count(f"\nseed = {seed}\n") == 1
            assert [r["iteration"] for r in read_metrics(run / "metrics.csv")] == ["1", "2"]
        with (sweep_dir / "trials.csv").open() as f:
            per_trial = list(csv.DictReader(f))
        assert [(r["seed"], r["status"], r["retries"], r["started_at"], r["env_steps"]) for r in per_trial] == [
            ("1", "finished", "0", "0", "100"), ("2", "finished", "0", "0", "100")]
        assert per_trial[0]["eval_return"] == read_metrics(runs[0] / "metrics.csv")[-1]["eval_return"]
        with (sweep_dir / "summary.csv").open() as f:
            (summary,) = list(csv.DictReader(f))
        returns = np.array([float(r["eval_return"]) for r in per_trial])
        assert summary["seeds"] == "1 2" and summary["status"] == "2 finished"
        assert float(summary["eval_return_mean"]) == pytest.approx(returns.mean(), abs=1e-4)
        assert float(summary["eval_return_std"]) == pytest.approx(returns.std(), abs=1e-4)
        assert f"sweep directory: {sweep_dir} (2 trials, 2 to run; one at a time)\n" in out
        assert f"{returns.mean():.2f} ± {returns.std():.2f}" in out
        assert f"curves: harl plot {sweep_dir}\n" in out

    def test_a_seed_of_a_sweep_equals_the_single_run(self, sweep: tuple[Path, str], tmp_path: Path) -> None:
        """Seed 2 of the sweep wrote the same metrics as harl train --set run.seed=2."""
        assert main(["train", str(HAPPO), *tiny(tmp_path), "--set", "run.seed=2",
                     "--run-dir", str(tmp_path / "single"), "--quiet"]) == 0
        assert rows(tmp_path / "single") == rows(sweep[0] / "happo-mpe-spread-s2")

    @pytest.mark.slow
    def test_parallel_jobs_write_the_same_runs(self, sweep: tuple[Path, str], tmp_path: Path) -> None:
        """--jobs 2 runs the seeds in two processes, with output in train.log, and the same metrics."""
        parallel = tmp_path / "parallel"
        assert main(["train", str(HAPPO), *tiny(tmp_path), "--seeds", "1,2", "--jobs", "2", "--quiet",
                     "--run-dir", str(parallel)]) == 0
        for name in ("happo-mpe-spread-s1", "happo-mpe-spread-s2"):
            assert rows(parallel / name) == rows(sweep[0] / name)
            assert "finished: 2 iterations, 100 env steps" in (parallel / name / "train.log").read_text()

    def test_plot_of_the_sweep(self, sweep: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
        """harl plot SWEEP_DIR draws the two seeds as one band into a non-empty PNG."""
        pytest.importorskip("matplotlib", reason="harl plot needs matplotlib (pip install harl[plot])")
        assert main(["plot", str(sweep[0])]) == 0
        png = sweep[0] / "eval_return.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
        assert capsys.readouterr().out == (f"wrote {png}: 2 runs in 1 curve\n"
                                           "  happo-mpe-spread · 2 seeds\n")


def test_a_grid_with_a_failing_point(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trial that fails with a harl error (an env's NaN) is reported with its message, not retried;
    the other grid point finishes; summary.csv has a row per point and harl plot a curve per point."""
    pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=60, env={"at": 25})
    sweep_dir = tmp_path / "sweep"
    assert main(["train", str(pipeline), "--grid", "env.kwargs.mode=ok,nan_reward", "--seeds", "1",
                 "--run-dir", str(sweep_dir), "--quiet"]) == 1
    out = capsys.readouterr().out
    message = ('python env "tests.fakes.bad_env:make", environment 0, agent 1: rewards holds nan '
               "(NaN or infinity)")
    assert f"seed 1 (mode=nan_reward) failed: {message}" in out
    with (sweep_dir / "trials.csv").open() as f:
        per_trial = list(csv.DictReader(f))
    assert [(r["point"], r["status"], r["retries"], r["env_steps"]) for r in per_trial] == [
        ("mode=ok", "finished", "0", "60"), ("mode=nan_reward", "failed", "0", "40")]
    assert per_trial[1]["message"].startswith(message)
    with (sweep_dir / "summary.csv").open() as f:
        assert [(r["env.kwargs.mode"], r["status"]) for r in csv.DictReader(f)] == [
            ("ok", "1 finished"), ("nan_reward", "1 failed")]
    pytest.importorskip("matplotlib", reason="harl plot needs matplotlib (pip install harl[plot])")
    assert main(["plot", str(sweep_dir), "--metric", "train_return"]) == 0
    assert "2 runs in 2 curves" in capsys.readouterr().out


class TestErrors:
    @pytest.mark.parametrize(("args", "message"), [
        (["--jobs", "2"], "--jobs only goes with --seeds or --grid (it runs several trials at once)"),
        (["--ray"], "--ray runs a sweep's trials: it goes with --seeds or --grid"),
        (["--storage", "/shared"], "--storage runs a sweep's trials: it goes with --seeds or --grid"),
        (["--seeds", "1", "--ray", "--jobs", "2"], "--jobs is for local processes; on Ray the cluster's free "
                                                   "CPUs decide how many trials run at once"),
        (["--grid", "updater.objective.lr=1e-4,x"], f"--grid point lr=x: {HAPPO}: updater.objective.lr (from "
                                                    "--set updater.objective.lr=x): expected a number, got "
                                                    "\"x\"; write a number, e.g. --set updater.objective.lr=0.0005 "
                                                    "(the default)"),
        (["--seeds", "1,2", "--set", "run.seed=3"], "--seeds sets run.seed for each run; drop --set run.seed=..."),
        (["--seeds", "1", "--jobs", "0"], "--jobs: expected a positive integer, got 0"),
    ])
    def test_wrong_combinations(self, args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
        """Options that do not go with --seeds exit 2 and say why."""
        assert main(["train", str(HAPPO), *args]) == 2
        assert capsys.readouterr().err == f"harl: {message}\n"

    def test_seeds_with_resume_of_a_run(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--resume with --seeds wants a sweep directory."""
        assert main(["train", "--resume", str(tmp_path), "--seeds", "1,2"]) == 2
        assert capsys.readouterr().err.startswith(f"harl: {tmp_path / 'sweep.json'}: cannot read the sweep's "
                                                  "record")

    def test_sweep_directory_not_empty(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A --run-dir that already holds files is refused before any run starts."""
        (tmp_path / "old.txt").write_text("x")
        assert main(["train", str(HAPPO), "--seeds", "1,2", "--run-dir", str(tmp_path)]) == 2
        assert capsys.readouterr().err == (f"harl: --run-dir {tmp_path}: not empty; a sweep needs a new "
                                           "(or empty) directory (continue a stopped sweep with harl train "
                                           f"--resume {tmp_path})\n")


def test_a_killed_trial_process_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    """--jobs 2: kill -9 of a trial's process after its checkpoint 2 runs it again from there, and it
    ends with the metrics of the uninterrupted run."""
    pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=300, env={"sleep": 0.01})
    sweep_dir = tmp_path / "jobs"
    process = subprocess.Popen([sys.executable, "-m", "harl", "train", str(pipeline), "--seeds", "1,2", "--jobs", "2",
                                "--run-dir", str(sweep_dir), "--quiet"], text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    victim = sweep_dir / "run-s1"
    deadline = time.monotonic() + 120
    while not (victim / "checkpoints" / "iter_0000002.pt").is_file():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[0]
        time.sleep(0.1)
    os.kill(int((victim / "train.log").read_text().split()[1]), signal.SIGKILL)
    out, _ = process.communicate(timeout=240)
    assert process.returncode == 0, out
    assert "seed 1: its process was killed (signal 9); retry 1/2 resumes at iteration" in out
    with (sweep_dir / "trials.csv").open() as f:
        found = list(csv.DictReader(f))
    assert [(r["status"], r["retries"]) for r in found] == [("finished", "1"), ("finished", "0")]
    resumed_at = int(found[0]["started_at"].split(";")[1])
    assert resumed_at >= 2 and f"resuming {victim} at iteration {resumed_at}" in (victim / "train.log").read_text()
    assert main(["train", str(pipeline), "--seeds", "1", "--run-dir", str(tmp_path / "one"), "--quiet"]) == 0
    assert rows(victim) == rows(tmp_path / "one" / "run-s1")


def test_resume_a_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--resume SWEEP_DIR runs the trials that did not finish, each from its newest checkpoint (here
    seed 1 as if killed after checkpoint 1), to the metrics of the uninterrupted sweep; the same
    command with other seeds is refused."""
    pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=60)
    sweep_dir = tmp_path / "sweep"
    assert main(["train", str(pipeline), "--seeds", "1,2", "--run-dir", str(sweep_dir), "--quiet"]) == 0
    before = rows(sweep_dir / "run-s1")
    for late in ("iter_0000002.pt", "iter_0000003.pt"):
        (sweep_dir / "run-s1" / "checkpoints" / late).unlink()
    summary = (sweep_dir / "trials.csv").read_text()
    (sweep_dir / "trials.csv").write_text(summary.replace(",1,finished,", ",1,stopped,"))
    capsys.readouterr()
    assert main(["train", str(pipeline), "--seeds", "1,2,3", "--resume", str(sweep_dir)]) == 2
    assert capsys.readouterr().err == (
        f"harl: --resume {sweep_dir}: this sweep was started with other settings ({pipeline.resolve()} "
        f"--seeds 1,2); repeat its command, or give --resume {sweep_dir} alone\n")
    assert main(["train", str(pipeline), "--seeds", "1,2", "--resume", str(sweep_dir), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"sweep directory: {sweep_dir.resolve()} (2 trials, 1 to run; one at a time)" in out
    assert f"resuming {(sweep_dir / 'run-s1').resolve()} at iteration 1 (20 env steps)" in out
    assert rows(sweep_dir / "run-s1") == before
    with (sweep_dir / "trials.csv").open() as f:
        assert [(r["status"], r["started_at"]) for r in csv.DictReader(f)] == [("finished", "1"), ("finished", "")]


def test_storage_holds_the_sweep_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--storage PATH: the sweep directory is made under PATH (not under logging.dir)."""
    pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=20)
    assert main(["train", str(pipeline), "--seeds", "3", "--storage", str(tmp_path / "shared"), "--quiet"]) == 0
    (sweep_dir,) = (tmp_path / "shared").iterdir()
    assert sweep_dir.name.startswith("run-sweep-")
    assert [p.name for p in sorted(sweep_dir.iterdir())] == [".lock", "run-s3", "summary.csv", "sweep.json", "trials.csv"]
    assert f"sweep directory: {sweep_dir} (1 trial, 1 to run; one at a time)" in capsys.readouterr().out


def test_ray_without_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--ray where Ray is not installed names the extra, before any directory is made."""
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    assert main(["train", str(HAPPO), "--seeds", "1", "--ray", "--run-dir", str(tmp_path / "s")]) == 2
    assert capsys.readouterr().err == ('harl: harl train --ray needs: pip install "harl[ray]" (the optional '
                                       'package "ray" is not installed)\n')
    assert not (tmp_path / "s").exists()


def test_a_half_written_metrics_row_is_left_out(tmp_path: Path) -> None:
    """A trial killed mid-row leaves a partial last line: the sweep's reports read the rows
    before it instead of failing in the sweep's final bookkeeping."""
    from harl.sweep.report import final_numbers
    from harl.sweep.state import env_steps_so_far

    (tmp_path / "metrics.csv").write_text("iteration,env_steps,eval_return,eval_return_std\n"
                                          "1,20,-5.5,1.5\n2,40,,\n3,6")
    assert env_steps_so_far(tmp_path) == 40
    assert final_numbers(tmp_path) == (40, -5.5, 1.5)
    assert final_numbers(tmp_path / "missing") == (None, None, None)
