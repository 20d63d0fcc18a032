"""Rollout buffer layouts (EP and FP), next values and advantage normalisation."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from harl.buffers.rollout import RolloutBuffer

OBS = [spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (5,), np.float32)]
ACT = [spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(4)]


def make(fp: bool) -> RolloutBuffer:
    return RolloutBuffer(OBS, ACT, state_dim=6, n_envs=2, length=4, fp_state=fp)


def test_ep_and_fp_value_shapes() -> None:
    """EP keeps one value per env, FP one per agent; rewards are always per agent."""
    ep, fp = make(False), make(True)
    assert ep.values.shape == (5, 2) and fp.values.shape == (5, 2, 2)
    assert ep.rewards.shape == fp.rewards.shape == (4, 2, 2)
    assert ep.avail[0] is None and ep.avail[1].shape == (5, 2, 4)
    assert ep.critic_batch()[0].shape == (8, 6)
    assert fp.critic_batch()[1].shape == (8, 2)


def test_team_reward_is_the_agents_mean_for_ep() -> None:
    """EP critics learn the team reward, the mean over agents (each MPE agent gets the team sum)."""
    buf = make(False)
    buf.rewards[..., 0] = 1.0
    buf.rewards[..., 1] = 3.0
    assert torch.all(buf.critic_rewards() == 2.0)
    assert torch.equal(make(True).critic_rewards(), make(True).rewards)


def test_next_values_use_the_final_value_where_an_episode_ended() -> None:
    """Where a step ended an episode, the next value is V(final state), elsewhere V(s_{t+1})."""
    buf = make(False)
    buf.values[:] = torch.arange(5.0).unsqueeze(1)
    buf.final_values[:] = -7.0
    buf.truncated[1, 0] = True
    buf.terminated[2, 1] = True
    nv = buf.next_values
    assert nv[:, 0].tolist() == [1.0, -7.0, 3.0, 4.0]
    assert nv[:, 1].tolist() == [1.0, 2.0, -7.0, 4.0]


def test_advantages_normalised_over_active_samples_only() -> None:
    """Inactive samples neither shift the mean nor the std of an agent's advantages."""
    buf = make(False)
    buf.advantages[:] = torch.tensor([[1.0, 2.0], [3.0, 4.0], [100.0, 100.0], [5.0, 6.0]])
    buf.active[2, :, 1] = 0.0  # agent 1 dead at step 2
    adv1 = buf.normalized_advantages(1)
    active = adv1[buf.active[:-1, :, 1] > 0]
    assert abs(active.mean().item()) < 1e-6
    assert abs(active.std().item() - 1) < 1e-3
    batch = buf.agent_batch(1)
    assert batch.active.sum().item() == 6 and batch.advantages.shape == (8, 1)


def test_roll_over_carries_the_last_slot() -> None:
    """After roll_over slot 0 holds what slot T held."""
    buf = make(False)
    buf.obs[0][-1] = 5.0
    buf.state[-1] = 2.0
    buf.roll_over()
    assert torch.all(buf.obs[0][0] == 5.0) and torch.all(buf.state[0] == 2.0)
