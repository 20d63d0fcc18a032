"""harl.logging.progress: stage time shares, plain lines off a terminal, --quiet."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from harl.cli import main
from harl.logging.progress import ProgressView, StageTimes
from tests.test_cli import HAPPO, tiny


def test_shares() -> None:
    """Shares are percentages of the time measured so far, collect / update / eval."""
    times = StageTimes()
    assert times.shares() == ""
    times.add(4.0, 1.0, 0.0)
    times.add(2.0, 2.6, 0.4)
    assert times.shares() == "collect 60% · update 36% · eval 4%"


def row(iteration: int, eval_return: float | None = None) -> dict[str, object]:
    return {"iteration": iteration, "env_steps": 100 * iteration, "steps_per_s": 1234.4,
            "train_return": -12.345, "eval_return": eval_return}


def test_plain_lines_when_not_a_terminal() -> None:
    """Off a terminal: a line every log_every iterations and after each evaluation, with the shares."""
    out = io.StringIO()
    view = ProgressView(1000, 0, enabled=True, log_every=2, console=Console(file=out, width=200))
    for iteration in (1, 2, 3):
        view.update(row(iteration, -9.5 if iteration == 3 else None), -9.5 if iteration == 3 else None,
                    "collect 60% · update 40% · eval 0%")
    view.close()
    assert out.getvalue().splitlines() == [
        "it 2  env steps 200  1234 steps/s  train -12.35  eval -  (collect 60% · update 40% · eval 0%)",
        "it 3  env steps 300  1234 steps/s  train -12.35  eval -9.50  (collect 60% · update 40% · eval 0%)",
    ]


def test_disabled_view_prints_nothing() -> None:
    """enabled=False (--quiet, progress = false) shows no line at all."""
    out = io.StringIO()
    view = ProgressView(1000, 0, enabled=False, log_every=1, console=Console(file=out))
    view.update(row(1, -1.0), -1.0, "collect 100% · update 0% · eval 0%")
    view.close()
    assert out.getvalue() == ""


def test_quiet_train(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """train --quiet prints the run directory and the result, and no progress, even with progress = true."""
    pytest.importorskip("mpe2", reason="the run uses MPE (pip install harl[mpe])")
    settings = [a.replace("logging.progress=false", "logging.log_every=1") for a in tiny(tmp_path)]
    assert main(["train", str(HAPPO), *settings, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith("run directory: ") and "finished: 2 iterations" in out
    assert "it 1" not in out
