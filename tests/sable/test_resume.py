"""A Sable run stopped mid-episode resumes exactly: its retention states travel in the rollout's
next start (the step record's fields), so the resumed run's metrics and final checkpoint are the
uninterrupted run's, bit for bit."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harl.cli import main
from tests.test_determinism import rows, same_final_state

PIPELINE = Path(__file__).parents[2] / "pipelines" / "sable_mpe_torch_spread.toml"


@pytest.mark.parametrize("memory", ["true", "false"], ids=["rec", "ff"])
def test_resume_mid_episode_is_exact(tmp_path: Path, memory: str) -> None:
    """Rollouts of 10 steps in 25-step episodes: the checkpoint after iteration 2 falls inside episodes."""
    values = {"collector.n_envs": 4, "collector.rollout_length": 10, "run.total_env_steps": 160,
              "run.device": '"cpu"', "evaluator.episodes": 2, "evaluator.n_envs": 2, "evaluator.every_iterations": 2,
              "updater.objective.embed_dim": 16, "updater.objective.memory": memory,
              "checkpoint.every_iterations": 1, "checkpoint.keep": 100, "logging.progress": "false"}
    extra = [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]
    whole = tmp_path / "whole"
    assert main(["train", str(PIPELINE), *extra, "--run-dir", str(whole)]) == 0
    resumed = tmp_path / "resumed"
    shutil.copytree(whole, resumed)
    assert main(["train", "--resume", str(resumed), "--checkpoint", str(resumed / "checkpoints" / "iter_0000002.pt")]) == 0
    assert rows(resumed) == rows(whole)
    assert same_final_state(resumed, whole)
