"""A fresh run refused while its stages are built (an env-dependent check) leaves nothing behind.

The run directory (and any folder above it) that the refused start created is removed; one
that was there before, or that holds anything the start did not write, stays.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.value.fake_envs  # noqa: F401 - registers the "guess" env kind
from harl.cli import main
from harl.errors import ConfigError
from harl.run.lifecycle import _unmake, start_run

GUESS = Path(__file__).parents[1] / "value" / "guess_qmix.toml"
NO_STATE = ["--set", "env.no_state=true"]  # QMIX without a state: refused when the env is open


def test_a_run_dir_the_refused_start_created_is_removed_with_its_parents(tmp_path: Path) -> None:
    run = tmp_path / "a" / "b" / "run"
    assert main(["train", str(GUESS), *NO_STATE, "--run-dir", str(run)]) == 2
    assert list(tmp_path.iterdir()) == []


def test_a_run_dir_that_was_there_stays(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    assert main(["train", str(GUESS), *NO_STATE, "--run-dir", str(run)]) == 2
    assert run.is_dir() and not (run / "pipeline.toml").exists()


def test_without_a_run_dir_nothing_is_made(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    assert main(["train", str(GUESS), *NO_STATE, "--set", f"logging.dir={logs}"]) == 2
    assert not logs.exists()


def test_the_api_refuses_the_same_way(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match="makes its mixing weights from the global state"):
        start_run(GUESS, ["env.no_state=true"], run_dir=run)
    assert not run.exists()


def test_a_folder_holding_anything_else_is_left(tmp_path: Path) -> None:
    """Only the lock and pipeline.toml are the start's own; a folder with more is not removed."""
    run = tmp_path / "made" / "run"
    run.mkdir(parents=True)
    for name in (".lock", "pipeline.toml", "notes.txt"):
        (run / name).write_text("x")
    _unmake(run, tmp_path / "made")
    assert sorted(p.name for p in run.iterdir()) == [".lock", "notes.txt", "pipeline.toml"]
    (run / "notes.txt").unlink()
    _unmake(run, tmp_path / "made")
    assert list(tmp_path.iterdir()) == []


def test_a_failure_that_is_not_a_refusal_leaves_no_lock_only_folder(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A start that fails for any reason (a bug's exception, Ctrl-C while building) removes the run
    directory it made, and takes its lock file out of one that was there before."""
    import harl.run.lifecycle as lifecycle

    def broken(*_: object, **__: object) -> None:
        raise KeyError('module name can\'t contain ".", got: red.team')

    monkeypatch.setattr(lifecycle, "build_stages", broken)
    made = tmp_path / "made" / "run"
    with pytest.raises(KeyError):
        start_run(GUESS, run_dir=made)
    assert list(tmp_path.iterdir()) == []
    there = tmp_path / "there"
    there.mkdir()
    with pytest.raises(KeyError):
        start_run(GUESS, run_dir=there)
    assert list(there.iterdir()) == []


TEAMS = Path(__file__).parents[2] / "pipelines" / "happo-vs-mappo_mpe_tag.toml"


@pytest.mark.parametrize(("name", "fix"), [('"red.team"', "red_team"), ("2nd", "team_2nd"), ("eval", "eval_team")])
def test_a_team_name_that_is_no_identifier_is_refused_before_any_folder(tmp_path: Path, name: str, fix: str,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``[teams."red.team"]`` names the team's networks' module: refused when the pipeline loads (exit 2,
    the key and a name that works), and no run directory is made."""
    pytest.importorskip("mpe2")
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(TEAMS.read_text(encoding="utf-8").replace("[teams.prey", f"[teams.{name}"), encoding="utf-8")
    run = tmp_path / "runs" / "x"
    assert main(["train", str(pipeline), "--run-dir", str(run)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{pipeline}: teams.{name}: " in err and f"[teams.{fix}]" in err
    assert not (tmp_path / "runs").exists()
