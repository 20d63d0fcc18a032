"""harl.cli: every command end to end on tiny budgets, and its user-facing errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from harl.cli import main
from harl.collect.on_policy import OnPolicyCollector
from harl.config.loading import load_spec_and_notes
from harl.config.spec import NESTED_SLOTS, TOP_SLOTS
from harl.logging.csv_log import read_metrics
from harl.rundir.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint

ROOT = Path(__file__).parents[1]
HAPPO = ROOT / "pipelines" / "happo_mpe_spread.toml"
PIPELINES = sorted((ROOT / "pipelines").glob("*.toml"))


def tiny(logs: Path, total_env_steps: int = 100) -> list[str]:
    """--set arguments for a run of 50 env steps per iteration, checkpointed every iteration."""
    settings = {
        "collector.n_envs": 2, "collector.rollout_length": 25, "run.total_env_steps": total_env_steps,
        "evaluator.episodes": 2, "evaluator.n_envs": 2, "checkpoint.every_iterations": 1,
        "logging.dir": f'"{logs}"', "logging.progress": "false",
    }
    return [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]


def train(tmp_path: Path, total_env_steps: int = 100) -> Path:
    """Train the HAPPO pipeline on a tiny budget; returns its run directory."""
    logs = tmp_path / "runs"
    assert main(["train", str(HAPPO), *tiny(logs, total_env_steps)]) == 0
    (run_dir,) = logs.iterdir()
    return run_dir


def iterations(run_dir: Path) -> list[int]:
    return [int(row["iteration"]) for row in read_metrics(run_dir / "metrics.csv")]


class TestCheck:
    @pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.name)
    def test_shipped_pipeline(self, path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """check validates and builds a shipped pipeline and exits 0 (skips when its env's extra is absent)."""
        # PQN's minibatches split the envs (recurrent; JaxMARL asserts NUM_MINIBATCHES divides NUM_ENVS)
        pqn = ["--set", "updater.minibatches=2"] if path.name.startswith("pqn") else []
        code = main(["check", str(path), "--set", "collector.n_envs=2", "--set", "evaluator.n_envs=2", *pqn])
        out, err = capsys.readouterr()
        if code == 2 and "needs: pip install" in err:
            pytest.skip(err.strip())
        assert code == 0, err
        assert f"{path}: valid" in out
        assert err == ""

    def test_broken_file(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A broken file exits 2 with the file and key path on stderr and no traceback."""
        path = tmp_path / "broken.toml"
        path.write_text(HAPPO.read_text().replace("clip = 0.2", "clipp = 0.2"))
        assert main(["check", str(path)]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err.startswith(f"harl: {path}: updater.objective.clipp: unknown key")
        assert "Traceback" not in err

    def test_override_note(self, capsys: pytest.CaptureFixture[str]) -> None:
        """check prints the note of an override that dropped keys."""
        assert main(["check", str(HAPPO), "--set", "updater.kind=simultaneous",
                     "--set", "collector.n_envs=2", "--set", "evaluator.n_envs=2"]) == 0
        out = capsys.readouterr().out
        assert ("note: --set updater.kind=simultaneous: dropped updater.order, which kind "
                "'simultaneous' does not have\n") in out

    def test_missing_optional_package(self, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
        """Without mpe2, an mpe pipeline says which extra to install and exits 2."""
        for name in [m for m in sys.modules if m == "mpe2" or m.startswith("mpe2.")] + ["mpe2"]:
            monkeypatch.setitem(sys.modules, name, None)  # makes `import mpe2...` raise ImportError
        assert main(["check", str(HAPPO)]) == 2
        err = capsys.readouterr().err
        assert err == ('harl: env kind "mpe" needs: pip install "harl[mpe]" (the optional package '
                       '"mpe2" is not installed)\n')

    def test_bf16_is_refused_for_on_policy(self, capsys: pytest.CaptureFixture[str]) -> None:
        """[run] precision applies to off-policy gradient steps; an on-policy pipeline says so."""
        assert main(["check", str(HAPPO), "--set", "run.precision=bf16"]) == 2
        assert capsys.readouterr().err == (
            f'harl: {HAPPO}: run.precision (from --set run.precision=bf16): "bf16" applies to off-policy gradient steps only; on-policy '
            'updates run in fp32: remove the key or set precision = "fp32"\n'
        )

    def test_cuda_on_a_machine_without_cuda(self, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
        """Asking for cuda where torch sees none exits 2 with the way out."""
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        assert main(["check", str(HAPPO), "--set", "run.device=cuda"]) == 2
        assert capsys.readouterr().err == (
            f'harl: {HAPPO}: run.device: "cuda" was asked for, but this torch build ({torch.__version__}) sees '
            'no CUDA device; use device = "auto" (picks the CPU here) or "cpu"\n'
        )

    def test_debug_shows_the_traceback(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--debug adds the traceback to a user error."""
        assert main(["--debug", "check", str(tmp_path / "missing.toml")]) == 2
        assert "Traceback" in capsys.readouterr().err


class TestStages:
    def test_lists_every_slot(self, capsys: pytest.CaptureFixture[str]) -> None:
        """stages shows a table (or line) for every slot, nested ones included."""
        assert main(["stages"]) == 0
        out = capsys.readouterr().out
        for slot in [*TOP_SLOTS, *NESTED_SLOTS]:
            assert f"[{slot}]" in out, slot

    def test_one_kind(self, capsys: pytest.CaptureFixture[str]) -> None:
        """stages ppo shows the objective's keys, clip with its default and meaning."""
        assert main(["stages", "ppo"]) == 0
        out = capsys.readouterr().out
        assert '[updater.objective] kind = "ppo"' in out
        clip = next(line for line in out.splitlines() if " clip " in line)
        assert "0.2" in clip and "clip range of the probability ratio" in clip
        assert "[run]" not in out

    def test_families_name_their_algorithms_once(self, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
        """stages families: what a family is, in words, and its algorithms in their own column
        (from harl.algorithms); a family's doc names none of them itself."""
        from harl import registry
        from harl.algorithms import algorithms

        names = {a.name for a in algorithms()}
        for family in registry.families():
            assert not names & set(family.doc.replace(",", " ").replace(":", " ").split()), family.name
        monkeypatch.setenv("COLUMNS", "400")
        assert main(["stages", "families"]) == 0
        row = next(line for line in capsys.readouterr().out.splitlines() if " on_policy " in line)
        assert "rollouts, a V critic and advantages" in row and "HAPPO, HATRPO" in row

    def test_a_slot_with_its_nested_slot(self, capsys: pytest.CaptureFixture[str]) -> None:
        """stages updater shows both updaters and the objective inside them."""
        assert main(["stages", "updater"]) == 0
        out = capsys.readouterr().out
        for title in ['[updater] kind = "sequential"', '[updater] kind = "simultaneous"',
                      '[updater.objective] kind = "ppo"']:
            assert title in out

    def test_unknown_name(self, capsys: pytest.CaptureFixture[str]) -> None:
        """An unknown slot or kind exits 2 and lists the known names."""
        assert main(["stages", "gea"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("harl: harl stages: no slot or kind named 'gea'; known: a2c, air_combat, buffer, checkpoint,")
        assert ", gae, " in err


class TestTrain:
    def test_tiny_run_writes_its_files(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A tiny run writes the resolved pipeline, one metrics row per iteration and checkpoints."""
        run_dir = train(tmp_path)
        out = capsys.readouterr().out
        assert f"run directory: {run_dir}\n" in out
        assert "finished: 2 iterations, 100 env steps in " in out
        assert f"to train longer: harl train --resume {run_dir} --set run.total_env_steps=N\n" in out
        assert "resume with" not in out  # only a stopped run with a checkpoint says it
        assert iterations(run_dir) == [1, 2]
        assert [p.name for p in list_checkpoints(run_dir)] == ["iter_0000001.pt", "iter_0000002.pt"]
        expected, _ = load_spec_and_notes(HAPPO, tiny(tmp_path / "runs")[1::2])
        assert load_spec_and_notes(run_dir / "pipeline.toml")[0] == expected
        assert load_checkpoint(latest_checkpoint(run_dir))["counters"]["env_steps"] == 100

    def test_resume_of_a_finished_run_does_nothing(self, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
        """Resuming a run that reached its budget changes no file and says how to go on."""
        run_dir = train(tmp_path)
        files = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
        capsys.readouterr()
        assert main(["train", "--resume", str(run_dir)]) == 0
        assert capsys.readouterr().out == (
            f"{run_dir}: nothing to do, the run already finished (2 iterations, 100 env steps, "
            f"run.total_env_steps = 100); to train longer: harl train --resume {run_dir} "
            "--set run.total_env_steps=N\n"
        )
        assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == files

    def test_resume_after_raising_the_budget(self, tmp_path: Path) -> None:
        """Raising total_env_steps in the run's pipeline.toml lets resume train on."""
        run_dir = train(tmp_path)
        pipeline = run_dir / "pipeline.toml"
        pipeline.write_text(pipeline.read_text().replace("total_env_steps = 100\n", "total_env_steps = 150\n"))
        assert main(["train", "--resume", str(run_dir)]) == 0
        assert iterations(run_dir) == [1, 2, 3]

    def test_resume_with_set_extends_a_finished_run(self, tmp_path: Path) -> None:
        """--resume RUN --set run.total_env_steps=N continues a finished run and records the budget."""
        run_dir = train(tmp_path)
        assert main(["train", "--resume", str(run_dir), "--set", "run.total_env_steps=200"]) == 0
        assert iterations(run_dir) == [1, 2, 3, 4]
        assert "total_env_steps = 200\n" in (run_dir / "pipeline.toml").read_text()

    def test_resume_with_set_refuses_a_shape_change(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A key that changes what the checkpoint holds (n_envs) is refused with the reason; nothing trains."""
        run_dir = train(tmp_path)
        capsys.readouterr()
        assert main(["train", "--resume", str(run_dir), "--set", "collector.n_envs=3",
                     "--set", "run.total_env_steps=200"]) == 2
        assert "collector.n_envs" in capsys.readouterr().err
        assert iterations(run_dir) == [1, 2]

    def test_interrupted_run_resumes_where_it_stopped(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
        """Ctrl-C in iteration 3 of 4 stops with a checkpoint; resume runs 3 and 4 and appends."""
        collect = OnPolicyCollector.collect
        calls = []

        def collect_then_interrupt(self: OnPolicyCollector, buffer: object) -> object:
            calls.append(1)
            if len(calls) == 3:
                raise KeyboardInterrupt
            return collect(self, buffer)

        monkeypatch.setattr(OnPolicyCollector, "collect", collect_then_interrupt)
        logs = tmp_path / "runs"
        assert main(["train", str(HAPPO), *tiny(logs, total_env_steps=200)]) == 130
        (run_dir,) = logs.iterdir()
        assert "stopped: 2 iterations, 100 env steps" in capsys.readouterr().out
        assert iterations(run_dir) == [1, 2]
        assert load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"] == 2

        monkeypatch.undo()
        assert main(["train", "--resume", str(run_dir)]) == 0
        out = capsys.readouterr().out
        assert f"resuming {run_dir} at iteration 2 (100 env steps)\n" in out
        assert "finished: 4 iterations, 200 env steps" in out
        rows = read_metrics(run_dir / "metrics.csv")
        assert [int(r["iteration"]) for r in rows] == [1, 2, 3, 4]
        assert [int(r["env_steps"]) for r in rows] == [50, 100, 150, 200]
        assert load_checkpoint(latest_checkpoint(run_dir))["counters"]["env_steps"] == 200

    def test_corrupt_newest_checkpoint(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A garbage newest checkpoint stops resume with the file and the older one to use."""
        run_dir = train(tmp_path, total_env_steps=150)
        older, newest = list_checkpoints(run_dir)[-2:]
        newest.write_bytes(b"\x00\x01 not a checkpoint")
        capsys.readouterr()
        assert main(["train", "--resume", str(run_dir)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"harl: {newest}: not a readable harl checkpoint (")
        assert err.endswith(f"); pass an older one with --checkpoint {older}\n")
        assert "Traceback" not in err

        assert main(["train", "--resume", str(run_dir), "--checkpoint", str(older)]) == 0
        assert f"resuming {run_dir} at iteration 2 (100 env steps)\n" in capsys.readouterr().out
        assert load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"] == 3

    def test_resume_from_an_older_checkpoint_repeats_no_row(self, tmp_path: Path) -> None:
        """Resuming from an older checkpoint leaves each iteration once in metrics.csv."""
        run_dir = train(tmp_path, total_env_steps=150)
        older = list_checkpoints(run_dir)[-2]
        assert main(["train", "--resume", str(run_dir), "--checkpoint", str(older)]) == 0
        assert iterations(run_dir) == [1, 2, 3]

    @pytest.mark.parametrize(("args", "message"), [
        (["train"], "harl train needs a pipeline file (e.g. harl train pipelines/happo_mpe_spread.toml) "
                    "or --resume RUN_DIR"),
        (["train", str(HAPPO), "--checkpoint", "x.pt"], "--checkpoint only goes with --resume RUN_DIR"),
        (["train", str(HAPPO), "--resume", "runs/x"],
         "harl train --resume RUN_DIR takes no pipeline file or --run-dir: a run continues in its own "
         "directory with its own pipeline.toml (--set changes keys that change no shapes, e.g. --set "
         "run.total_env_steps=2_000_000 to train longer)"),
    ])
    def test_wrong_argument_combinations(self, args: list[str], message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
        """Arguments that do not go together exit 2 with what goes together."""
        assert main(args) == 2
        assert capsys.readouterr().err == f"harl: {message}\n"

    def test_run_dir_of_an_existing_run(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--run-dir refuses a directory that already holds a run."""
        run_dir = train(tmp_path)
        capsys.readouterr()
        assert main(["train", str(HAPPO), "--run-dir", str(run_dir)]) == 2
        assert capsys.readouterr().err == (
            f"harl: --run-dir {run_dir}: already holds a run (it has a pipeline.toml); continue it "
            f"with harl train --resume {run_dir}, or pick a new directory\n"
        )

    def test_resume_of_a_missing_directory(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Resuming a directory that does not exist names it."""
        assert main(["train", "--resume", str(tmp_path / "nope")]) == 2
        assert capsys.readouterr().err == f"harl: {tmp_path / 'nope'}: no such run directory\n"


class TestEval:
    def test_prints_a_return(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """eval of a run evaluates its newest checkpoint for the episodes asked."""
        run_dir = train(tmp_path)
        capsys.readouterr()
        assert main(["eval", str(run_dir), "--episodes", "3"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"{latest_checkpoint(run_dir)}: 3 episodes, return ")
        logged = read_metrics(run_dir / "metrics.csv")[-1]["eval_return"]
        assert f"the run's own evaluation of iteration 2 read {float(logged):.3f}: other episodes" in out

    def test_run_without_checkpoints(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """eval of a run that never wrote a checkpoint exits 2 and says why."""
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        (run_dir / "pipeline.toml").write_text(HAPPO.read_text())
        assert main(["eval", str(run_dir)]) == 2
        assert capsys.readouterr().err == (
            f"harl: {run_dir}: no checkpoint in {run_dir / 'checkpoints'}; a run writes one every "
            "[checkpoint] every_iterations iterations and at its end, so this run stopped before its "
            f"first one: harl train --resume {run_dir} starts it again from the beginning, in place\n"
        )

    def test_directory_that_is_no_run(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """eval of a directory without pipeline.toml says it is not a run directory."""
        assert main(["eval", str(tmp_path)]) == 2
        assert capsys.readouterr().err == (
            f"harl: {tmp_path}: not a harl run directory (no pipeline.toml); pass the directory that "
            "harl train printed when the run started\n"
        )

    def test_episodes_must_be_positive(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--episodes 0 is refused."""
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        (run_dir / "pipeline.toml").write_text(HAPPO.read_text())
        assert main(["eval", str(run_dir), "--episodes", "0"]) == 2
        assert capsys.readouterr().err == "harl: --episodes: expected a positive integer, got 0\n"
