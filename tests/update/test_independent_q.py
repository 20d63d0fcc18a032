"""The independent Q critic (ISAC, IDDPG, independent TD3): agent i's Q reads only its own
observation and action, its TD target only its own reward, next observation and action (by hand)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.buffers.replay import ReplayBatch
from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.errors import ConfigError
from harl.policy.off_policy import DeterministicActor, OffPolicyActors
from harl.returns.n_step import NStepConfig, NStepReturns
from harl.update.independent_q import IndependentQConfig, IndependentQCritic, IndependentQLearner
from harl.update.objectives.ddpg import DDPGConfig, DeterministicLearner
from harl.update.off_policy import OffPolicyUpdater
from harl.update.q_critic import agent_value
from harl.update.simultaneous import SimultaneousConfig
from tests.fakes import counting
from tests.update.test_off_policy import StubAgent, small_buffer

ROOT = Path(__file__).resolve().parents[2]
OBS = [spaces.Box(-1, 1, (2,), np.float32), spaces.Box(-1, 1, (3,), np.float32)]
ACTS = [spaces.Box(-1, 1, (1,), np.float32), spaces.Discrete(3)]


def batch(n: int = 4, seed: int = 0) -> ReplayBatch:
    g = torch.Generator().manual_seed(seed)
    return ReplayBatch(state=torch.randn(n, 7, generator=g), obs=[torch.randn(n, 2, generator=g), torch.randn(n, 3, generator=g)],
                       actions=[torch.rand(n, 1, generator=g), torch.randint(0, 3, (n, 1), generator=g).float()],
                       avail=[None, None], active=torch.ones(n, 2), returns=torch.zeros(n, 2), discount=torch.zeros(n),
                       steps=torch.ones(n, dtype=torch.long), next_state=torch.randn(n, 7, generator=g),
                       next_obs=[torch.randn(n, 2, generator=g), torch.randn(n, 3, generator=g)], next_avail=[None, None])


def test_a_shared_networks_input_is_the_agents_own_observation_action_and_id() -> None:
    """Widths 2 and 3 (observations), 1 and 3 (Box, Discrete one-hot): each padded to 3, then the id."""
    critic = IndependentQCritic(OBS, ACTS, IndependentQConfig(hidden_sizes=(8,)))
    x0 = critic.inputs(0, torch.tensor([[1.0, 2.0]]), torch.tensor([[0.5]]))
    torch.testing.assert_close(x0, torch.tensor([[1.0, 2.0, 0.0, 0.5, 0.0, 0.0, 1.0, 0.0]]))
    x1 = critic.inputs(1, torch.tensor([[3.0, 4.0, 5.0]]), torch.tensor([[0.0, 0.0, 1.0]]))
    torch.testing.assert_close(x1, torch.tensor([[3.0, 4.0, 5.0, 0.0, 0.0, 1.0, 0.0, 1.0]]))


def test_separate_networks_read_exactly_their_own_columns() -> None:
    critic = IndependentQCritic(OBS, ACTS, IndependentQConfig(hidden_sizes=(8,), share_parameters=False))
    x1 = critic.inputs(1, torch.tensor([[3.0, 4.0, 5.0]]), torch.tensor([[0.0, 1.0, 0.0]]))
    torch.testing.assert_close(x1, torch.tensor([[3.0, 4.0, 5.0, 0.0, 1.0, 0.0]]))
    assert [net.weights[0].shape[-1] for net in critic.nets] == [3, 6]


@pytest.mark.parametrize("share", [True, False])
def test_an_agents_q_ignores_the_other_agents_observation_and_action(share: bool) -> None:
    torch.manual_seed(0)
    critic = IndependentQCritic(OBS, ACTS, IndependentQConfig(hidden_sizes=(8,), twin=True, share_parameters=share))
    b = batch()
    q = critic.raw(b.obs, critic.encode(b.actions))
    assert q.shape == (2, 4, 2)
    other = batch(seed=1)
    moved = critic.raw([b.obs[0], other.obs[1]], critic.encode([b.actions[0], other.actions[1]]))
    torch.testing.assert_close(moved[..., 0], q[..., 0])
    assert not torch.allclose(moved[..., 1], q[..., 1])
    # The actor's value is agent i's own Q: the first network, or the twins' minimum.
    joint = critic.encode(b.actions)
    torch.testing.assert_close(agent_value(critic, b, joint, 1, "first"), q[0, :, 1])
    torch.testing.assert_close(agent_value(critic, b, joint, 1, "min"), q[:, :, 1].min(0).values)


def constant(critic: IndependentQCritic, online: list[tuple[float, float]], target: list[tuple[float, float]]) -> None:
    """Every network outputs its last-layer bias: zero weights, zero hidden biases."""
    with torch.no_grad():
        for nets, values in ((critic.nets, online), (critic.targets, target)):
            for net, (first, second) in zip(nets, values):
                for p in net.parameters():
                    p.zero_()
                net.biases[-1][:, 0, 0] = torch.tensor([first, second])


def test_each_agents_td_target_uses_its_own_reward_next_value_and_penalty() -> None:
    """Twin networks per agent, squared error, by hand.

    Targets (twins' minimum): agent 0's 3 (of 3, 4), agent 1's -1 (of -1, 5).  Returns R = [[1, 10], [2, 20]],
    discount (0.5, 0), penalty [[0.1, 0.2], [0.3, 0.4]]:
    y_0 = (1 + 0.5 (3 - 0.1), 2) = (2.45, 2);  y_1 = (10 + 0.5 (-1 - 0.2), 20) = (9.4, 20).
    Online outputs: agent 0's twins 0 and 1, agent 1's 0 and 0; agent 1 is dead in the second sample.
    Loss = sum over agents and twins of the mean over alive samples of (y - Q)^2 / 2:
    agent 0: (2.45^2 + 2^2) / 4 + (1.45^2 + 1^2) / 4 = 2.500625 + 0.775625; agent 1: 2 * 9.4^2 / 2 = 88.36.
    """
    critic = IndependentQCritic(OBS, ACTS, IndependentQConfig(hidden_sizes=(4,), twin=True, share_parameters=False))
    constant(critic, online=[(0.0, 1.0), (0.0, 0.0)], target=[(3.0, 4.0), (-1.0, 5.0)])
    b = attrs.evolve(batch(2), returns=torch.tensor([[1.0, 10.0], [2.0, 20.0]]), discount=torch.tensor([0.5, 0.0]),
                     active=torch.tensor([[1.0, 1.0], [1.0, 0.0]]))
    learner = IndependentQLearner(critic, critic.config)
    stats = learner.update(b, critic.encode(b.actions), critic.encode(b.actions), torch.tensor([[0.1, 0.2], [0.3, 0.4]]))
    assert stats["critic_loss"].item() == pytest.approx(2.500625 + 0.775625 + 88.36, rel=1e-6)
    assert stats["target_mean"].item() == pytest.approx((2.45 + 2.0 + 9.4 + 20.0) / 4, rel=1e-6)


class PenaltyAgent(StubAgent):
    """A stub whose soft penalty is (index + 1) everywhere."""

    def next_action(self, batch: ReplayBatch) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        return torch.zeros(batch.size, 1), torch.full((batch.size,), float(self.index + 1))


def test_the_updater_hands_an_independent_critic_each_agents_own_penalty() -> None:
    """A centralised critic gets the sum of the penalties (3); an independent one (B, A) = (1, 2) per row."""
    seen: list[torch.Tensor] = []

    class Recording(IndependentQLearner):
        def update(self, batch: Any, actions: Any, next_actions: Any, penalty: Any) -> dict[str, torch.Tensor]:
            seen.append(penalty)
            return super().update(batch, actions, next_actions, penalty)

    box = spaces.Box(-1, 1, (1,), np.float32)
    config = IndependentQConfig(hidden_sizes=(4,))
    critic = IndependentQCritic([spaces.Box(-1, 1, (2,), np.float32)] * 2, [box] * 2, config)
    updater = OffPolicyUpdater(SimultaneousConfig(), [PenaltyAgent(0), PenaltyAgent(1)], Recording(critic, config),
                               NStepReturns(NStepConfig()), 4, 2, 0, 1, torch.Generator().manual_seed(0))
    updater.update(small_buffer(3), 0.0)
    assert len(seen) == 2
    torch.testing.assert_close(seen[0], torch.tensor([[1.0, 2.0]] * 4))


def test_a_ddpg_actor_maximises_its_own_q_alone() -> None:
    """Agent 0's actor loss is -mean Q_0(o_0, mu_0(o_0)), whatever the other agent's action."""
    torch.manual_seed(0)
    boxes = [spaces.Box(-1, 1, (1,), np.float32)] * 2
    critic = IndependentQCritic(OBS, boxes, IndependentQConfig(hidden_sizes=(8,)))
    team = OffPolicyActors([DeterministicActor(2, boxes[0], (8,), "relu", False, 0.1),
                          DeterministicActor(3, boxes[1], (8,), "relu", False, 0.1)], with_targets=True)
    learner = DeterministicLearner(0, team, critic, DDPGConfig(lr=1e-3))
    b = attrs.evolve(batch(), actions=[torch.rand(4, 1), torch.rand(4, 1)])
    expected = -critic.agent_value(b.obs[0], team.actors[0](b.obs[0]), 0).mean()
    critic.nets.requires_grad_(False)
    stats = learner.update(b, [torch.zeros(4, 1), torch.full((4, 1), 0.9)])
    assert stats["actor_loss"].item() == pytest.approx(expected.item(), rel=1e-6)


def off_policy(**critic: Any) -> dict[str, Any]:
    assert counting.CountingConfig  # registers the "counting" env kind
    return {"run": {"seed": 1, "total_env_steps": 24}, "env": {"kind": "counting", "episode_length": 3},
            "collector": {"kind": "off_policy", "n_envs": 2, "rollout_length": 4, "warmup_steps": 8,
                          "updates_per_round": 2},
            "buffer": {"kind": "replay", "capacity": 100, "batch_size": 4}, "returns": {"kind": "n_step", "n_step": 2},
            "critic": {"kind": "independent_q", "hidden_sizes": [8], **critic},
            "updater": {"kind": "simultaneous", "objective": {"kind": "sac", "critic_alpha": "agents"}},
            "policy": {"hidden_sizes": [8]}, "evaluator": {"episodes": 2, "n_envs": 2}}


@pytest.mark.parametrize("share", [True, False])
def test_isac_trains_on_mixed_action_spaces(share: bool) -> None:
    """The counting env's Box, Discrete and MultiDiscrete agents, observation widths 3, 5, 4."""
    with build_stages(structure_pipeline(off_policy(twin=True, share_parameters=share), "counting")) as stages:
        for _ in range(3):
            stages.collector.collect(stages.buffer)
        stats = stages.updater.update(stages.buffer, 0.0)
        assert stats.updates == 2 and np.isfinite(stats.critic["critic_loss"])


def message(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        structure_pipeline(data, "x.toml")
    return str(info.value)


def test_incoherent_settings_are_refused_with_their_fix() -> None:
    assert message(off_policy(state_type="FP", twin=True)) == (
        'x.toml: critic.state_type: "FP" asks critic.kind = "independent_q" for the global state, but an '
        "independent critic reads each agent's own observation (that is what makes it independent); remove "
        'state_type (or set it to "local"), or keep the FP state with critic.kind = "q" (the centralised critic)')
    separate = off_policy(twin=True)
    separate["updater"]["objective"]["critic_alpha"] = "separate"
    assert message(separate) == (
        'x.toml: updater.objective.critic_alpha: "separate" learns one critic temperature for the sum of all '
        "agents' log-probabilities, but critic.kind = \"independent_q\" gives each agent its own soft target, "
        "which takes that agent's own temperature; set updater.objective.critic_alpha = \"agents\"")
    td3 = off_policy()
    td3["updater"]["objective"] = {"kind": "td3"}
    assert message(td3) == ('x.toml: critic.twin: td3 takes the minimum of twin critics in its targets; set '
                            'critic.twin = true (or updater.objective.kind = "ddpg")')


def test_harl_stages_lists_every_key_with_its_doc() -> None:
    out = subprocess.run([sys.executable, "-m", "harl", "stages", "independent_q"], capture_output=True, text=True,
                         cwd=ROOT, check=True, env={**os.environ, "COLUMNS": "400"}).stdout
    for field in attrs.fields(IndependentQConfig):
        if field.name != "kind":
            assert field.name in out
    assert "own observation and action" in out


def test_isac_resumes_exactly_with_the_replay_buffer(tmp_path: Path) -> None:
    """ISAC with ``[checkpoint] replay_buffer = true``: resuming from iteration 3 repeats rows 4 and 5."""
    pytest.importorskip("mpe2", reason="this run uses MPE (pip install harl[mpe])")
    from harl.cli import main
    from tests.test_determinism import off_policy_settings, resume_from_3, rows, same_final_state

    whole = tmp_path / "whole"
    settings = off_policy_settings(**{"checkpoint.replay_buffer": "true"})
    assert main(["train", str(ROOT / "pipelines" / "isac_mpe_spread.toml"), *settings, "--run-dir", str(whole)]) == 0
    resume_from_3(whole, tmp_path / "resumed")
    assert rows(tmp_path / "resumed") == rows(whole)
    assert rows(whole)[-1]["critic_loss"] not in ("", None)
    assert same_final_state(tmp_path / "resumed", whole)
