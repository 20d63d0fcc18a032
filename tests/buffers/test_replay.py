"""The replay buffer: per-agent layout, circular overwrite, sampling."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from harl.buffers.records import Transition
from harl.buffers.replay import ReplayBuffer, distinct_indices

OBS = [spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (5,), np.float32)]
ACT = [spaces.Box(-1, 1, (2,), np.float32), spaces.MultiDiscrete([2, 3])]


def add(buffer: ReplayBuffer, value: float) -> None:
    E = buffer.n_envs
    obs = [np.full((E, 3), value), np.full((E, 5), value)]
    avail = [np.zeros((E, 0)), np.ones((E, 5))]
    buffer.insert(Transition(obs=obs, avail=avail, state=np.full((E, 4), value),
                             actions=[np.full((E, 2), value), np.ones((E, 2))], rewards=np.full((E, 2), value),
                             terminated=np.zeros(E, bool), truncated=np.zeros(E, bool), active=np.ones((E, 2)),
                             next_obs=obs, next_avail=avail, next_state=np.full((E, 4), value)))


def test_layout_is_per_agent_with_masks_only_for_categories() -> None:
    """Each agent keeps its own widths; a Box agent has no mask, MultiDiscrete masks are concatenated."""
    buffer = ReplayBuffer(OBS, ACT, 4, n_envs=2, capacity=10)
    assert buffer.rows == 5
    assert [o.shape for o in buffer.obs] == [(5, 2, 3), (5, 2, 5)]
    assert [a.shape for a in buffer.actions] == [(5, 2, 2), (5, 2, 2)]
    assert buffer.avail[0] is None and buffer.avail[1].shape == (5, 2, 5)
    add(buffer, 1.0)
    assert buffer.size == 2 and buffer.env_steps == 2


def test_overwrites_the_oldest_rows_and_indexes_from_the_oldest() -> None:
    """After wrap-around, flat index 0 is the oldest transition still stored."""
    buffer = ReplayBuffer(OBS, ACT, 4, n_envs=2, capacity=6)
    for v in range(5):
        add(buffer, float(v))
    assert buffer.filled == 3 and buffer.head == 2 and buffer.env_steps == 10
    rows, envs = buffer.windows(torch.arange(buffer.size), 1)
    values = buffer.obs[0][rows[:, 0], envs, 0]
    assert values.tolist() == [2.0, 2.0, 3.0, 3.0, 4.0, 4.0]


def test_sample_index_covers_only_stored_transitions() -> None:
    """Uniform indices fall inside the stored range and follow the generator."""
    buffer = ReplayBuffer(OBS, ACT, 4, n_envs=2, capacity=100)
    for v in range(3):
        add(buffer, float(v))
    index = buffer.sample_index(500, torch.Generator().manual_seed(0))
    assert int(index.min()) >= 0 and int(index.max()) < 6
    assert len(set(index.tolist())) == 6


def test_without_replacement_a_batch_holds_distinct_transitions() -> None:
    """``replacement = false`` (HARL's ``randperm(cur_size)[:batch_size]``): no transition twice in a
    batch; fewer stored than asked gives each stored one once."""
    buffer = ReplayBuffer(OBS, ACT, 4, n_envs=2, capacity=100, replacement=False)
    for v in range(40):
        add(buffer, float(v))
    g = torch.Generator().manual_seed(0)
    for k in (2, 15, 50):  # 2 of 80: the redraw path; 15 and 50: the permutation
        for _ in range(20):
            index = buffer.sample_index(k, g)
            assert len(set(index.tolist())) == k and int(index.min()) >= 0 and int(index.max()) < 80
    small = ReplayBuffer(OBS, ACT, 4, n_envs=2, capacity=100, replacement=False)
    add(small, 0.0)
    assert sorted(small.sample_index(5, g).tolist()) == [0, 1]


def test_distinct_indices_are_a_uniform_subset() -> None:
    """4 of 40 by redrawing repeats (about one batch in six has one), 20,000 times: each index is in the batch with probability 4/40 = 0.1 (2,000 times,
    binomial std 42), a given pair with probability (4 * 3) / (40 * 39) = 0.00769 (154
    times, std 12), and no batch repeats an index."""
    g = torch.Generator().manual_seed(1)
    draws = torch.stack([distinct_indices(40, 4, g, permute_below=0) for _ in range(20_000)])  # redraws
    assert all(len(set(row)) == 4 for row in draws.tolist())
    counts = torch.bincount(draws.flatten(), minlength=40)
    assert int((counts - 2000).abs().max()) < 5 * 42
    both = ((draws == 0).any(1) & (draws == 1).any(1)).sum()  # a pair: as often as any other
    assert abs(int(both) - 154) < 5 * 12


def test_state_dict_saves_only_the_filled_rows_and_restores_the_cursor() -> None:
    """A partly filled buffer saves its filled rows; a wrapped one all rows, head included."""
    buffer = ReplayBuffer(OBS, ACT, 4, n_envs=2, capacity=10)
    add(buffer, 1.0)
    add(buffer, 2.0)
    state = buffer.state_dict()
    assert state["filled"] == 2 and state["obs"][0].shape == (2, 2, 3) and state["avail"][0] is None
    for n_added in (2, 7):  # not wrapped / wrapped around
        source = ReplayBuffer(OBS, ACT, 4, n_envs=2, capacity=10)
        for v in range(n_added):
            add(source, float(v))
        copy = ReplayBuffer(OBS, ACT, 4, n_envs=2, capacity=10)
        copy.load_state_dict(source.state_dict())
        assert (copy.head, copy.filled, copy.env_steps) == (source.head, source.filled, source.env_steps)
        index = torch.arange(source.size)
        rows, envs = source.windows(index, 1)
        assert torch.equal(copy.gather(rows[:, 0], envs, rows[:, 0], *[torch.zeros(1)] * 3).obs[1],
                           source.gather(rows[:, 0], envs, rows[:, 0], *[torch.zeros(1)] * 3).obs[1])
        assert torch.equal(copy.state[:copy.filled], source.state[:source.filled])
