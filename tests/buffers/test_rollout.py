"""Rollout buffer layouts (EP and FP), next values and advantage normalisation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.buffers.rollout import RolloutBuffer, minibatch_rows

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


def recurrent(sequence_length: int) -> RolloutBuffer:
    """T = 6, E = 2, GRU width 1; obs = 10 t + e, hidden = 100 t + e; episodes start at the marked steps."""
    buf = RolloutBuffer(OBS, ACT, state_dim=6, n_envs=2, length=6, fp_state=False, hidden_size=1,
                        sequence_length=sequence_length)
    t = torch.arange(7.0).view(7, 1)
    e = torch.arange(2.0).view(1, 2)
    buf.obs[0][:] = (10 * t + e).unsqueeze(-1)  # every column of agent 0's obs
    buf.hidden[0][:] = (100 * t + e).unsqueeze(-1)
    buf.starts.zero_()
    buf.starts[0] = 1.0
    buf.starts[2, 0] = buf.starts[4, 1] = buf.starts[5, 1] = 1.0
    return buf


def test_chunked_sequences_follow_one_env_and_reset_at_every_episode_start() -> None:
    """Chunks of 3: each is 3 consecutive steps of one env, starts at its own first GRU state, and flags every episode start in it."""
    buf = recurrent(3)
    batch = buf.agent_batch(0)
    # sequence c * E + e covers steps 3c .. 3c + 2 of env e
    assert batch.obs[:, 0].view(4, 3).tolist() == [[0, 10, 20], [1, 11, 21], [30, 40, 50], [31, 41, 51]]
    assert batch.hidden.view(-1).tolist() == [0, 1, 300, 301]
    assert batch.starts.view(4, 3).tolist() == [[1, 0, 1], [1, 0, 0], [0, 0, 0], [0, 1, 1]]
    for row in range(12):  # no sequence runs into an episode start without the reset flag
        t, e = int(batch.obs[row, 0]) // 10, int(batch.obs[row, 0]) % 10
        assert batch.starts[row] == buf.starts[t, e]


def test_naive_sequences_are_whole_rollouts_per_env() -> None:
    """Naive recurrent training: one sequence per env, of all T steps, from the rollout's first state."""
    batch = recurrent(6).agent_batch(0)
    assert batch.sequence_length == 6
    assert batch.obs[:, 0].view(2, 6).tolist() == [[0, 10, 20, 30, 40, 50], [1, 11, 21, 31, 41, 51]]
    assert batch.hidden.view(-1).tolist() == [0, 1]


def test_recurrent_minibatches_hold_whole_sequences_in_time_order() -> None:
    """Two minibatches of the four chunks: each is two whole sequences, rows in time order."""
    batch = recurrent(3).agent_batch(0)
    rows = minibatch_rows(batch, 2, torch.Generator().manual_seed(0))
    assert sorted(torch.cat(rows).tolist()) == list(range(12))
    for idx in rows:
        part = batch.select(idx)
        assert part.hidden.shape == (2, 1)
        seqs = part.obs[:, 0].view(2, 3)
        assert torch.equal(seqs[:, 1:] - seqs[:, :-1], torch.full((2, 2), 10.0))
        assert part.hidden.view(-1).tolist() == [100 * (v // 10) + v % 10 for v in seqs[:, 0].tolist()]


def test_roll_over_carries_gru_states_and_episode_starts() -> None:
    """The next rollout begins with the last GRU state and knows whether its first step starts an episode."""
    buf = recurrent(3)
    buf.roll_over()
    assert buf.hidden[0][0].view(-1).tolist() == [600, 601]
    assert buf.starts[0].tolist() == buf.starts[-1].tolist()


class TestFPAdvantageNormalisation:
    """HARL's on-policy HA runner (FP): one mean and population std (np.nanstd) over all agents' active
    samples, then (A - mean) / (std + 1e-5)."""

    def buffer(self, mode: str) -> RolloutBuffer:
        buf = RolloutBuffer(OBS, ACT, state_dim=6, n_envs=1, length=2, fp_state=True, fp_advantage_norm=mode)
        buf.advantages[:, 0, 0] = torch.tensor([1.0, 3.0])
        buf.advantages[:, 0, 1] = torch.tensor([5.0, 7.0])
        return buf

    def test_joint_hand_example(self) -> None:
        """All active: mean 4, std sqrt((9 + 1 + 1 + 9) / 4) = sqrt(5) = 2.2360680;
        agent 0: (1 - 4) / 2.2360780 = -1.3416348, (3 - 4) / ... = -0.4472116."""
        adv = self.buffer("joint").normalized_advantages(0)[:, 0]
        torch.testing.assert_close(adv, torch.tensor([-1.3416348, -0.4472116]), atol=1e-6, rtol=0)

    def test_joint_skips_inactive_samples(self) -> None:
        """Agent 1 dead at step 1: [1, 3, 5] give mean 3, std sqrt(8 / 3) = 1.6329932;
        agent 1: (5 - 3) / 1.6330032 = 1.2247373, (7 - 3) / ... = 2.4494746."""
        buf = self.buffer("joint")
        buf.active[1, 0, 1] = 0.0
        torch.testing.assert_close(buf.normalized_advantages(1)[:, 0], torch.tensor([1.2247373, 2.4494746]),
                                   atol=1e-6, rtol=0)

    def test_per_agent_is_harls_ep_rule_per_agent(self) -> None:
        """per_agent (harl's earlier FP rule): agent 1's [5, 7] -> [-0.7071, 0.7071] (sample std sqrt 2)."""
        adv = self.buffer("per_agent").normalized_advantages(1)[:, 0]
        torch.testing.assert_close(adv, torch.tensor([-0.7071, 0.7071]), atol=1e-4, rtol=0)


def test_set_targets_is_the_returns_stages_way_in() -> None:
    """Advantages and value targets arrive through ``set_targets``, shapes checked against (T, E[, A])."""
    from gymnasium import spaces as gym_spaces

    box = gym_spaces.Box(-1, 1, (2,))
    buffer = RolloutBuffer([box, box], [box, box], state_dim=3, n_envs=4, length=5, fp_state=False)
    adv, ret = torch.ones(5, 4), torch.full((5, 4), 2.0)
    buffer.set_targets(adv, ret)
    assert buffer.advantages is adv and buffer.returns is ret
    with pytest.raises(ValueError, match=r"set_targets: returns has shape \(5, 4, 2\), expected \(5, 4\)"):
        buffer.set_targets(adv, torch.ones(5, 4, 2))
