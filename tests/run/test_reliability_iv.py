"""Issue 38 (Reliability IV), the run directory's side: run names that cannot leave their
directory, a resume without any loadable checkpoint, resume edits that keep their word, and a
metrics file that cannot lose rows."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest

from harl.cli import main
from harl.logging.csv_log import CSVLogger, read_metrics
from harl.rundir.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint
from tests.fakes.bad_env import write_pipeline


def iterations(run_dir: Path) -> list[int]:
    return [int(r["iteration"]) for r in read_metrics(run_dir / "metrics.csv")]


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (the lock file aside) and a hash of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".lock"}


@pytest.fixture
def finished(tmp_path: Path) -> Path:
    """A finished 2-iteration run (2 envs x 10 steps, a checkpoint every iteration)."""
    run_dir = tmp_path / "run"
    assert main(["train", str(write_pipeline(tmp_path / "p.toml")), "--run-dir", str(run_dir)]) == 0
    return run_dir


class TestRunName:
    @pytest.mark.parametrize(("name", "found"), [
        ('"../../escape"', "a path separator ('/')"),
        ('"a\\\\b"', "a path separator ('\\\\')"),
        ('"x\\"]\\n[foo"', "a control character ('\\n') and a character some file systems cannot hold ('\"')"),
        ('".."', 'start with "." (".." leaves the directory)'),
        ('""', "not be empty"),
        ('"tab\\there"', "a control character ('\\t')"),
        ('"what?"', "a character some file systems cannot hold ('?')"),
    ])
    def test_refused_by_check_and_train(self, name: str, found: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        """One paragraph naming the key and what is wrong, exit 2, nothing written anywhere."""
        pipeline = write_pipeline(tmp_path / "p.toml")
        logs = tmp_path / "deep" / "logs"
        for command in ("check", "train"):
            assert main([command, str(pipeline), "--set", f"run.name={name}", "--set",
                         f'logging.dir="{logs}"']) == 2
            err = capsys.readouterr().err
            assert err.startswith(f"harl: {pipeline}: run.name (from --set run.name={name}): becomes the name of the "
                                  "run directory"), err
            assert found in err and err.count("\n") == 1, err
        assert sorted(p.name for p in tmp_path.rglob("*")) == ["p.toml"]

    def test_unicode_and_spaces_inside_are_fine(self, tmp_path: Path) -> None:
        pipeline = write_pipeline(tmp_path / "p.toml")
        assert main(["train", str(pipeline), "--set", 'run.name="ünï côde"', "--set",
                     f'logging.dir="{tmp_path / "logs"}"']) == 0
        (run,) = (tmp_path / "logs").iterdir()
        assert run.name.startswith("ünï côde-s1-")


class TestNoLoadableCheckpoint:
    def test_crash_in_the_first_checkpoint_write_restarts_in_place(self, finished: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
        """SIGKILL while iter_0000001.pt was written: a 0-byte temp file, one metrics row, no checkpoint.
        --resume starts the run again from the beginning in place, says so in one line, and its rows are
        replaced (1, 2, never 1, 1, 2)."""
        for path in list_checkpoints(finished):
            path.unlink()
        (finished / "checkpoints" / ".iter_0000001.pt.host-999999.abc.tmp").write_bytes(b"")
        lines = (finished / "metrics.csv").read_text().splitlines(keepends=True)
        (finished / "metrics.csv").write_text("".join(lines[:2]))
        capsys.readouterr()
        assert main(["train", "--resume", str(finished)]) == 0
        out = capsys.readouterr().out
        assert (f"note: {finished}: no checkpoint to continue from (it stopped before its first checkpoint): "
                "starting the run again from the beginning, in place; its 1 metrics row will be replaced") in out
        assert iterations(finished) == [1, 2]
        assert load_checkpoint(latest_checkpoint(finished))["counters"]["iteration"] == 2

    def test_only_unreadable_checkpoints_are_set_aside(self, finished: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
        """Every checkpoint damaged (cut short): set aside as *.unreadable, and the run starts again."""
        for path in list_checkpoints(finished):
            path.write_bytes(path.read_bytes()[:100])
        assert main(["train", "--resume", str(finished)]) == 0
        assert "do not read back whole (set aside as *.unreadable)" in capsys.readouterr().out
        assert sorted(p.name for p in (finished / "checkpoints").glob("*.unreadable")) == [
            "iter_0000001.pt.unreadable", "iter_0000002.pt.unreadable"]
        assert iterations(finished) == [1, 2]

    def test_run_dir_message_names_resume_which_now_continues(self, finished: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
        for path in list_checkpoints(finished):
            path.unlink()
        assert main(["train", str(tmp_path / "p.toml"), "--run-dir", str(finished)]) == 2
        assert f"continue it with harl train --resume {finished}" in capsys.readouterr().err
        assert main(["train", "--resume", str(finished)]) == 0


class TestResumeEdits:
    @pytest.mark.parametrize("setting", ["run.seed=2", 'env.kwargs={mode="ok",sleep=0.0}',
                                         "collector.n_envs=4", "policy.hidden_sizes=[16]",
                                         'updater.objective.kind="a2c"'])
    def test_continuity_keys_refused_before_anything_is_written(self, finished: Path, setting: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
        """On a finished run extended (--set run.total_env_steps) or not: refused, exit 2, every file as it was."""
        before = fingerprint(finished)
        for extra in ([], ["--set", "run.total_env_steps=80"]):
            assert main(["train", "--resume", str(finished), "--set", setting, *extra]) == 2
            err = capsys.readouterr().err
            key = setting.partition("=")[0]
            assert re.search(rf"^harl: {re.escape(str(finished / 'pipeline.toml'))} with --set .*: {re.escape(key)}",
                             err), err
            assert "drop the --set" in err and err.count("\n") == 1
            assert fingerprint(finished) == before

    def test_seed_edit_names_the_reason(self, finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["train", "--resume", str(finished), "--set", "run.seed=2",
                     "--set", "run.total_env_steps=80"]) == 2
        err = capsys.readouterr().err
        assert "run.seed is 2 now but was 1 (the seed drew the run's earlier rows)" in err
        assert "(nothing was written)" in err

    def test_a_resume_that_does_nothing_writes_nothing(self, finished: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
        """An allowed edit on a finished run that leaves it finished: 'nothing to do', exit 0, no file touched."""
        before = fingerprint(finished)
        assert main(["train", "--resume", str(finished), "--set", "updater.objective.lr=0.001"]) == 0
        assert "nothing to do" in capsys.readouterr().out
        assert fingerprint(finished) == before

    def test_an_allowed_edit_that_trains_is_recorded(self, finished: Path) -> None:
        assert main(["train", "--resume", str(finished), "--set", "run.total_env_steps=60",
                     "--set", "updater.objective.lr=0.001"]) == 0
        text = (finished / "pipeline.toml").read_text()
        assert "total_env_steps = 60" in text and "lr = 0.001\n" in text
        assert iterations(finished) == [1, 2, 3]

    def test_hand_edited_seed_refused_too(self, finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = finished / "pipeline.toml"
        path.write_text(path.read_text().replace("seed = 1\n", "seed = 3\n").replace(
            "total_env_steps = 40\n", "total_env_steps = 80\n"))
        assert main(["train", "--resume", str(finished)]) == 2
        assert "run.seed is 3 now but was 1" in capsys.readouterr().err


class TestMetricsCannotVanish:
    def test_removed_mid_run_is_written_again_whole(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """metrics.csv removed after row 5 (a cleanup job): a warning line, and at the end the file holds the
        header and every row 1-8; a resume appends 9-10 without a hole."""
        from harl import api

        pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=160, every=3)
        run_dir = tmp_path / "run"

        def remove_after_5(row: dict[str, Any]) -> None:
            if row["iteration"] == 5:
                (run_dir / "metrics.csv").unlink()

        api.train(pipeline, run_dir=run_dir, callbacks=[remove_after_5])
        err = capsys.readouterr().err
        assert f"harl: warning: {run_dir / 'metrics.csv'} was removed while the run wrote it: written again whole, " \
               "its header and all 6 rows of the run" in err
        assert iterations(run_dir) == list(range(1, 9))
        (run_dir / "metrics.csv").unlink()  # gone again before a resume: rebuilt from the checkpoint's copy
        assert main(["train", "--resume", str(run_dir), "--set", "run.total_env_steps=200"]) == 0
        assert "written again from the copy its checkpoint holds" in capsys.readouterr().err
        assert iterations(run_dir) == list(range(1, 11))

    def test_replaced_file(self, tmp_path: Path) -> None:
        """A file replaced by another (a sync tool's copy): written again whole."""
        path = tmp_path / "metrics.csv"
        said: list[str] = []
        logger = CSVLogger(path, ["iteration", "x"], warn=said.append)
        logger.write({"iteration": 1, "x": 0.5})
        path.rename(tmp_path / "moved.csv")
        path.write_text("iteration,x\n")
        logger.write({"iteration": 2, "x": 0.25})
        logger.close()
        assert [r["iteration"] for r in read_metrics(path)] == ["1", "2"]
        assert said == [f"harl: warning: {path} was replaced by another file while the run wrote it: written again "
                        "whole, its header and all 2 rows of the run"]
