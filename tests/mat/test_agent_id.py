"""MAT's agent ids: MAT's envs append each agent's one-hot id to its observation (``agent_id_feats``:
mat/envs/mpe/environment.py, mat/envs/starcraft2/StarCraft2_Env.py, ma_mujoco/mujoco_multi.py), so
MAT's transformer reads ``np.concatenate([obs_i, one_hot(i)])``; harl appends it where
``[updater.objective] agent_id`` (on by default), in the env's agent order whatever order decodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.config.older_runs import older_defaults
from harl.policy.mat_policy import TransformerPolicy
from harl.update.objectives.mat import MATConfig, MATDecConfig
from tests.mat.test_formulas import N_ACT, OBS, A, obs_list

E = 4


def policy(agent_id: bool, order: str = "fixed", decentralised: bool = False) -> TransformerPolicy:
    torch.manual_seed(0)
    net = TransformerPolicy([spaces.Box(-1, 1, (OBS,))] * A, [spaces.Discrete(N_ACT)] * A, 1, 16, 2,
                            decentralised=decentralised, share_actor=decentralised, order=order,
                            generator=torch.Generator().manual_seed(3), agent_id=agent_id)
    if order == "random":
        net.set_order(torch.tensor([2, 0, 3, 1]))
    return net


def encoder_input(net: TransformerPolicy, obs: list[torch.Tensor]) -> np.ndarray:
    """What the encoder's embedding reads in one collection step, ``(E, A, width)`` in decoding order."""
    seen: list[torch.Tensor] = []
    handle = net.obs_embed.register_forward_hook(lambda _m, args, _out: seen.append(args[0].detach().clone()))
    net.sample(obs, None)
    handle.remove()
    return seen[0].numpy()


def by_hand(obs: list[torch.Tensor]) -> np.ndarray:
    """MAT's env: ``obs_i = np.concatenate([self._get_obs(agent), agent_id_feats])`` for each agent ``i``."""
    rows = []
    for i, o in enumerate(obs):
        agent_id_feats = np.zeros(A, dtype=np.float32)
        agent_id_feats[i] = 1.0
        rows.append(np.concatenate([o.numpy(), np.broadcast_to(agent_id_feats, (o.shape[0], A))], -1))
    return np.stack(rows, 1)


def test_the_encoder_reads_each_observation_then_its_agents_one_hot_id() -> None:
    obs = obs_list(E)
    np.testing.assert_array_equal(encoder_input(policy(True), obs), by_hand(obs))
    assert policy(True).in_dim == OBS + A and policy(False).in_dim == OBS


def test_without_ids_the_encoder_reads_the_observation_alone() -> None:
    obs = obs_list(E)
    np.testing.assert_array_equal(encoder_input(policy(False), obs), torch.stack(obs, 1).numpy())


def test_an_agent_keeps_its_own_id_in_any_decoding_order() -> None:
    """Decoding agent 2 first moves its row first, its id with it: the id names the agent, not the position."""
    obs = obs_list(E)
    np.testing.assert_array_equal(encoder_input(policy(True, order="random"), obs), by_hand(obs)[:, [2, 0, 3, 1]])


def test_mat_dec_own_actors_read_the_ids_too() -> None:
    net = policy(True, decentralised=True)
    seen: list[torch.Tensor] = []
    handle = net.own_actors[0].register_forward_hook(lambda _m, args, _out: seen.append(args[0].detach().clone()))
    obs = obs_list(E)
    net.act(obs, None)
    handle.remove()
    np.testing.assert_array_equal(seen[0].numpy(), by_hand(obs))


def test_ids_are_on_by_default_for_mat_and_mat_dec() -> None:
    assert MATConfig().agent_id and MATDecConfig().agent_id


@pytest.mark.parametrize("kind", ["mat", "mat_dec"])
def test_a_resolved_pipeline_of_an_older_harl_means_no_ids(kind: str) -> None:
    """A run's pipeline.toml holds every key; one without ``agent_id`` was written before it existed and
    trained without ids, so resuming it builds that network."""
    older = {"updater": {"kind": "joint", "objective": {"kind": kind, "n_block": 1}}}
    assert older_defaults(older)["updater"]["objective"]["agent_id"] is False
    newer = {"updater": {"objective": {"kind": kind, "agent_id": True}}}
    assert older_defaults(newer)["updater"]["objective"]["agent_id"] is True
    other = {"updater": {"objective": {"kind": "ppo"}}}
    assert "agent_id" not in older_defaults(other)["updater"]["objective"]


def test_an_older_mat_run_resumes_as_it_trained(tmp_path: Path) -> None:
    """The run directory of a MAT run made before ids (its pipeline.toml without the key) opens with
    ``agent_id = false``: its saved weights, of the observation's width, load."""
    pytest.importorskip("mpe2", reason="the run uses MPE (pip install harl[mpe])")
    from harl.cli import main
    from harl.run.open import spec_of_run

    run = tmp_path / "run"
    main(["train", str(Path(__file__).parents[2] / "pipelines" / "mat_mpe_spread.toml"), "--run-dir", str(run),
          "--set", "updater.objective.agent_id=false", "--set", "run.total_env_steps=800",
          "--set", "collector.n_envs=8", "--set", "evaluator.every_iterations=100", "--quiet"])
    text = (run / "pipeline.toml").read_text(encoding="utf-8")
    (run / "pipeline.toml").write_text(text.replace("agent_id = false\n", ""), encoding="utf-8")
    assert spec_of_run(run)[0].updater.objective.agent_id is False
    main(["train", "--resume", str(run), "--set", "run.total_env_steps=1600", "--quiet"])
