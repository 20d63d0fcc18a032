"""harl.sweep and harl train --seeds: seed lists, sweep directories, the summary, parallel jobs."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import pytest
from rich.console import Console

from harl.cli import main
from harl.errors import HarlError
from harl.logging.csv_log import read_metrics
from harl.sweep import SeedResult, Sweep, exit_code, follow_ups, parse_seeds
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


def test_exit_code() -> None:
    """0 when all finished, 130 when any was stopped, 1 when one failed."""
    def result(status: str) -> SeedResult:
        return SeedResult(1, Path("x"), status, None, None, None)

    assert exit_code([result("finished"), result("finished")]) == 0
    assert exit_code([result("finished"), result("stopped"), result("not started")]) == 130
    assert exit_code([result("finished"), result("failed (exit 2)")]) == 1


def test_follow_ups(tmp_path: Path) -> None:
    """After a Ctrl-C the summary says how to resume the stopped seeds and start the others."""
    sweep = Sweep(str(HAPPO), ["collector.n_envs=2"], [1, 2], 2, tmp_path / "s", True, Console())
    results = [SeedResult(1, sweep.run_dir(1), "stopped", 100, None, None),
               SeedResult(2, sweep.run_dir(2), "not started", None, None, None)]
    assert follow_ups(sweep, results) == [
        f"resume seed 1 with: harl train --resume {tmp_path / 's' / 'happo-mpe-spread-s1'}",
        f"start seed 2 with: harl train {HAPPO} --set collector.n_envs=2 --set run.seed=2 "
        f"--run-dir {tmp_path / 's' / 'happo-mpe-spread-s2'}",
    ]


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
        with (sweep_dir / "summary.csv").open() as f:
            summary = list(csv.DictReader(f))
        assert [(r["seed"], r["status"], r["env_steps"]) for r in summary] == [("1", "finished", "100"),
                                                                             ("2", "finished", "100")]
        assert summary[0]["eval_return"] == read_metrics(runs[0] / "metrics.csv")[-1]["eval_return"]
        assert f"sweep directory: {sweep_dir} (seeds 1, 2; one at a time)\n" in out
        assert "2 seeds" in out and "over seeds" in out
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


class TestErrors:
    @pytest.mark.parametrize(("args", "message"), [
        (["--jobs", "2"], "--jobs only goes with --seeds (it runs several seeds at once)"),
        (["--seeds", "1,2", "--set", "run.seed=3"], "--seeds sets run.seed for each run; drop --set run.seed=..."),
        (["--seeds", "1", "--jobs", "0"], "--jobs: expected a positive integer, got 0"),
    ])
    def test_wrong_combinations(self, args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
        """Options that do not go with --seeds exit 2 and say why."""
        assert main(["train", str(HAPPO), *args]) == 2
        assert capsys.readouterr().err == f"harl: {message}\n"

    def test_seeds_with_resume(self, capsys: pytest.CaptureFixture[str]) -> None:
        """--seeds starts new runs: with --resume it is refused."""
        assert main(["train", "--resume", "runs/x", "--seeds", "1,2"]) == 2
        assert capsys.readouterr().err == ("harl: --seeds starts new runs; resume each seed's run on its own "
                                           "with harl train --resume RUN_DIR\n")

    def test_sweep_directory_not_empty(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A --run-dir that already holds files is refused before any run starts."""
        (tmp_path / "old.txt").write_text("x")
        assert main(["train", str(HAPPO), "--seeds", "1,2", "--run-dir", str(tmp_path)]) == 2
        assert capsys.readouterr().err == (f"harl: --run-dir {tmp_path}: not empty; a sweep needs a new "
                                           "(or empty) directory\n")
