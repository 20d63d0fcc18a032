"""harl.logging.tensorboard: tags of metrics.csv columns, event files of a run, the missing extra."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harl.cli import main
from harl.logging.csv_log import read_metrics
from harl.logging.tensorboard import tag_of
from tests.test_cli import HAPPO, tiny


@pytest.mark.parametrize(("column", "tag"), [
    ("agent0_policy_loss", "agent0/policy_loss"), ("agent12_factor", "agent12/factor"),
    ("train_return", "train/return"), ("eval_return_std", "eval/return_std"),
    ("steps_per_s", "run/steps_per_s"), ("iteration", "run/iteration"),
    ("value_loss", "update/value_loss"), ("critic_grad_norm", "update/critic_grad_norm"),
])
def test_tags(column: str, tag: str) -> None:
    """Per-agent columns go under agent<i>/, train/eval columns under their group, the rest under run/ or update/."""
    assert tag_of(column) == tag


def scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_every_metric_as_a_scalar_against_env_steps(tmp_path: Path) -> None:
    """A run with tensorboard = true has every numeric metrics.csv column as a scalar at its env steps."""
    pytest.importorskip("tensorboard", reason="needs the tensorboard extra (pip install harl[tensorboard])")
    pytest.importorskip("mpe2", reason="the run uses MPE (pip install harl[mpe])")
    logs = tmp_path / "runs"
    assert main(["train", str(HAPPO), *tiny(logs), "--set", "logging.tensorboard=true"]) == 0
    (run_dir,) = logs.iterdir()
    assert list(run_dir.glob("events.out.tfevents.*"))
    found = scalars(run_dir)
    rows = read_metrics(run_dir / "metrics.csv")
    numeric = [c for c in rows[0] if c not in ("env_steps", "agent_order")]
    assert sorted(found) == sorted(tag_of(c) for c in numeric)
    for tag in ("train/return", "eval/return", "agent0/policy_loss", "agent2/entropy", "update/value_loss"):
        assert tag in found
    assert [step for step, _ in found["train/return"]] == [50, 100]
    assert found["train/return"][-1][1] == pytest.approx(float(rows[-1]["train_return"]), rel=1e-5)


def test_resume_hides_the_events_past_the_checkpoint(tmp_path: Path) -> None:
    """Resuming from an older checkpoint leaves each env step once in the scalars, as in metrics.csv."""
    pytest.importorskip("tensorboard", reason="needs the tensorboard extra (pip install harl[tensorboard])")
    pytest.importorskip("mpe2", reason="the run uses MPE (pip install harl[mpe])")
    logs = tmp_path / "runs"
    assert main(["train", str(HAPPO), *tiny(logs, 150), "--set", "logging.tensorboard=true"]) == 0
    (run_dir,) = logs.iterdir()
    first = run_dir / "checkpoints" / "iter_0000001.pt"
    assert main(["train", "--resume", str(run_dir), "--checkpoint", str(first)]) == 0
    assert [step for step, _ in scalars(run_dir)["train/return"]] == [50, 100, 150]


def test_missing_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Without tensorboard, tensorboard = true exits 2 with the extra to install, before any run directory."""
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    logs = tmp_path / "runs"
    assert main(["train", str(HAPPO), *tiny(logs), "--set", "logging.tensorboard=true"]) == 2
    assert capsys.readouterr().err == ('harl: [logging.tensorboard] needs: pip install "harl[tensorboard]" '
                                       '(the optional package "tensorboard" is not installed)\n')
    assert not logs.exists()
