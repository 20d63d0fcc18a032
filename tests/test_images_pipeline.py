"""Image observations end to end: CNN actors and critics learn, uint8 storage, every family, resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from harl.cli import main
from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.errors import ConfigError
from harl.nets.cnn import CNNBase, PlainCNN
from harl.nets.q import EncodedStack
from harl.run.lifecycle import resume_run, start_run
from harl.sizes import rollout_bytes_per_step
from tests.fakes import images

ON = {"env": {"kind": "images"}, "collector": {"n_envs": 2, "rollout_length": 8, "backend": "inline"},
      "policy": {"hidden_sizes": [16, 16]}, "critic": {"hidden_sizes": [16, 16]},
      "evaluator": {"episodes": 2, "n_envs": 2}}
OFF = {**ON, "collector": {"kind": "off_policy", "n_envs": 2, "warmup_steps": 8, "rollout_length": 4,
                           "backend": "inline"},
       "buffer": {"kind": "replay", "capacity": 64, "batch_size": 8}, "returns": {"kind": "n_step"}}


def build(data: dict[str, Any]) -> Any:
    assert images.ImagesConfig  # registers the "images" env kind
    return build_stages(structure_pipeline(data, "x.toml"), "x.toml")


def iterate(stages: Any, iterations: int) -> None:
    for it in range(iterations):
        stages.collector.collect(stages.buffer)
        stages.returns.compute(stages.buffer)
        stages.updater.update(stages.buffer, it / iterations)


def test_happo_learns_to_read_the_pictures() -> None:
    """HAPPO with CNN actor and critic: eval return from about 2 (random) to at least 3.5 of 4 in 10 iterations."""
    data = {**ON, "run": {"seed": 1}, "collector": {"n_envs": 8, "rollout_length": 16, "backend": "inline"},
            "updater": {"objective": {"kind": "ppo", "lr": 0.003}}, "evaluator": {"episodes": 16, "n_envs": 8}}
    stages = build(data)
    try:
        before = stages.evaluator.evaluate().mean_return
        iterate(stages, 10)
        after = stages.evaluator.evaluate().mean_return
    finally:
        stages.close()
    assert before < 3.0 <= 3.5 <= after


def test_images_stay_uint8_in_the_rollout_and_the_networks_are_harls_cnn() -> None:
    """Observations and the image state are stored uint8 in their own shape; actor and critic are CNNBase."""
    stages = build(ON)
    try:
        iterate(stages, 1)
        buffer = stages.buffer
        assert buffer.obs[0].dtype == torch.uint8 and buffer.obs[0].shape == (9, 2, 6, 6, 3)
        assert buffer.state.dtype == torch.uint8 and int(buffer.obs[1].max()) == 255
        assert isinstance(stages.policy.actors[0].base, CNNBase) and isinstance(stages.critic.base, CNNBase)
    finally:
        stages.close()


def test_rollout_bytes_per_step_count_uint8_images_as_one_byte() -> None:
    """2 agents' 6x6x3 uint8 images and the 6x6x3 state: 3 * 108 = 324 bytes, where float32 would take 1,296.

    Plus per step 17 float32 values (per agent: avail 2 + action 1 + log-prob 1; 2 x 2 active/reward;
    4 value slots; 1 start) = 68 bytes and 2 bytes of flags: 394 bytes.
    """
    env = images.ImagesEnv()
    per_step = rollout_bytes_per_step(env.observation_spaces, env.action_spaces, 108, False, 0, 0, env.state_space)
    assert per_step == 324 + 68 + 2


@pytest.mark.parametrize("variant", [
    {"policy": {"hidden_sizes": [16, 16], "recurrent": "chunked", "chunk_length": 4}},
    {"critic": {"hidden_sizes": [16, 16], "state_type": "FP"}},
    {"updater": {"kind": "simultaneous"}},
    {"env": {"kind": "images", "channels": "first", "state": "vector"}},
], ids=["gru", "fp", "mappo", "chw-vector-state"])
def test_on_policy_variants_run(variant: dict[str, Any]) -> None:
    """Recurrent actors and critic, FP image state, MAPPO, CHW observations with a vector state: two iterations."""
    stages = build({**ON, **variant})
    try:
        iterate(stages, 2)
        assert 0.0 <= stages.evaluator.evaluate().mean_return <= 4.0
    finally:
        stages.close()


@pytest.mark.parametrize(("objective", "critic", "env"), [
    ("sac", {"kind": "q", "twin": True}, {}),
    ("td3", {"kind": "q", "twin": True}, {"actions": "box"}),
    ("ddpg", {"kind": "q", "state_type": "FP"}, {"actions": "box"}),
    ("d3qn", {"kind": "joint_q"}, {}),
])
def test_off_policy_family_encodes_images_then_joins_the_actions(objective: str, critic: dict[str, Any],
                                                                 env: dict[str, Any]) -> None:
    """HARL's PlainCNN reads each actor's image and, per Q network, the state before the actions join it."""
    data = {**OFF, "env": {"kind": "images", **env}, "critic": {**critic, "hidden_sizes": [16, 16]},
            "updater": {"kind": "sequential", "objective": {"kind": objective}}}
    stages = build(data)
    try:
        iterate(stages, 4)
        assert stages.buffer.obs[0].dtype == torch.uint8 and stages.buffer.state.dtype == torch.uint8
        assert any(isinstance(m, PlainCNN) for m in stages.policy.actors[0].modules())
        if critic["kind"] == "q":
            assert isinstance(stages.critic.nets, EncodedStack)
            assert len(stages.critic.nets.encoders) == (2 if critic.get("twin") else 1)
        assert stages.updater.steps > 0
    finally:
        stages.close()


def test_mlp_encoder_on_a_small_image_is_allowed_and_flattens_it() -> None:
    """``encoder = "mlp"`` on a 108-value image: the MLP reads the flattened, scaled pixels."""
    data = {**ON, "policy": {"hidden_sizes": [16], "encoder": "mlp"}, "critic": {"hidden_sizes": [16], "encoder": "mlp"}}
    stages = build(data)
    try:
        iterate(stages, 1)
        assert not any(isinstance(m, CNNBase) for m in stages.policy.modules())
    finally:
        stages.close()


def test_cnn_encoder_on_a_vector_state_is_refused_with_the_key() -> None:
    with pytest.raises(ConfigError, match=r'x.toml: critic.encoder: "cnn" reads 3-D Box images, but the input is \(2,\)'):
        build({**ON, "env": {"kind": "images", "state": "vector"}, "critic": {"encoder": "cnn"}})


def test_resume_restores_the_cnn_networks_and_render_plays_them(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A checkpointed image run resumes with the same CNN weights and trains on; harl render films it."""
    assert images.ImagesConfig
    path = tmp_path / "p.toml"
    path.write_text("\n".join([
        '[run]\ntotal_env_steps = 32', '[env]\nkind = "images"',
        '[collector]\nn_envs = 2\nrollout_length = 8\nbackend = "inline"', '[policy]\nhidden_sizes = [8]',
        '[critic]\nhidden_sizes = [8]', '[evaluator]\nepisodes = 1\nn_envs = 1', '[logging]\nprogress = false']))
    trainer, _ = start_run(path, [], run_dir=tmp_path / "run")
    try:
        trainer.train()
        weights = [p.clone() for p in (*trainer.stages.policy.parameters(), *trainer.stages.critic.parameters())]
    finally:
        trainer.stages.close()
    resumed = resume_run(tmp_path / "run", overrides=["run.total_env_steps=48"])  # one iteration more
    try:
        got = [*resumed.stages.policy.parameters(), *resumed.stages.critic.parameters()]
        assert all(torch.equal(a, b) for a, b in zip(weights, got, strict=True))
        resumed.train()
    finally:
        resumed.stages.close()
    pytest.importorskip("imageio", reason="harl render needs imageio (pip install harl[video])")
    out = tmp_path / "video.gif"
    assert main(["render", str(tmp_path / "run"), "--episodes", "1", "--out", str(out)]) == 0
    assert out.stat().st_size > 0 and "return" in capsys.readouterr().out
