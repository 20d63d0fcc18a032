"""Every shipped MPE pipeline switches to the torch backend with one line (env.kind = "mpe_torch")."""

from __future__ import annotations

from pathlib import Path

import pytest

from harl.compose import build_stages
from harl.config.loading import load_spec_and_notes, read_toml
from harl.envs.mpe import MPEConfig, make_mpe_env
from harl.envs.mpe_keys import SCENARIOS as TORCH_SCENARIOS
from harl.envs.mpe_torch.vector import MPETorchVectorEnv
from tests.train_briefly import train_briefly

pytest.importorskip("mpe2")

ROOT = Path(__file__).parent.parent.parent
MPE_PIPELINES = [p for p in sorted(ROOT.glob("pipelines/*.toml"))
                 if read_toml(p).get("env", {}).get("kind") == "mpe"
                 and read_toml(p)["env"].get("scenario", "simple_spread") in TORCH_SCENARIOS]
"""The shipped MPE pipelines of a scenario the torch MPE plays (not the competitive ones, mpe2's only)."""


def test_there_are_mpe_pipelines() -> None:
    """The parametrised test below covers the 20-odd shipped MPE pipelines."""
    assert len(MPE_PIPELINES) >= 20


@pytest.mark.parametrize("path", MPE_PIPELINES, ids=[p.stem for p in MPE_PIPELINES])
def test_switches_with_one_line(path: Path) -> None:
    """With env.kind = "mpe_torch" the pipeline builds on MPETorchVectorEnv with mpe2's spaces."""
    spec, _ = load_spec_and_notes(path, ["env.kind=mpe_torch", "collector.n_envs=2", "evaluator.n_envs=2"])
    stages = build_stages(spec, str(path))
    try:
        world = stages.venv.venv if spec.teams else stages.venv  # a [teams] pipeline's TeamWorld wraps the world
        assert isinstance(world, MPETorchVectorEnv)
        env = spec.env
        ref = make_mpe_env(MPEConfig(scenario=env.scenario, continuous_actions=env.continuous_actions,
                                     max_episode_steps=env.max_episode_steps, n_agents=env.n_agents))
        assert world.observation_spaces == ref.observation_spaces
        assert world.action_spaces == ref.action_spaces
    finally:
        stages.close()


@pytest.mark.parametrize("name", ["hasac_mpe_spread_discrete", "happo_mpe_speaker_listener_gru"])
def test_off_policy_and_recurrent_pipelines_train(name: str, tmp_path: Path) -> None:
    """Two iterations of an off-policy (Discrete actions) and a recurrent pipeline on the torch backend."""
    overrides = ["env.kind=mpe_torch", "logging.progress=false", "evaluator.episodes=2", "evaluator.n_envs=2"]
    if name.startswith("hasac"):
        overrides += ["collector.warmup_steps=1000", "collector.updates_per_round=2"]
    else:
        overrides += ["collector.rollout_length=30"]
    result, rows = train_briefly(ROOT / "pipelines" / f"{name}.toml", overrides, tmp_path / "run")
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    assert rows[-1]["train_return"] and rows[-1]["eval_return"]


def test_same_seed_and_exact_resume(tmp_path: Path) -> None:
    """Same seed, same metrics.csv and final state; resuming from iteration 3 repeats rows 4 and 5
    (episodes end on rollout boundaries, as in tests/test_determinism.py)."""
    from tests.test_determinism import HAPPO, resume_from_3, rows, same_final_state, train

    extra = ("--set", "env.kind=mpe_torch")
    whole = train(HAPPO, tmp_path / "whole", *extra)
    again = train(HAPPO, tmp_path / "again", *extra)
    assert rows(whole) == rows(again) and len(rows(whole)) == 5
    assert same_final_state(whole, again)
    resume_from_3(whole, tmp_path / "resumed")
    assert rows(tmp_path / "resumed") == rows(whole)
    assert same_final_state(tmp_path / "resumed", whole)
