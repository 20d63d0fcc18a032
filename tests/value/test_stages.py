"""The episode replay and the episode collector alone, on tiny fakes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.buffers.episodes import Episode, EpisodeBuffer, episode_bytes
from harl.collect.episodes import EpisodeCollector, EpisodeCollectorConfig, epsilon_at
from harl.envs.vector import make_vector_env
from harl.errors import ConfigError
from harl.policy.agent_q import AgentQNetworks
from tests.value.fake_envs import GuessConfig

OBS = [spaces.Box(0, 1, (4,), np.float32)] * 2
ACTS: list[spaces.Space] = [spaces.Discrete(3), spaces.Discrete(3)]


def _episode(length: int, value: float) -> Episode:
    return Episode(obs=[torch.full((length + 1, 4), value)] * 2, state=torch.full((length + 1, 4), value),
                   avail=[None, torch.tensor([[1.0, 1.0, 0.0]]).expand(length + 1, 3)],
                   actions=torch.ones(length, 2, dtype=torch.long), rewards=torch.full((length,), value),
                   terminated=torch.arange(length) == length - 1)


def test_episodes_are_padded_masked_and_overwritten_oldest_first() -> None:
    buffer = EpisodeBuffer(OBS, ACTS, 4, capacity=2, max_length=5)
    buffer.insert(_episode(5, 1.0))
    buffer.insert(_episode(2, 2.0))
    batch = buffer.gather(torch.tensor([1]))
    assert batch.actions.shape == (1, 2, 2) and batch.obs[0].shape == (1, 3, 4)   # cut to the longest
    buffer.insert(_episode(3, 3.0))                                                 # overwrites slot 0
    assert buffer.size == 2 and buffer.episodes_added == 3 and buffer.head == 1
    batch = buffer.gather(torch.tensor([0, 1]))
    assert batch.filled.tolist() == [[True, True, True], [True, True, False]]
    assert batch.rewards.tolist() == [[3.0, 3.0, 3.0], [2.0, 2.0, 0.0]]
    assert batch.obs[0][1, 3].tolist() == [0.0] * 4         # the longer episode's rows were cleared
    assert batch.avail[0] is not None and batch.avail[0].all()  # no mask given: all available
    assert batch.avail[1] is not None and batch.avail[1][0, 0].tolist() == [True, True, False]
    assert batch.terminated.tolist() == [[False, False, True], [False, True, False]]


def test_a_batch_holds_distinct_episodes_and_the_state_round_trips() -> None:
    buffer = EpisodeBuffer(OBS, ACTS, 4, capacity=10, max_length=5)
    for k in range(7):
        buffer.insert(_episode(1 + k % 5, float(k)))
    batch = buffer.sample(5, torch.Generator().manual_seed(0))
    firsts = batch.rewards[:, 0].tolist()
    assert len(set(firsts)) == 5
    with pytest.raises(RuntimeError, match="fewer than batch_size"):
        buffer.sample(8, torch.Generator())
    other = EpisodeBuffer(OBS, ACTS, 4, capacity=10, max_length=5)
    other.load_state_dict(buffer.state_dict())
    a, b = buffer.sample(5, torch.Generator().manual_seed(1)), other.sample(5, torch.Generator().manual_seed(1))
    assert torch.equal(a.rewards, b.rewards) and torch.equal(a.obs[1], b.obs[1]) and other.episodes_added == 7


def test_episode_bytes_count_the_padding() -> None:
    # (5 + 1) rows x (2 x 4 obs + 4 state) x 4 bytes + 6 rows x 6 mask bytes + 5 steps x (2 x 2 + 4 + 1) + 8
    assert episode_bytes(OBS, ACTS, 4, 5) == 6 * 48 + 6 * 6 + 5 * 9 + 8


def test_epsilon_falls_linearly_then_stays() -> None:
    assert [epsilon_at(t, 1.0, 0.05, 100) for t in (0, 50, 100, 1000)] == [1.0, 0.525, 0.05, 0.05]
    assert epsilon_at(0, 1.0, 0.05, 0) == 0.05


def _collector(n_envs: int = 2, rollout_length: int = 3, max_length: int = 4, **extra: object
               ) -> tuple[EpisodeCollector, EpisodeBuffer]:
    venv = make_vector_env(GuessConfig(max_steps=4), n_envs, "inline", seed=7)
    team = AgentQNetworks(venv.observation_spaces, venv.action_spaces, hidden_dim=8, recurrent=True, last_action=True)
    config = EpisodeCollectorConfig(n_envs=n_envs, rollout_length=rollout_length, **extra)  # type: ignore[arg-type]
    collector = EpisodeCollector(config, venv, team, torch.device("cpu"), seed=7, max_length=max_length)
    buffer = EpisodeBuffer(venv.observation_spaces, venv.action_spaces, 4, capacity=50, max_length=max_length)
    return collector, buffer


def test_unfinished_episodes_carry_over_and_go_in_whole() -> None:
    """3 vector steps per collect, 4-step episodes: the first collect stores none, the second two
    (whole, from their first step to the observation the last step reached)."""
    collector, buffer = _collector()
    stats = collector.collect(buffer)
    assert stats.env_steps == 6 and stats.episodes == [] and buffer.size == 0
    stats = collector.collect(buffer)
    assert len(stats.episodes) == 2 and buffer.size == 2
    batch = buffer.gather(torch.tensor([0, 1]))
    assert batch.filled.all() and batch.actions.shape == (2, 4, 2)
    steps = batch.obs[0][:, :, 3]          # the observation's step counter t / 4, rows 0..4
    assert torch.allclose(steps, torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0]).expand(2, 5))
    assert not batch.terminated.any()       # cut by the time limit: the last step bootstraps
    assert (batch.actions[:, :, 1] != 2).all()
    assert collector.env_steps == 12


def test_exploration_honours_the_masks() -> None:
    """With epsilon 1 every action is random among the available ones: agent 1 never takes action 2
    (the env raises if it does), agent 0 takes all three."""
    collector, buffer = _collector(n_envs=4, rollout_length=40, epsilon_anneal_steps=10**6)
    collector.collect(buffer)
    actions = buffer.gather(torch.arange(buffer.size)).actions
    assert set(actions[..., 0].flatten().tolist()) == {0, 1, 2}
    assert set(actions[..., 1].flatten().tolist()) == {0, 1}


def test_an_episode_longer_than_max_length_is_refused_with_the_key() -> None:
    collector, buffer = _collector(max_length=3)
    with pytest.raises(ConfigError, match=r"buffer.max_length = 3: an episode ran 3 steps"):
        collector.collect(buffer)
        collector.collect(buffer)


def test_greedy_acting_as_the_evaluator_calls_it() -> None:
    collector, _ = _collector()
    team = collector.policy
    hidden = team.initial_hidden(2, "cpu")
    obs = [torch.rand(2, 4), torch.rand(2, 4)]
    avail = [None, torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])]
    actions, hidden = team.act(obs, avail, deterministic=True, hidden=hidden, starts=torch.ones(2))
    assert [a.shape for a in actions] == [(2, 1), (2, 1)]
    assert actions[1].flatten().tolist() == [0.0, 1.0]
    assert hidden[1][:, 1].tolist() == [0, 1]   # the previous actions ride along in the hidden state
    # the Evaluator passes back what act returned (tests/value/test_evaluation_memory.py drives it);
    # act leaves the state it is given as it was
    given = (hidden[0].clone(), hidden[1].clone())
    _, after = team.act(obs, avail, deterministic=True, hidden=hidden, starts=torch.zeros(2))
    assert torch.equal(hidden[0], given[0]) and torch.equal(hidden[1], given[1])
    assert after is not hidden
