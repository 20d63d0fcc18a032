"""MAT and MAT-Dec end to end through the CLI: exact resume (metrics.csv without the wall-clock
columns, and the final checkpoints tensor by tensor), ``harl eval`` of the run, the shipped
pipelines' check and names."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tomllib

from harl.algorithms import kinds_of, name_of
from harl.cli import main
from tests.test_determinism import rows, same_final_state

pytest.importorskip("mpe2", reason="these runs use MPE (pip install harl[mpe])")

ROOT = Path(__file__).parents[2]
MAT_MPE = ROOT / "pipelines" / "mat_mpe_spread.toml"


def settings(**extra: object) -> list[str]:
    """Four iterations of 4 envs x 25 steps, evaluated every 2, a checkpoint after each; a small transformer."""
    values: dict[str, object] = {
        "collector.n_envs": 4, "collector.rollout_length": 25, "run.total_env_steps": 400,
        "evaluator.episodes": 3, "evaluator.n_envs": 2, "evaluator.every_iterations": 2,
        "updater.objective.n_embd": 16, "updater.objective.epochs": 2, "updater.objective.minibatches": 2,
        "checkpoint.every_iterations": 1, "checkpoint.keep": 100, "logging.progress": "false", **extra,
    }
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


@pytest.mark.parametrize(("objective", "continuous", "order"),
                         [("mat", False, "fixed"), ("mat_dec", False, ""), ("mat", True, "fixed"), ("mat", False, "random"),
                          ("mat", False, "episode")])
def test_exact_resume_and_eval(tmp_path: Path, objective: str, continuous: bool, order: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """Discrete simple_spread (MAT, MAT-Dec, MAT with a random order per rollout and per episode: 25-step
    episodes, rollouts of 25, so each rollout's first step draws every env's order) and its Box version
    (MAT's Gaussian)."""
    whole = tmp_path / "whole"
    extra = {"updater.objective.kind": objective, "env.continuous_actions": str(continuous).lower()}
    if order:
        extra["updater.objective.order"] = order
    assert main(["train", str(MAT_MPE), *settings(**extra), "--run-dir", str(whole)]) == 0
    metrics = rows(whole)
    assert [r["iteration"] for r in metrics] == ["1", "2", "3", "4"]
    assert all(r["value_loss"] and r["policy_loss"] and r["ratio"] for r in metrics)
    resumed = tmp_path / "resumed"
    shutil.copytree(whole, resumed)
    assert main(["train", "--resume", str(resumed), "--checkpoint",
                 str(resumed / "checkpoints" / "iter_0000002.pt")]) == 0
    assert rows(resumed) == metrics
    assert same_final_state(resumed, whole)
    capsys.readouterr()
    assert main(["eval", str(whole), "--episodes", "4"]) == 0
    assert "return" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["mat_mpe_spread", "mat_smax_3m", "matdec_smax_3m", "mat_smax_2s3z"])
def test_shipped_pipelines_check_and_are_named(name: str) -> None:
    path = ROOT / "pipelines" / f"{name}.toml"
    if "smax" in name:
        pytest.importorskip("jaxmarl", reason="SMAX needs jaxmarl")
    assert main(["check", str(path)]) == 0
    expected = "MAT-Dec" if name.startswith("matdec") else "MAT"
    assert name_of(kinds_of(tomllib.loads(path.read_text()))) == expected


@pytest.mark.parametrize(("setting", "message"), [
    ("updater.objective.kind=ppo", '"ppo" does not provide joint_loss, which updater.kind = "joint" needs; '
     "set updater.objective.kind = one of mat, mat_dec"),
    ("critic.kind=v", '"v" does not provide transformer_values, which updater.objective.kind = "mat" needs; '
     'set critic.kind = "mat_v"'),
    ("updater.kind=simultaneous", '"simultaneous" does not provide joint_update, which updater.objective.kind = '
     '"mat" needs; set updater.kind = "joint"'),
])
def test_the_stages_mat_needs_are_named(setting: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(MAT_MPE), "--set", setting]) == 2
    assert message in capsys.readouterr().err


def test_mamujoco_pipeline_validates_without_the_extra() -> None:
    """MAT's own MuJoCo task: the pipeline loads and passes the cross-stage checks (no env is built), is
    named MAT, holds train_mujoco.sh's numbers, and its header says it is not yet measured."""
    from harl.api import load_pipeline

    path = ROOT / "pipelines" / "mat_mamujoco_halfcheetah_6x1.toml"
    spec = load_pipeline(path)
    assert name_of(kinds_of(tomllib.loads(path.read_text()))) == "MAT"
    objective = spec.updater.objective
    assert (objective.lr, objective.entropy_coef, objective.max_grad_norm, objective.epochs,
            objective.minibatches, objective.clip) == (5e-5, 0.001, 0.5, 10, 40, 0.05)
    assert (spec.env.scenario, spec.env.agent_conf, spec.env.agent_obsk) == ("HalfCheetah", "6x1", 0)
    assert (spec.collector.n_envs, spec.collector.rollout_length) == (40, 100)
    assert "Not yet measured" in path.read_text().split("\n[run]")[0]


def test_vectorize_is_refused_naming_mat_stages(capsys: pytest.CaptureFixture[str]) -> None:
    """--vectorize batches PPO/A2C members only: MAT's objective and critic are named, with the way out."""
    assert main(["train", str(MAT_MPE), "--seeds", "1,2", "--vectorize"]) == 2
    err = capsys.readouterr().err
    assert 'updater.objective.kind = "mat"' in err and 'critic.kind = "mat_v"' in err and "Drop --vectorize" in err


def test_episode_orders_resume_mid_episode(tmp_path: Path) -> None:
    """order = "episode" with rollouts of 10 steps in 25-step episodes: a checkpoint falls inside episodes,
    whose running orders the resumed run keeps (metrics and final weights as the run never stopped)."""
    whole = tmp_path / "whole"
    extra = {"updater.objective.order": "episode", "collector.rollout_length": 10, "run.total_env_steps": 240,
             "evaluator.every_iterations": 3}
    assert main(["train", str(MAT_MPE), *settings(**extra), "--run-dir", str(whole)]) == 0
    resumed = tmp_path / "resumed"
    shutil.copytree(whole, resumed)
    assert main(["train", "--resume", str(resumed), "--checkpoint",
                 str(resumed / "checkpoints" / "iter_0000002.pt")]) == 0
    assert rows(resumed) == rows(whole)
    assert same_final_state(resumed, whole)


def test_a_checkpoint_of_older_harl_resumes_mid_episode_in_its_orders(tmp_path: Path) -> None:
    """A checkpoint as harl wrote it before the step record carried the orders (each env's running order in
    the policy's weights, ``env_orders``; none in the rollout's next start): made here from a new one, it
    resumes mid-episode into the same run (``harl.policy.mat_migrate`` hands the orders over)."""
    import torch

    from harl.rundir.checkpoint import load_checkpoint

    whole = tmp_path / "whole"
    extra = {"updater.objective.order": "episode", "collector.rollout_length": 10, "run.total_env_steps": 240,
             "evaluator.every_iterations": 3}
    assert main(["train", str(MAT_MPE), *settings(**extra), "--run-dir", str(whole)]) == 0
    resumed = tmp_path / "resumed"
    shutil.copytree(whole, resumed)
    path = resumed / "checkpoints" / "iter_0000002.pt"
    state = load_checkpoint(path)
    running = state["collector"]["next"].pop("extra_orders")
    assert running.shape == (4, 3) and not bool((state["collector"]["next"]["starts"] > 0).all())  # mid-episode
    state["policy"]["env_orders"] = running
    torch.save(state, path)
    assert main(["train", "--resume", str(resumed), "--checkpoint", str(path)]) == 0
    assert rows(resumed) == rows(whole)
    assert same_final_state(resumed, whole)
