"""harl.run.resume_check and bad run paths: a resume after a shape-changing edit, a non-UTF-8
pipeline.toml, --run-dir or logging.dir that is a file: each one clear exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from harl.cli import main
from tests.fakes.bad_env import write_pipeline


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A finished 2-iteration run (2 envs, 1 eval env)."""
    path = tmp_path / "run"
    assert main(["train", str(write_pipeline(tmp_path / "p.toml")), "--run-dir", str(path)]) == 0
    return path


def edit(run_dir: Path, old: str, new: str) -> Path:
    path = run_dir / "pipeline.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new).replace("total_env_steps = 40\n", "total_env_steps = 80\n"))
    return path


def test_edited_n_envs_is_refused_at_restore(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """collector.n_envs 2 -> 4 after the checkpoint: refused before building, saying what differs."""
    pipeline = edit(run_dir, "[collector]\nkind = \"on_policy\"\nrollout_length = 10\nn_envs = 2\n",
                    "[collector]\nkind = \"on_policy\"\nrollout_length = 10\nn_envs = 4\n")
    assert main(["train", "--resume", str(run_dir)]) == 2
    assert capsys.readouterr().err == (
        f"harl: {pipeline}: collector.n_envs is 4 now but was 2 when {run_dir / 'checkpoints' / 'iter_0000002.pt'} "
        "was written, and the checkpoint holds state per environment (or buffer row); set it back to resume, "
        f"or start a new run from this pipeline with harl train {pipeline}\n")


def test_edited_eval_envs_too(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two edited keys are both named."""
    edit(run_dir, "rollout_length = 10\nn_envs = 2\n", "rollout_length = 10\nn_envs = 3\n")
    edit(run_dir, "episodes = 2\nn_envs = 1\n", "episodes = 2\nn_envs = 2\n")
    assert main(["train", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "collector.n_envs is 3 now but was 2; evaluator.n_envs is 2 now but was 1 when" in err
    assert "set them back to resume" in err


def test_rollout_length_is_refused(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """rollout_length sets the data stream and the iteration's size: a resume would not continue the run."""
    edit(run_dir, "rollout_length = 10\n", "rollout_length = 20\n")
    assert main(["train", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "collector.rollout_length is 20 now but was 10 (it sets the data stream and the size of an iteration)" in err


def test_learning_rate_may_change(run_dir: Path) -> None:
    """An optimisation setting (the actors' learning rate) may be edited: the run resumes."""
    edit(run_dir, "entropy_coef = 0.01\nlr = 0.0005\n", "entropy_coef = 0.01\nlr = 0.0001\n")
    assert main(["train", "--resume", str(run_dir)]) == 0


@pytest.mark.parametrize("command", ["train --resume", "eval"])
def test_non_utf8_pipeline(run_dir: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A pipeline.toml that is not UTF-8 (resume, eval): exit 2, no traceback."""
    path = run_dir / "pipeline.toml"
    path.write_bytes(b"\xff\xfe" + path.read_bytes())
    assert main([*command.split(), str(run_dir)]) == 2
    assert capsys.readouterr().err == (
        f"harl: {path}: not a pipeline file (it is not UTF-8 text); harl train writes it as UTF-8: restore it "
        "from a copy, or start the run again\n")


def test_run_dir_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("x")
    assert main(["train", str(write_pipeline(tmp_path / "p.toml")), "--run-dir", str(tmp_path / "afile")]) == 2
    assert capsys.readouterr().err == (f"harl: --run-dir {tmp_path / 'afile'}: is a file, not a directory; pass "
                                       "a new directory (or an empty one) for the run\n")


def test_logging_dir_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("x")
    pipeline = write_pipeline(tmp_path / "p.toml")
    assert main(["train", str(pipeline), "--set", f'logging.dir="{tmp_path / "afile"}"']) == 2
    assert capsys.readouterr().err == (
        f"harl: {tmp_path / 'afile'}: cannot write the run directory: {tmp_path / 'afile'} is a file, not a "
        "directory; set logging.dir (or --run-dir) to a writable directory\n")
