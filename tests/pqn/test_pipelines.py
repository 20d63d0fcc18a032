"""PQN end to end: learning on a tiny env, exact resume (feed-forward, and recurrent with a memory
window mid-episode), bad input refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

import tests.value.fake_envs  # noqa: F401 - registers the "guess" env kind
from harl.cli import main
from harl.logging.csv_log import read_metrics
from harl.rundir.checkpoint import load_checkpoint

HERE = Path(__file__).parent
GUESS = HERE / "guess_pqn.toml"
ROOT = HERE.parents[1]
VDN_MPE = ROOT / "pipelines" / "pqn-vdn_mpe_torch_spread.toml"
WALL_CLOCK = ("wall_time", "steps_per_s")


def sets(**values: object) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def rows(run_dir: Path) -> list[dict[str, str]]:
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in read_metrics(run_dir / "metrics.csv")]


@pytest.mark.parametrize("mixer", ["vdn", "none"])
def test_pqn_learns_the_guessing_game(tmp_path: Path, mixer: str) -> None:
    """PQN-VDN and PQN-IQL reach the greedy return of 4 (both agents name the target at every step)
    within 4,096 env steps (64 rollouts of 8 envs x 8 steps, a few seconds on a CPU); the first
    evaluation (untrained, greedy) is below it."""
    run = tmp_path / "run"
    assert main(["train", str(GUESS), *sets(**{"critic.kind": mixer}), "--run-dir", str(run)]) == 0
    evals = [float(r["eval_return"]) for r in read_metrics(run / "metrics.csv") if r["eval_return"]]
    assert evals[0] < 4.0
    assert evals[-1] == 4.0
    assert float(read_metrics(run / "metrics.csv")[-1]["epsilon"]) == pytest.approx(0.05)


def test_the_recurrent_network_learns_it_too(tmp_path: Path) -> None:
    run = tmp_path / "run"
    extra = {"policy.recurrent": "gru", "buffer.memory_window": 2, "updater.minibatches": 2,
             "policy.norm": "batch_norm", "policy.input_norm": "true", "updater.objective.lr_linear_decay": "true"}
    assert main(["train", str(GUESS), *sets(**extra), "--run-dir", str(run)]) == 0
    evals = [float(r["eval_return"]) for r in read_metrics(run / "metrics.csv") if r["eval_return"]]
    assert evals[-1] == 4.0


SHORT = {"run.total_env_steps": 640, "evaluator.every_iterations": 2, "checkpoint.every_iterations": 1,
         "checkpoint.keep": 100}
"""10 iterations of 8 envs x 8 steps (4-step episodes end on iteration boundaries)."""


def test_a_stopped_run_resumes_exactly(tmp_path: Path) -> None:
    """Resuming from the checkpoint of iteration 5 writes rows 6-10 as the uninterrupted run did
    (epsilon, losses, evaluations); the checkpoint holds the optimiser and the collector's generator."""
    whole = tmp_path / "whole"
    assert main(["train", str(GUESS), *sets(**SHORT), "--run-dir", str(whole)]) == 0
    state = load_checkpoint(whole / "checkpoints" / "iter_0000005.pt")
    assert state["updater"]["grad_steps"] == 5 * 2 * 4
    assert "generator" in state["collector"] and "generator" in state["updater"]
    resumed = tmp_path / "resumed"
    shutil.copytree(whole, resumed)
    assert main(["train", "--resume", str(resumed), "--checkpoint",
                 str(resumed / "checkpoints" / "iter_0000005.pt")]) == 0
    assert rows(resumed) == rows(whole)
    assert len(rows(whole)) == 10 and rows(whole)[-1]["loss"] not in ("", None)


def test_a_recurrent_run_resumes_exactly_mid_episode(tmp_path: Path) -> None:
    """Torch MPE (its whole state saved), rollouts of 10 steps against episodes of 25, a memory window of
    4 steps: the checkpoint of iteration 3 is mid-episode with the window filled; resuming from it
    writes the rows the uninterrupted run wrote and ends with the same network."""
    extra = {"collector.n_envs": 4, "collector.rollout_length": 10, "run.total_env_steps": 240,
             "buffer.memory_window": 4, "policy.recurrent": "gru", "policy.hidden_sizes": "[16]",
             "policy.norm": "batch_norm", "policy.input_norm": "true", "updater.minibatches": 2,
             "updater.epochs": 2, "evaluator.episodes": 2, "evaluator.n_envs": 2, "evaluator.every_iterations": 2,
             "checkpoint.every_iterations": 1, "checkpoint.keep": 100, "logging.progress": "false",
             "run.torch_threads": 1}
    whole = tmp_path / "whole"
    assert main(["train", str(VDN_MPE), *sets(**extra), "--run-dir", str(whole)]) == 0
    resumed = tmp_path / "resumed"
    shutil.copytree(whole, resumed)
    for later in sorted((resumed / "checkpoints").glob("iter_*.pt"))[3:]:
        later.unlink()
    assert main(["train", "--resume", str(resumed), "--checkpoint",
                 str(resumed / "checkpoints" / "iter_0000003.pt")]) == 0
    assert rows(resumed) == rows(whole)
    a = load_checkpoint(max((whole / "checkpoints").glob("iter_*.pt")))["policy"]
    b = load_checkpoint(max((resumed / "checkpoints").glob("iter_*.pt")))["policy"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# --------------------------------------------------------------------------- bad input


def refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, pipeline: Path, **values: object) -> str:
    run = tmp_path / "refused"
    assert main(["train", str(pipeline), *sets(**values), "--run-dir", str(run)]) == 2
    assert not run.exists()
    return " ".join(capsys.readouterr().err.split())


def test_continuous_actions_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = refused(capsys, tmp_path, VDN_MPE, **{"env.continuous_actions": "true"})
    assert "pqn-vdn_mpe_torch_spread.toml: PQN picks discrete actions by their Q values" in err
    assert "continuous_actions = false" in err


def test_minibatches_that_do_not_divide_the_rollout_are_refused(capsys: pytest.CaptureFixture[str],
                                                                tmp_path: Path) -> None:
    err = refused(capsys, tmp_path, GUESS, **{"updater.minibatches": 5})
    assert ("guess_pqn.toml: updater.minibatches (from --set updater.minibatches=5): 5 does not divide collector.n_envs x collector.rollout_length "
            "= 64 (the steps that each epoch splits); set minibatches = 4") in err


def test_recurrent_minibatches_split_the_envs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = refused(capsys, tmp_path, GUESS, **{"policy.recurrent": "gru", "updater.minibatches": 3})
    assert "updater.minibatches (from --set updater.minibatches=3): 3 does not divide collector.n_envs = 8" in err and "set minibatches = 2" in err


def test_qmix_is_not_a_pqn_mixer(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = refused(capsys, tmp_path, GUESS, **{"critic.kind": "qmix"})
    assert "critic.kind" in err and "qmix" in err


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("collector.epsilon_finish", 1.0, "epsilon_finish = 1.0 is above epsilon_start = 0.5"),
    ("collector.epsilon_decay", 1.5, "expected a value in [0, 1], got 1.5"),
    ("returns.lam", -0.1, "expected a value in [0, 1], got -0.1"),
    ("returns.team_reward", "max", "expected one of"),
    ("policy.norm", "group_norm", "expected one of"),
    ("buffer.memory_window", -1, "expected a value in [0, inf]"),
])
def test_settings_out_of_range_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, key: str,
                                           value: object, expected: str) -> None:
    extra = {key: value, "collector.epsilon_start": 0.5} if key == "collector.epsilon_finish" else {key: value}
    err = refused(capsys, tmp_path, GUESS, **extra)
    assert f"guess_pqn.toml: {key}" in err and expected in err


def test_a_memory_window_needs_a_recurrent_network(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = refused(capsys, tmp_path, GUESS, **{"buffer.memory_window": 4})
    assert "guess_pqn.toml: buffer.memory_window (from --set buffer.memory_window=4): 4 keeps steps of the previous rollout" in err
    assert 'set memory_window = 0, or policy.recurrent = "gru"' in err
