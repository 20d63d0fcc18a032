"""n-step targets against a naive per-transition loop, across episode ends and wrap-around."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.buffers.records import Transition
from harl.buffers.replay import ReplayBuffer
from harl.returns.n_step import NStepConfig, NStepReturns, n_step_returns

OBS = [spaces.Box(-np.inf, np.inf, (2,), np.float32), spaces.Box(-np.inf, np.inf, (1,), np.float32)]
ACT = [spaces.Box(-1, 1, (1,), np.float32), spaces.Discrete(3)]


def fill(buffer: ReplayBuffer, steps: int, seed: int) -> list[list[dict]]:
    """Random rewards and episode ends; obs[0] = (transition id, episode id).  Returns each env's history."""
    rng = np.random.default_rng(seed)
    E = buffer.n_envs
    history: list[list[dict]] = [[] for _ in range(E)]
    episode = np.arange(E) * 1000
    next_id = 0
    for _ in range(steps):
        ids = np.arange(next_id, next_id + E)
        next_id += E
        draw = rng.random(E)
        terminated, truncated = draw < 0.12, (draw >= 0.12) & (draw < 0.25)
        rewards = rng.normal(size=(E, 2)).astype(np.float32)
        obs0 = np.stack([ids, episode], 1).astype(np.float32)
        obs = [obs0, ids[:, None].astype(np.float32)]
        next_obs = [obs0 + [0.5, 0.0], ids[:, None] + 0.5]  # "what the step reached" (id + 0.5)
        buffer.insert(Transition(obs=obs, avail=None, state=np.zeros((E, 3)), actions=[np.zeros((E, 1))] * 2,
                                 rewards=rewards, terminated=terminated, truncated=truncated, active=np.ones((E, 2)),
                                 next_obs=next_obs, next_avail=None, next_state=np.zeros((E, 3))))
        for e in range(E):
            history[e].append({"id": ids[e], "episode": episode[e], "r": rewards[e], "term": terminated[e],
                               "trunc": truncated[e]})
        episode = np.where(terminated | truncated, episode + 1, episode)
    return history


def naive(history: list[dict], start: int, n: int, gamma: float, proper: bool) -> tuple[np.ndarray, float, int]:
    """(returns per agent, discount, index of the bootstrap transition) by explicit branches."""
    total, k = np.zeros(2), 0
    while True:
        step = history[start + k]
        total += gamma**k * step["r"]
        newest = start + k == len(history) - 1
        if step["term"] or (step["trunc"] and not proper):
            return total, 0.0, start + k
        if step["trunc"] or newest or k == n - 1:
            return total, gamma ** (k + 1), start + k
        k += 1


@pytest.mark.parametrize("proper", [True, False])
@pytest.mark.parametrize(("capacity", "steps"), [(3 * 40, 25), (3 * 10, 37)])
def test_every_stored_transition_matches_the_naive_loop(proper: bool, capacity: int, steps: int) -> None:
    """All stored transitions (full buffer with wrap-around, and partly filled) equal the reference loop."""
    n, gamma = 5, 0.9
    buffer = ReplayBuffer(OBS, ACT, 3, n_envs=3, capacity=capacity)
    history = fill(buffer, steps, seed=capacity + steps)
    returns = NStepReturns(NStepConfig(gamma=gamma, n_step=n, proper_time_limits=proper))
    batch = returns.batch(buffer, torch.arange(buffer.size))
    kept = min(steps, buffer.rows)
    assert batch.size == kept * 3
    positions = {int(h["id"]): (e, t) for e, hist in enumerate(history) for t, h in enumerate(hist)}
    seen = set()
    for b in range(batch.size):
        e, t = positions[int(batch.obs[0][b, 0])]
        seen.add((e, t))
        assert t >= steps - kept  # only transitions still in the buffer are returned
        expected, discount, last = naive(history[e], t, n, gamma, proper)
        np.testing.assert_allclose(batch.returns[b].numpy(), expected, rtol=1e-5, atol=1e-5)
        assert batch.discount[b].item() == pytest.approx(discount)
        assert batch.steps[b].item() == last - t + 1
        # bootstraps from what the last summed step reached, in the same episode
        assert batch.next_obs[0][b, 0].item() == history[e][last]["id"] + 0.5
        assert batch.next_obs[0][b, 1].item() == history[e][t]["episode"]
    assert len(seen) == kept * 3


def test_no_window_spans_two_episodes() -> None:
    """Every reward summed for a sample belongs to that sample's episode (checked via the naive windows)."""
    buffer = ReplayBuffer(OBS, ACT, 3, n_envs=3, capacity=300)
    history = fill(buffer, 60, seed=7)
    batch = NStepReturns(NStepConfig(gamma=0.99, n_step=20)).batch(buffer, torch.arange(buffer.size))
    by_id = {int(h["id"]): (e, t) for e, hist in enumerate(history) for t, h in enumerate(hist)}
    for b in range(batch.size):
        e, t = by_id[int(batch.obs[0][b, 0])]
        used = history[e][t:t + int(batch.steps[b])]
        assert {h["episode"] for h in used} == {history[e][t]["episode"]}
        assert not any(h["term"] or h["trunc"] for h in used[:-1])


def test_pure_function_stops_at_the_first_end_and_ignores_later_nans() -> None:
    """Rewards after an end never enter the sum, even when they are NaN (uninitialised storage)."""
    rewards = torch.tensor([[[1.0], [2.0], [float("nan")]], [[1.0], [2.0], [4.0]]])
    ends = torch.tensor([[False, True, False], [False, False, False]])
    returns, last, discount = n_step_returns(rewards, ends, 0.5)
    torch.testing.assert_close(returns, torch.tensor([[2.0], [3.0]]))
    assert last.tolist() == [1, 2]
    torch.testing.assert_close(discount, torch.tensor([0.25, 0.125]))


def test_compute_is_a_noop_and_sampling_is_seeded() -> None:
    """``compute`` leaves the buffer alone; ``sample`` draws from the generator it is given."""
    buffer = ReplayBuffer(OBS, ACT, 3, n_envs=3, capacity=60)
    fill(buffer, 10, seed=1)
    returns = NStepReturns(NStepConfig(n_step=3))
    before = buffer.rewards.clone()
    assert returns.compute(buffer) is None
    assert torch.equal(buffer.rewards[:buffer.filled], before[:buffer.filled])
    a = returns.sample(buffer, 8, torch.Generator().manual_seed(3))
    b = returns.sample(buffer, 8, torch.Generator().manual_seed(3))
    assert torch.equal(a.obs[0], b.obs[0]) and a.size == 8
