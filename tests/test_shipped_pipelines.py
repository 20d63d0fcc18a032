"""Every shipped pipeline file loads, builds and trains two iterations end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from harl.build import start_run
from harl.errors import MissingExtraError
from harl.logging.csv_log import read_metrics
from harl.pipeline import read_toml

PIPELINES = sorted(Path(__file__).parent.parent.glob("pipelines/*.toml"))
LONG_EPISODES = {"mamujoco": "env.max_episode_steps", "gym": "env.max_episode_steps", "vmas": "env.max_steps"}
"""Env kinds with long episodes (MuJoCo's 1,000 steps) or costly steps: here episodes and
on-policy rollouts are cut to 50 steps, so two iterations take seconds; n_envs and the
networks keep the pipeline's own sizes."""


@pytest.mark.parametrize("path", PIPELINES, ids=[p.stem for p in PIPELINES])
def test_two_iterations(path: Path, tmp_path: Path) -> None:
    """Two iterations at the pipeline's own sizes write metrics, a checkpoint and the resolved pipeline.

    A pipeline whose env needs an extra that is not installed is skipped with harl's message.
    """
    overrides = ["logging.progress=false", "evaluator.episodes=4", "evaluator.n_envs=4"]
    data = read_toml(path)
    collector = data.get("collector", {})
    env_kind = data.get("env", {}).get("kind")
    if env_kind in LONG_EPISODES:
        overrides.append(f"{LONG_EPISODES[env_kind]}=50")
        if collector.get("kind", "on_policy") == "on_policy":
            overrides.append(f"collector.rollout_length={min(collector.get('rollout_length', 200), 50)}")
    if collector.get("kind") == "off_policy":  # warm-up is the first iteration; then a short update round
        one_iteration = collector.get("n_envs", 20) * collector.get("train_interval", 50)
        overrides += [f"collector.warmup_steps={one_iteration}", "collector.updates_per_round=2"]
    try:
        trainer, _ = start_run(path, overrides, run_dir=tmp_path / "run")
    except MissingExtraError as exc:
        pytest.skip(str(exc))
    per_iteration = trainer.stages.collector.steps_per_iteration
    trainer.total_iterations = 2
    try:
        result = trainer.train()
    finally:
        trainer.stages.close()
    assert result.counters.env_steps == 2 * per_iteration
    rows = read_metrics(tmp_path / "run" / "metrics.csv")
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    # A training return wherever an episode ended (MuJoCo's 1,000-step episodes outlast two rollouts).
    episodes = [int(r["episodes"]) for r in rows]
    assert [bool(r["train_return"]) for r in rows] == [e > p for e, p in zip(episodes, [0, *episodes])]
    assert rows[-1]["eval_return"]
    if collector.get("kind") == "off_policy":
        assert rows[0]["updates"] == "0" and rows[1]["updates"] == "2"
    assert (tmp_path / "run" / "pipeline.toml").is_file()
    assert list((tmp_path / "run" / "checkpoints").glob("iter_0000002.pt"))
