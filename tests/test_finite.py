"""NaN and infinity: refused in pipelines, and a non-finite update stops the run unsaved."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import attrs
import pytest
import torch

from harl.cli import main
from harl.errors import NonFiniteError
from harl.run.lifecycle import start_run
from harl.rundir.checkpoint import list_checkpoints, load_checkpoint
from tests.fakes.bad_env import write_pipeline

ROOT = Path(__file__).parents[1]
HAPPO = ROOT / "pipelines" / "happo_mpe_spread.toml"


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_non_finite_config_number(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """lr = inf (which trained all-NaN to exit 0) is a config error with the exact message."""
    assert main(["check", str(HAPPO), "--set", f"updater.objective.lr={value}"]) == 2
    assert capsys.readouterr().err == (
        f"harl: {HAPPO}: updater.objective.lr (from --set updater.objective.lr={value}): expected a finite "
        f"number, got {value}; write a finite number, e.g. --set updater.objective.lr=0.0005 (the default)\n")


def test_non_finite_in_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same in the pipeline file itself (TOML's inf literal)."""
    path = tmp_path / "p.toml"
    path.write_text(HAPPO.read_text().replace("gamma = 0.99", "gamma = inf"))
    assert main(["check", str(path)]) == 2
    assert "returns.gamma: expected a finite number, got inf" in capsys.readouterr().err


def poison_update(trainer: Any, at_call: int, how: str) -> None:
    """Make the updater's ``at_call``-th update non-finite (NaN critic weights, or a NaN loss)."""
    update = trainer.stages.updater.update
    calls = []

    def poisoned(*args: Any, **kwargs: Any) -> Any:
        stats = update(*args, **kwargs)
        calls.append(1)
        if len(calls) == at_call:
            if how == "weights":
                with torch.no_grad():
                    next(trainer.stages.critic.parameters()).fill_(math.nan)
            else:
                stats.agents[1] = attrs.evolve(stats.agents[1], policy_loss=math.nan)
        return stats

    trainer.stages.updater.update = poisoned


@pytest.mark.parametrize(("how", "where"), [
    ("weights", "the update left non-finite parameters in the critic"),
    ("loss", "the actor update of agent 1 (policy_loss) gave nan"),
])
def test_non_finite_update_stops_unsaved(tmp_path: Path, how: str, where: str) -> None:
    """Iteration 3 goes non-finite: the run stops naming iteration, stage and agent, and the checkpoint
    of iteration 2 stays the newest, unchanged (the exit-save does not write the poisoned state)."""
    run_dir = tmp_path / "run"
    trainer, _ = start_run(write_pipeline(tmp_path / "p.toml", total_env_steps=100), [], run_dir)
    poison_update(trainer, 3, how)
    try:
        with pytest.raises(NonFiniteError) as caught:
            trainer.train(quiet=True)
    finally:
        trainer.stages.close()
    newest = run_dir / "checkpoints" / "iter_0000002.pt"
    assert str(caught.value) == (
        f"iteration 3: {where}; the run stopped without saving: the newest checkpoint, {newest}, holds the "
        "last finite state and is kept as it was. Lower the learning rates (updater.objective.lr, critic.lr), "
        "or check the rewards' scale")
    assert list_checkpoints(run_dir)[-1] == newest
    state = load_checkpoint(newest)
    assert all(torch.isfinite(v).all() for v in state["critic"].values())


def test_nan_from_the_env_saves_the_work_done(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A NaN reward in iteration 3 names env, agent and field (exit 2); unlike a poisoned update, the
    networks are fine, so the two whole iterations are saved although no checkpoint was scheduled."""
    pipeline = write_pipeline(tmp_path / "p.toml", "nan_reward", total_env_steps=200, every=1000, env={"at": 25})
    run_dir = tmp_path / "run"
    assert main(["train", str(pipeline), "--run-dir", str(run_dir)]) == 2
    assert capsys.readouterr().err.startswith(
        'harl: python env "tests.fakes.bad_env:make", environment 0, agent 1: rewards holds nan (NaN or infinity)')
    assert [p.name for p in list_checkpoints(run_dir)] == ["iter_0000002.pt"]
