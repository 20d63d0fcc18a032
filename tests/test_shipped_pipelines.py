"""Every shipped pipeline file loads, builds and trains two iterations end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from harl.config.loading import read_toml
from harl.errors import MissingExtraError
from harl.logging.csv_log import read_metrics
from harl.run.lifecycle import start_run

PIPELINES = sorted(Path(__file__).parent.parent.glob("pipelines/*.toml"))
LONG_EPISODES = {"mamujoco": "env.max_episode_steps", "gym": "env.max_episode_steps", "vmas": "env.max_episode_steps",
                 "air_combat": "env.max_episode_steps", "smax": "env.max_episode_steps", "gymma": "env.max_episode_steps",
                 "pettingzoo": "env.kwargs.max_cycles"}
"""Env kinds with long episodes (MuJoCo's 1,000 steps) or costly steps: here episodes and
on-policy rollouts are cut to 50 steps, so two iterations take seconds; n_envs and the
networks keep the pipeline's own sizes."""


@pytest.mark.parametrize("path", PIPELINES, ids=[p.stem for p in PIPELINES])
def test_two_iterations(path: Path, tmp_path: Path) -> None:
    """Two iterations at the pipeline's own sizes write metrics, a checkpoint and the resolved pipeline.

    A pipeline whose env needs an extra that is not installed is skipped with harl's message.
    """
    data = read_toml(path)
    collector = data.get("collector", {})
    env_kind = data.get("env", {}).get("kind")
    # SMAX compiles one JAX step per batch size: evaluating on the training batch size compiles once.
    eval_envs = collector.get("n_envs", 4) if env_kind == "smax" else 4
    overrides = ["logging.progress=false", "evaluator.episodes=4", f"evaluator.n_envs={eval_envs}"]
    if env_kind == "football":  # ~50 MB and ~90 steps/s per engine: a few engines, short rollouts
        overrides += ["collector.n_envs=4", "collector.rollout_length=50"]
    if env_kind in LONG_EPISODES:
        overrides.append(f"{LONG_EPISODES[env_kind]}=50")
        if collector.get("kind", "on_policy") in ("on_policy", "pqn"):
            overrides.append(f"collector.rollout_length={min(collector.get('rollout_length', 200), 50)}")
    if collector.get("kind") == "off_policy":  # warm-up is the first iteration; then a short update round
        one_iteration = collector.get("n_envs", 20) * collector.get("rollout_length", 50)
        overrides += [f"collector.warmup_steps={one_iteration}", "collector.updates_per_round=2"]
    try:
        trainer, _ = start_run(path, overrides, run_dir=tmp_path / "run")
    except MissingExtraError as exc:
        pytest.skip(str(exc))
    per_iteration = trainer.stages.collector.steps_per_iteration
    with trainer:
        result = trainer.train(max_iterations=2)
    assert result.counters.env_steps == 2 * per_iteration
    rows = read_metrics(tmp_path / "run" / "metrics.csv")
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    # A training return wherever an episode ended (MuJoCo's 1,000-step episodes outlast two rollouts).
    episodes = [int(r["episodes"]) for r in rows]
    assert [bool(r["train_return"]) for r in rows] == [e > p for e, p in zip(episodes, [0, *episodes])]
    assert rows[-1]["eval_return"]
    if collector.get("kind") == "off_policy":  # a [teams] run has each learning team's (predators_updates)
        updates = [key for key in rows[0] if key == "updates" or key.endswith("_updates")]
        assert updates and all(rows[0][key] == "0" and rows[1][key] == "2" for key in updates)
    assert (tmp_path / "run" / "pipeline.toml").is_file()
    assert list((tmp_path / "run" / "checkpoints").glob("iter_0000002.pt"))


ON_POLICY_ALGORITHMS = {"happo": ("sequential", "ppo"), "hatrpo": ("sequential", "trpo"),
                        "haa2c": ("sequential", "a2c"), "mappo": ("simultaneous", "ppo")}
"""File-name prefix -> (updater kind, objective kind) of the on-policy algorithms."""
HARL_TASKS = ["mpe_spread", "mpe_spread_discrete", "mpe_reference", "mpe_speaker_listener",
              "mamujoco_halfcheetah_2x3", "mamujoco_walker2d_2x3", "mamujoco_ant_4x2",
              "mamujoco_hopper_3x1", "mamujoco_humanoid_17x1"]
"""The tasks for which every on-policy algorithm ships a pipeline with HARL's tuned numbers."""


def test_every_on_policy_algorithm_ships_every_harl_task() -> None:
    """HAPPO, HATRPO, HAA2C and MAPPO each have a pipeline for every task of issue 4's list."""
    names = {p.stem for p in PIPELINES}
    missing = [f"{algo}_{task}" for algo in ON_POLICY_ALGORITHMS for task in HARL_TASKS
               if f"{algo}_{task}" not in names]
    assert not missing


@pytest.mark.parametrize("path", [p for p in PIPELINES if p.stem.split("_")[0] in ON_POLICY_ALGORITHMS],
                         ids=lambda p: p.stem)
def test_on_policy_pipeline_is_the_algorithm_its_name_says(path: Path) -> None:
    """The file name's algorithm matches the stages; a HARL task's header says where its numbers come from."""
    data = read_toml(path)
    updater, objective = ON_POLICY_ALGORITHMS[path.stem.split("_")[0]]
    assert data["updater"]["kind"] == updater
    assert data["updater"]["objective"]["kind"] == objective
    if updater == "sequential":
        assert data["policy"].get("share_parameters", False) is False
    if path.stem.split("_", 1)[1].startswith(("mpe_", "mamujoco_")):
        assert "Hyper-parameters:" in path.read_text()
        assert "HARL" in path.read_text()
