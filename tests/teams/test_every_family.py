"""Learning teams of every family (issue 55): the shipped off-policy and value-based teams pipelines,
and a run that mixes families, check, train and resume exactly.

Each case is a few iterations of a shipped pipeline, shrunk; the checkpoint of iteration 2 is resumed
and must write the rows the uninterrupted run wrote (wall-clock columns aside) and end with the same
networks, optimisers, generators and replays.  The off-policy cases stop mid-episode (30 steps a round
against episodes of 25): the world's state, each team's replay and where its actor stood carry over.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harl.cli import main
from harl.rundir.checkpoint import load_checkpoint
from tests.pinned import set_args
from tests.test_resume_mid_episode import equal, final_state, rows

pytest.importorskip("mpe2", reason="these runs use MPE (pip install harl[mpe])")

ROOT = Path(__file__).parents[2]
CHECKPOINT = "iter_0000002.pt"
COMMON: dict[str, object] = {
    "run.device": "cpu", "run.torch_threads": 1, "collector.n_envs": 2, "collector.backend": "inline",
    "evaluator.episodes": 2, "evaluator.n_envs": 2, "evaluator.every_iterations": 2,
    "checkpoint.every_iterations": 1, "checkpoint.keep": 100, "logging.progress": "false",
    "policy.hidden_sizes": "[16]"}
OFF_POLICY: dict[str, object] = {
    "collector.rollout_length": 30, "collector.warmup_steps": 60, "collector.updates_per_round": 2,
    "buffer.batch_size": 16, "buffer.capacity": 1000, "critic.hidden_sizes": "[16]", "run.total_env_steps": 240}

MIXED = """
[teams.prey.collector]
kind = "off_policy"
n_envs = 20
rollout_length = 200
warmup_steps = 100
updates_per_round = 2
[teams.prey.buffer]
kind = "replay"
capacity = 1000
batch_size = 16
[teams.prey.returns]
kind = "n_step"
n_step = 5
[teams.prey.critic]
kind = "q"
twin = true
hidden_sizes = [16]
[teams.prey.updater]
kind = "sequential"
[teams.prey.updater.objective]
kind = "sac"
"""
"""HAPPO predators (the file's stages) against HASAC prey: two families in one world."""

CASES: dict[str, tuple[str, dict[str, object]]] = {
    "hasac-vs-maddpg": ("hasac-vs-maddpg_mpe_tag.toml", {**OFF_POLICY, "teams.prey.critic.hidden_sizes": "[16]"}),
    "qmix-vs-vdn": ("qmix-vs-vdn_mpe_tag.toml", {
        "collector.rollout_length": 25, "collector.epsilon_anneal_steps": 100, "buffer.batch_size": 2,
        "buffer.capacity": 50, "updater.target_update_interval": 2, "run.total_env_steps": 200,
        "critic.mixing_embed_dim": 8, "critic.hypernet_embed": 16}),
    "hasac-selfplay": ("hasac_mpe_spread_selfplay.toml", {**OFF_POLICY, "teams.blue.snapshot_every_iterations": 1,
                                                          "teams.blue.pool_size": 2}),
    "happo-vs-hasac": ("mixed", {
        "collector.rollout_length": 30, "teams.prey.collector.n_envs": 2, "teams.prey.collector.rollout_length": 30,
        "critic.hidden_sizes": "[16]", "updater.objective.epochs": 1, "critic.epochs": 1,
        "run.total_env_steps": 240, "checkpoint.replay_buffer": "true"}),
}


def pipeline(name: str, tmp_path: Path) -> Path:
    if name != "mixed":
        return ROOT / "pipelines" / name
    path = tmp_path / "happo-vs-hasac.toml"
    base = (ROOT / "pipelines" / "happo-vs-mappo_mpe_tag.toml").read_text(encoding="utf-8")
    path.write_text(base.replace('[teams.prey.updater]\nkind = "simultaneous"\n', "") + MIXED, encoding="utf-8")
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_a_learning_team_of_every_family_checks_trains_and_resumes_exactly(case: str, tmp_path: Path) -> None:
    if case == "hasac-selfplay":
        pytest.importorskip("openskill", reason="ratings need openskill (pip install harl[teams])")
    file, extra = CASES[case]
    path = pipeline(file, tmp_path)
    args = set_args({**COMMON, **extra})
    assert main(["check", str(path), *args]) == 0
    whole = tmp_path / "whole"
    assert main(["train", str(path), *args, "--run-dir", str(whole), "--quiet"]) == 0
    saved = load_checkpoint(whole / "checkpoints" / CHECKPOINT)
    if case != "qmix-vs-vdn":  # 60 steps against episodes of 25: mid-episode, carried over exactly
        assert [s["steps"] for s in saved["collector"]["episode_starts"]] == [10, 10]
        assert "env_state" in saved["collector"]
    assert saved["buffer"]  # each off-policy or value team's replay is in the checkpoint
    resumed = tmp_path / "resumed"
    shutil.copytree(whole, resumed)
    assert main(["train", "--resume", str(resumed), "--checkpoint", str(resumed / "checkpoints" / CHECKPOINT)]) == 0
    assert rows(resumed) == rows(whole) and len(rows(whole)) >= 4
    assert equal(final_state(resumed), final_state(whole))
