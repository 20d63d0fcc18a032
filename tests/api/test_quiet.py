"""The Python API is quiet unless asked: ``harl.train`` and a Trainer of ``harl.start`` alike
(docs/python-api.md); ``quiet=False`` on either shows the progress lines ``harl train`` shows."""

from __future__ import annotations

from pathlib import Path

import pytest

import harl
from tests.api.test_api import TABLES
from tests.fakes import counting  # noqa: F401 - registers env kind "counting"

LOUD = {**TABLES, "logging": {"progress": True, "log_every": 1}}


def printed(capfd: pytest.CaptureFixture[str]) -> str:
    out, err = capfd.readouterr()
    return out + err


def test_train_and_start_are_both_quiet_by_default(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    harl.train(LOUD, run_dir=tmp_path / "a")
    assert printed(capfd) == ""
    with harl.start(LOUD, run_dir=tmp_path / "b") as trainer:
        trainer.train()
    assert printed(capfd) == ""
    with harl.api.start_resume(tmp_path / "b", overrides=["run.total_env_steps=60"]) as trainer:
        trainer.train()
    assert printed(capfd) == ""


def test_quiet_false_shows_progress_on_either(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    harl.train(LOUD, run_dir=tmp_path / "a", quiet=False)
    train_says = printed(capfd)
    assert "env steps" in train_says
    with harl.start(LOUD, run_dir=tmp_path / "b", quiet=False) as trainer:
        trainer.train()
    assert "env steps" in printed(capfd)
    with harl.start(LOUD, run_dir=tmp_path / "c") as trainer:
        trainer.train(quiet=False)
    assert "env steps" in printed(capfd)
