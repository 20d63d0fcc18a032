"""harl.policy.off_policy: the off-policy actors act inside their spaces and respect masks."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from harl.policy.off_policy import DeterministicActor, DuelingQActor, SquashedGaussianActor, masked_uniform

BOX = spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, 4.0], np.float32))


def test_deterministic_actor_stays_in_the_box_with_noise() -> None:
    """DDPG/TD3's actor: tanh scaled to the Box; exploration noise is clipped back into it."""
    torch.manual_seed(0)
    actor = DeterministicActor(3, BOX, [16], "relu", False, expl_noise=5.0)
    obs = torch.randn(500, 3)
    for a in (actor.act(obs, None, deterministic=True), actor.explore(obs, None, None)):
        assert bool((a[:, 0] >= -1).all() and (a[:, 0] <= 1).all())
        assert bool((a[:, 1] >= 0).all() and (a[:, 1] <= 4).all())
    assert torch.equal(actor.act(obs, None, True), actor.act(obs, None, True))


def test_squashed_gaussian_log_density_matches_a_hand_computation() -> None:
    """SAC's log-density: Gaussian of u minus log|d a / d u| = sum log(half * (1 - tanh(u)^2))."""
    torch.manual_seed(0)
    actor = SquashedGaussianActor(3, BOX, [16], "relu", False)
    mu, log_std = torch.tensor([[0.3, -0.5]]), torch.tensor([[-0.2, 0.1]])
    action, log_p = actor.sample((mu, log_std), deterministic=True)  # u = mu
    half = torch.tensor([1.0, 2.0])
    by_hand = (-log_std - 0.5 * np.log(2 * np.pi)).sum() - torch.log(half * (1 - torch.tanh(mu) ** 2)).sum()
    torch.testing.assert_close(log_p, by_hand.reshape(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(action, torch.tensor([[0.0, 2.0]]) + half * torch.tanh(mu))


def test_masked_uniform_draws_only_available_categories_evenly() -> None:
    """Warm-up's random categories: only the available ones, each about equally often."""
    avail = torch.tensor([[1.0, 0.0, 1.0, 1.0]]).repeat(6000, 1)
    draws = masked_uniform(avail, 4, 6000, torch.device("cpu"), torch.Generator().manual_seed(1))
    counts = torch.bincount(draws, minlength=4).float() / 6000
    assert counts[1] == 0
    torch.testing.assert_close(counts[[0, 2, 3]], torch.full((3,), 1 / 3), atol=0.03, rtol=0)


def test_epsilon_coin_per_env_or_one_per_step() -> None:
    """D3QN exploration at epsilon 0.5 over 64 envs: ``per_env`` mixes random and greedy rows in
    every call; ``per_step`` (HARL's) makes every row random or every row greedy."""
    torch.manual_seed(0)
    differing = {}
    for coin in ("per_env", "per_step"):
        actor = DuelingQActor(3, spaces.Discrete(5), [16], "relu", False, [8], "relu", (0.5, 0.5, 0, 0),
                              epsilon_coin=coin)
        obs = torch.randn(64, 3)
        greedy = actor.greedy(obs, None)
        differing[coin] = [int((actor.explore(obs, None, 0) != greedy).sum()) for _ in range(40)]
    assert all(0 < d < 64 for d in differing["per_env"])
    assert all(d == 0 or d > 30 for d in differing["per_step"])  # a random row differs 4 times in 5
    assert 0 in differing["per_step"] and max(differing["per_step"]) > 30
