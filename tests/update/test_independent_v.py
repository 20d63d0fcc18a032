"""The independent V critic (IPPO, IA2C): each agent's value reads only its own observation,
its targets and advantages come from its own value and reward (numbers by hand)."""

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

from harl.buffers.records import StartRecord, StepRecord
from harl.buffers.rollout import RolloutBuffer
from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.errors import ConfigError
from harl.returns.gae import GAE, GAEConfig
from harl.update.independent_v import IndependentVConfig, IndependentVCritic, stack_observations
from tests.collect.test_on_policy import counting_pipeline
from tests.fakes import counting

ROOT = Path(__file__).resolve().parents[2]


def independent(**critic: Any) -> dict[str, Any]:
    data = counting_pipeline()
    data["critic"] = {"kind": "independent_v", "hidden_sizes": [8], **critic}
    data["updater"] = {"kind": "simultaneous"}
    return data


def test_reads_pads_each_agents_observation_to_the_widest() -> None:
    """Agents of widths 2 and 3: (E, 2, 3), agent 0's row zero-padded."""
    obs = [torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, 4.0, 5.0]])]
    x = stack_observations(obs, [(2,), (3,)], 3)
    torch.testing.assert_close(x, torch.tensor([[[1.0, 2.0, 0.0], [3.0, 4.0, 5.0]]]))


@pytest.mark.parametrize("share", [True, False])
def test_an_agents_value_reads_only_its_own_observation(share: bool) -> None:
    """Changing agent 1's observation changes V_1 and leaves V_0 and V_2 as they were."""
    torch.manual_seed(0)
    critic = IndependentVCritic([(3,), (5,), (4,)], IndependentVConfig(share_parameters=share, hidden_sizes=(8,),
                                                                         value_norm=False))
    obs = [torch.randn(6, 3), torch.randn(6, 5), torch.randn(6, 4)]
    before = critic.value(critic.reads(obs))
    obs[1] = torch.randn(6, 5)
    after = critic.value(critic.reads(obs))
    assert before.shape == (6, 3)
    torch.testing.assert_close(after[:, [0, 2]], before[:, [0, 2]])
    assert not torch.allclose(after[:, 1], before[:, 1])
    if not share:  # one network per agent, on exactly its own columns
        assert [base.body[0].normalized_shape[0] for base in critic.bases] == [3, 5, 4]


def test_a_shared_network_tells_agents_apart_by_their_id() -> None:
    """The same observation for every agent: the one-hot id still gives each its own value."""
    torch.manual_seed(0)
    critic = IndependentVCritic([(3,), (3,)], IndependentVConfig(hidden_sizes=(8,), value_norm=False))
    same = torch.ones(4, 3)
    v = critic.value(critic.reads([same, same]))
    assert not torch.allclose(v[:, 0], v[:, 1])
    no_ids = IndependentVCritic([(3,), (3,)], IndependentVConfig(hidden_sizes=(8,), value_norm=False, agent_id=False))
    v = no_ids.value(no_ids.reads([same, same]))
    torch.testing.assert_close(v[:, 0], v[:, 1])


def rollout(values: list[list[float]], rewards: list[list[float]]) -> RolloutBuffer:
    """T = 2 steps of one env and two agents with the given per-agent values (T + 1 rows) and rewards."""
    obs_spaces = [spaces.Box(-1, 1, (2,)), spaces.Box(-1, 1, (3,))]
    act = [spaces.Box(-1, 1, (1,)), spaces.Box(-1, 1, (1,))]
    critic = IndependentVCritic([(2,), (3,)], IndependentVConfig(hidden_sizes=(4,), value_norm=False))
    buf = RolloutBuffer(obs_spaces, act, 1, 1, 2, fp_state=True, critic_reads=critic.reads)
    buf.start(StartRecord([np.full((1, 2), 0.0), np.full((1, 3), 10.0)], np.zeros((1, 1)), None))
    for t in range(2):
        buf.insert(StepRecord(
            actions=[torch.zeros(1, 1)] * 2, log_probs=[torch.zeros(1, 1)] * 2, values=torch.tensor([values[t]]),
            obs=[np.full((1, 2), t + 1.0), np.full((1, 3), t + 11.0)], avail=None, state=np.zeros((1, 1)),
            rewards=np.array([rewards[t]]), terminated=torch.tensor([False]), truncated=torch.tensor([False]),
            active=torch.ones(1, 2), starts=torch.zeros(1)))
    buf.finish(torch.tensor([values[2]]))
    return buf


def test_each_agents_advantage_and_value_target_come_from_its_own_value_and_reward() -> None:
    """gamma 0.5, lambda 1, by hand.

    Agent 0: r = (1, 2), V = (0.5, 0.25; 1.0 bootstrap): delta_1 = 2 + 0.5 * 1 - 0.25 = 2.25,
    delta_0 = 1 + 0.5 * 0.25 - 0.5 = 0.625, A_0 = 0.625 + 0.5 * 2.25 = 1.75; targets A + V = (2.25, 2.5).
    Agent 1: r = (10, 20), V = (5, 6; 7): delta_1 = 20 + 3.5 - 6 = 17.5, delta_0 = 10 + 3 - 5 = 8,
    A_0 = 8 + 8.75 = 16.75; targets (21.75, 23.5).
    """
    buf = rollout([[0.5, 5.0], [0.25, 6.0], [1.0, 7.0]], [[1.0, 10.0], [2.0, 20.0]])
    GAE(GAEConfig(gamma=0.5, lam=1.0)).compute(buf)
    torch.testing.assert_close(buf.advantages[:, 0], torch.tensor([[1.75, 16.75], [2.25, 17.5]]))
    torch.testing.assert_close(buf.returns[:, 0], torch.tensor([[2.25, 21.75], [2.5, 23.5]]))
    # Agent 1's values and rewards are not agent 0's business.
    other = rollout([[0.5, -50.0], [0.25, 60.0], [1.0, 0.0]], [[1.0, -3.0], [2.0, 9.0]])
    GAE(GAEConfig(gamma=0.5, lam=1.0)).compute(other)
    torch.testing.assert_close(other.advantages[..., 0], buf.advantages[..., 0])
    # The critic is fitted on each agent's own observation rows toward its own targets.
    states, old, returns, hidden, starts = buf.critic_batch()
    assert states.shape == (2, 2, 3) and hidden is None and starts is None
    torch.testing.assert_close(states[:, 0], torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]))
    torch.testing.assert_close(states[:, 1], torch.tensor([[10.0] * 3, [11.0] * 3]))
    torch.testing.assert_close(returns, torch.tensor([[2.25, 21.75], [2.5, 23.5]]))
    torch.testing.assert_close(old, torch.tensor([[0.5, 5.0], [0.25, 6.0]]))


def test_collected_values_are_each_agents_own_and_episode_ends_bootstrap_from_its_final_observation() -> None:
    """The counting env (observation widths 3, 5, 4; episodes truncated after 3 steps): V_i of the stored
    observations, and at a truncation V_i of the pre-reset observation (each entry one more than the last)."""
    with build_stages(structure_pipeline(independent(), "counting")) as stages:
        stages.collector.collect(stages.buffer)
        buf, critic = stages.buffer, stages.critic
        assert buf.values.shape == (6, 2, 3) and buf.rewards.shape == (5, 2, 3)
        for t in range(6):
            torch.testing.assert_close(buf.values[t], critic.value(critic.reads([o[t] for o in buf.obs])))
        t = int(torch.nonzero(buf.truncated[:, 0])[0])
        final = [o[t] + 1.0 for o in buf.obs]  # counting: the observation is base + step + i / 10
        torch.testing.assert_close(buf.final_values[t], critic.value(critic.reads(final)))
        torch.testing.assert_close(buf.critic_rewards(), buf.rewards)  # each agent's own reward


def test_a_recurrent_independent_critic_keeps_a_state_per_agent() -> None:
    """With GRU actors the critic gets a GRU too (one state per agent) and a whole iteration runs."""
    for share in (True, False):
        data = independent(share_parameters=share)
        data["policy"] = {"hidden_sizes": [8], "recurrent": "chunked", "chunk_length": 5}
        with build_stages(structure_pipeline(data, "counting")) as stages:
            stages.collector.collect(stages.buffer)
            assert stages.buffer.critic_hidden is not None and stages.buffer.critic_hidden.shape == (6, 2, 3, 8)
            stages.returns.compute(stages.buffer)
            stats = stages.updater.update(stages.buffer, 0.0)
            assert np.isfinite(stats.critic.value_loss)


@pytest.mark.parametrize("state_type", ["FP", "EP"])
def test_an_independent_critic_asked_for_a_global_state_is_refused(state_type: str) -> None:
    assert counting.CountingConfig
    with pytest.raises(ConfigError) as info:
        structure_pipeline(independent(state_type=state_type), "x.toml")
    assert str(info.value) == (
        f'x.toml: critic.state_type: "{state_type}" asks critic.kind = "independent_v" for the global state, but an '
        "independent critic reads each agent's own observation (that is what makes it independent); remove "
        f'state_type (or set it to "local"), or keep the {state_type} state with critic.kind = "v" (the '
        "centralised critic)")


def test_image_observations_are_refused_with_the_critic_that_reads_them() -> None:
    from harl.update.independent_v import obs_shapes

    with pytest.raises(ConfigError, match=r'agent 1 observes an image \(8, 8, 3\); use critic.kind = "v"'):
        obs_shapes([spaces.Box(0, 1, (4,)), spaces.Box(0, 255, (8, 8, 3), np.uint8)], "independent_v", "p.toml")


def test_the_cli_refuses_fp_state_with_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    pipeline = tmp_path / "p.toml"
    pipeline.write_text((ROOT / "pipelines" / "ippo_mpe_spread.toml").read_text()
                        .replace("share_parameters = true    #", 'state_type = "FP"\nshare_parameters = true    #'))
    out = subprocess.run([sys.executable, "-m", "harl", "train", str(pipeline), "--set", f"logging.dir={tmp_path / 'runs'}"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2, out.stderr
    assert 'critic.state_type: "FP" asks critic.kind = "independent_v" for the global state' in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "runs").exists()


def test_harl_stages_lists_every_key_with_its_doc() -> None:
    out = subprocess.run([sys.executable, "-m", "harl", "stages", "independent_v"], capture_output=True, text=True,
                         cwd=ROOT, check=True, env={**os.environ, "COLUMNS": "400"}).stdout
    for field in attrs.fields(IndependentVConfig):
        if field.name != "kind":
            assert field.name in out
    assert "one V network for all agents" in out and "each agent's own observation" in out


def test_ippo_resumes_exactly(tmp_path: Path) -> None:
    """IPPO (independent critic, one shared actor): resuming from iteration 3 repeats rows 4 and 5."""
    pytest.importorskip("mpe2", reason="this run uses MPE (pip install harl[mpe])")
    from tests.test_determinism import resume_from_3, rows, same_final_state, train

    whole = train(ROOT / "pipelines" / "ippo_mpe_spread.toml", tmp_path / "whole", "--set", "collector.backend=inline")
    resume_from_3(whole, tmp_path / "resumed")
    assert rows(tmp_path / "resumed") == rows(whole)
    assert same_final_state(tmp_path / "resumed", whole)
