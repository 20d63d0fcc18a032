"""GAE against a naive per-env reference loop, across termination and truncation."""

from __future__ import annotations

import torch

from harl.returns.gae import GAE, GAEConfig, gae


def naive_gae(rewards, values, next_values, terminated, truncated, gamma, lam):  # noqa: ANN001, ANN201
    """Per env, per step: the textbook recursion with explicit branches."""
    T, E = rewards.shape
    adv = torch.zeros(T, E)
    for e in range(E):
        running = 0.0
        for t in reversed(range(T)):
            if terminated[t, e]:
                delta = rewards[t, e] - values[t, e]
                running = delta
            elif truncated[t, e]:
                delta = rewards[t, e] + gamma * next_values[t, e] - values[t, e]
                running = delta
            else:
                delta = rewards[t, e] + gamma * next_values[t, e] - values[t, e]
                running = delta + gamma * lam * running
            adv[t, e] = running
    return adv


def test_matches_naive_loop_with_terminated_and_truncated_episodes() -> None:
    """Random rollout of 4 envs x 12 steps with both kinds of episode end equals the naive loop."""
    g = torch.Generator().manual_seed(0)
    T, E = 12, 4
    rewards = torch.randn(T, E, generator=g)
    values = torch.randn(T, E, generator=g)
    next_values = torch.randn(T, E, generator=g)
    terminated = torch.zeros(T, E, dtype=torch.bool)
    truncated = torch.zeros(T, E, dtype=torch.bool)
    terminated[3, 0] = terminated[7, 2] = True
    truncated[5, 1] = truncated[9, 0] = truncated[11, 3] = True
    got = gae(rewards, values, next_values, terminated, truncated, 0.9, 0.8)
    torch.testing.assert_close(got, naive_gae(rewards, values, next_values, terminated, truncated, 0.9, 0.8))


def test_hand_computed_three_step_episode() -> None:
    """One env: r = 1, 2, 3; V = 0.5 everywhere; episode truncated at step 3, bootstrap V = 4."""
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.full((3, 1), 0.5)
    next_values = torch.tensor([[0.5], [0.5], [4.0]])
    term = torch.zeros(3, 1, dtype=torch.bool)
    trunc = torch.tensor([[False], [False], [True]])
    gamma, lam = 0.5, 0.5
    d2 = 3 + 0.5 * 4 - 0.5  # 4.5
    d1 = 2 + 0.5 * 0.5 - 0.5  # 1.75
    d0 = 1 + 0.5 * 0.5 - 0.5  # 0.75
    expected = torch.tensor([[d0 + 0.25 * (d1 + 0.25 * d2)], [d1 + 0.25 * d2], [d2]])
    torch.testing.assert_close(gae(rewards, values, next_values, term, trunc, gamma, lam), expected)
    # Had the episode terminated instead, the last step would not bootstrap.
    got = gae(rewards, values, next_values, trunc, torch.zeros_like(trunc), gamma, lam)
    assert got[2, 0].item() == 3 - 0.5


def test_agent_axis_broadcasts_for_fp_state() -> None:
    """(T, E, A) rewards and values with (T, E) flags equal the per-agent EP computation."""
    g = torch.Generator().manual_seed(1)
    T, E, A = 6, 2, 3
    r, v, nv = (torch.randn(T, E, A, generator=g) for _ in range(3))
    term = torch.zeros(T, E, dtype=torch.bool)
    trunc = torch.zeros(T, E, dtype=torch.bool)
    term[2, 1] = True
    trunc[4, 0] = True
    got = gae(r, v, nv, term, trunc, 0.99, 0.95)
    for a in range(A):
        torch.testing.assert_close(got[..., a], gae(r[..., a], v[..., a], nv[..., a], term, trunc, 0.99, 0.95))


class _Rollout:
    """The buffer interface GAE.compute uses (``RolloutTargets``): one env, three steps, truncated after step 1."""

    def __init__(self) -> None:
        self.terminated = torch.tensor([[False], [False], [False]])
        self.truncated = torch.tensor([[False], [True], [False]])
        self.values = torch.tensor([[0.5], [1.0], [2.0], [4.0]])
        self.next_values = torch.tensor([[1.0], [10.0], [4.0]])  # 10: the truncated episode's final state

    def critic_rewards(self) -> torch.Tensor:
        return torch.tensor([[1.0], [2.0], [3.0]])

    def set_targets(self, advantages: torch.Tensor, returns: torch.Tensor) -> None:
        self.advantages, self.returns = advantages, returns


def test_zero_truncated_advantage_is_harls_proper_time_limits() -> None:
    """HARL's critic buffer with bad_masks, gamma = lam = 0.5, by hand.

    t=2: delta = 3 + 0.5 * 4 - 2 = 3, gae = 3.
    t=1 (truncated: masks = 0, bad_masks = 0): delta = 2 - 1 = 1, gae = 1 * bad_mask = 0,
         return = V = 1.0.
    t=0: delta = 1 + 0.5 * 1.0 - 0.5 = 1, gae = 1 + 0.25 * 0 = 1, return = 1.5.
    Bootstrapping instead (harl's default): A_1 = 2 + 0.5 * 10 - 1 = 6, A_0 = 1 + 0.25 * 6 = 2.5.
    """
    harl_style, bootstrap = _Rollout(), _Rollout()
    GAE(GAEConfig(gamma=0.5, lam=0.5, zero_truncated_advantage=True)).compute(harl_style)
    GAE(GAEConfig(gamma=0.5, lam=0.5)).compute(bootstrap)
    assert harl_style.advantages.view(-1).tolist() == [1.0, 0.0, 3.0]
    assert harl_style.returns.view(-1).tolist() == [1.5, 1.0, 5.0]
    assert bootstrap.advantages.view(-1).tolist() == [2.5, 6.0, 3.0]
