"""Q critics: polyak exactness, TD targets (twin minimum, TD3 smoothing), joint-Q best responses."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from harl.buffers.replay import ReplayBatch
from harl.update.objectives.ddpg import smoothed_target_actions
from harl.update.q_critic import (
    JointQCritic,
    JointQCriticConfig,
    QCritic,
    QCriticConfig,
    QCriticLearner,
    one_hot_actions,
    polyak_update,
    td_targets,
)

BOXES = [spaces.Box(-1, 1, (2,), np.float32), spaces.Box(-1, 1, (1,), np.float32)]


def batch_of(n: int, state_dim: int, actions: list[torch.Tensor], returns: torch.Tensor,
             discount: torch.Tensor) -> ReplayBatch:
    state = torch.randn(n, state_dim)
    return ReplayBatch(state=state, obs=[], actions=actions, avail=[None] * len(actions),
                       active=torch.ones(n, returns.shape[1]), returns=returns, discount=discount,
                       steps=torch.ones(n, dtype=torch.long), next_state=torch.randn(n, state_dim),
                       next_obs=[], next_avail=[None] * len(actions))


class TestPolyak:
    def test_matches_the_formula_parameter_by_parameter(self) -> None:
        """target <- (1 - tau) target + tau online, for every parameter."""
        torch.manual_seed(0)
        online, target = nn.Linear(4, 3), nn.Linear(4, 3)
        before = [p.clone() for p in target.parameters()]
        polyak_update(target, online, 0.005)
        for t, b, o in zip(target.parameters(), before, online.parameters()):
            torch.testing.assert_close(t, 0.995 * b + 0.005 * o, rtol=0, atol=1e-7)

    def test_tau_one_copies_and_online_is_untouched(self) -> None:
        """tau = 1 copies exactly; the online network never changes."""
        online, target = nn.Linear(4, 3), nn.Linear(4, 3)
        online_before = [p.clone() for p in online.parameters()]
        polyak_update(target, online, 1.0)
        for t, o, ob in zip(target.parameters(), online.parameters(), online_before):
            assert torch.equal(t, o) and torch.equal(o, ob)

    def test_critic_soft_update_moves_only_the_targets(self) -> None:
        """QCritic.soft_update polyak-averages every target network toward its online twin."""
        critic = QCritic(3, BOXES, QCriticConfig(twin=True, hidden_sizes=(8,)))
        with torch.no_grad():
            for p in critic.nets.parameters():
                p.add_(1.0)
        before = [p.clone() for p in critic.targets.parameters()]
        critic.soft_update(0.1)
        for t, b, o in zip(critic.targets.parameters(), before, critic.nets.parameters()):
            torch.testing.assert_close(t, 0.9 * b + 0.1 * o)


class TestTD3Target:
    def test_smoothing_noise_is_clipped_then_the_action_is_clipped_to_the_box(self) -> None:
        """Noise sigma and clip are in half-range units; the smoothed action stays in the Box."""
        centre, half = torch.tensor([0.5, 0.0]), torch.tensor([0.5, 2.0])
        actions = torch.tensor([[0.5, 0.0], [0.9, 1.9], [0.5, 0.0]])
        noise = torch.tensor([[0.5, -0.5], [10.0, 10.0], [-10.0, 0.1]])
        out = smoothed_target_actions(actions, centre, half, policy_noise=0.2, noise_clip=0.5, noise=noise)
        # row 0: eps = 0.5 * 0.2 * half = (0.05, -0.2), inside the clip (0.25, 1.0)
        # row 1: eps clipped to (0.25, 1.0), then the action to the Box (1.0, 2.0)
        # row 2: eps = (-0.25 after clip, 0.04)
        torch.testing.assert_close(out, torch.tensor([[0.55, -0.2], [1.0, 2.0], [0.25, 0.04]]))

    def test_random_smoothing_never_exceeds_the_clip(self) -> None:
        """With sampled noise, |smoothed - action| <= noise_clip * half range."""
        torch.manual_seed(1)
        centre, half = torch.zeros(3), torch.full((3,), 2.0)
        actions = torch.zeros(10_000, 3)
        out = smoothed_target_actions(actions, centre, half, policy_noise=1.0, noise_clip=0.3)
        assert float(out.abs().max()) <= 0.6 + 1e-6 and float(out.abs().max()) > 0.59

    def test_target_uses_the_minimum_of_the_twin_target_networks(self) -> None:
        """y = R + discount * min(Q1', Q2'); EP averages the agents' n-step returns."""
        critic = QCritic(3, BOXES, QCriticConfig(twin=True, hidden_sizes=(8,)))
        with torch.no_grad():  # target nets output constants 5 and -2
            for net, value in zip(critic.targets, (5.0, -2.0)):
                last = net[-1]
                last.weight.zero_()
                last.bias.fill_(value)
        actions = [torch.zeros(4, 2), torch.zeros(4, 1)]
        next_value = critic.target_value(torch.randn(4, 3), actions)
        torch.testing.assert_close(next_value, torch.full((4,), -2.0))
        returns = torch.tensor([[1.0, 3.0]] * 4)
        discount = torch.tensor([0.9, 0.0, 0.81, 1.0])
        torch.testing.assert_close(td_targets(returns.mean(-1), discount, next_value),
                                   2.0 + discount * -2.0)

    def test_critic_step_fits_both_networks_to_the_same_target(self) -> None:
        """Repeated TD steps on a fixed batch bring both twins close to R + discount * min target."""
        torch.manual_seed(0)
        cfg = QCriticConfig(twin=True, hidden_sizes=(32,), lr=1e-2)
        critic = QCritic(3, BOXES, cfg)
        learner = QCriticLearner(critic, cfg)
        actions = [torch.rand(16, 2), torch.rand(16, 1)]
        batch = batch_of(16, 3, actions, torch.randn(16, 2), torch.zeros(16))  # no bootstrap
        for _ in range(300):
            learner.update(batch, actions, actions, None)
        for q in critic.raw(batch.state, actions):
            torch.testing.assert_close(q, batch.returns.mean(-1), atol=0.05, rtol=0)


def test_fp_values_and_targets_are_per_agent() -> None:
    """FP critics give one value per agent and subtract a per-sample penalty from each."""
    critic = QCritic(3, BOXES, QCriticConfig(state_type="FP", hidden_sizes=(8,)))
    q = critic.value(torch.randn(5, 3), [torch.zeros(5, 2), torch.zeros(5, 1)])
    assert q.shape == (5, 2)
    y = td_targets(torch.ones(5, 2), torch.full((5,), 0.5), torch.full((5, 2), 4.0), torch.full((5,), 2.0))
    torch.testing.assert_close(y, torch.full((5, 2), 2.0))


def test_one_hot_encoding_of_stored_categories() -> None:
    """Discrete and MultiDiscrete indices become concatenated one-hot vectors."""
    stored = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    out = one_hot_actions(stored, spaces.MultiDiscrete([2, 3]))
    torch.testing.assert_close(out, torch.tensor([[0.0, 1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0, 0.0]]))


def test_joint_q_best_response_and_index_order() -> None:
    """Agent 0's index varies fastest; a best response maximises Q with the others fixed (masks respected)."""
    critic = JointQCritic(2, [spaces.Discrete(2), spaces.Discrete(3)], JointQCriticConfig(hidden_sizes=(4,)))
    table = torch.tensor([[0.0, 1.0, 5.0, 2.0, 3.0, 4.0]])  # Q(a0, a1) at index a0 + 2 a1

    class Fixed(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return table.expand(x.shape[0], -1)

    critic.nets[0] = Fixed()
    actions = [torch.tensor([[0.0]]), torch.tensor([[0.0]])]
    state = torch.zeros(1, 2)
    assert critic.value(state, [torch.tensor([[1.0]]), torch.tensor([[2.0]])]).item() == 4.0
    assert critic.best_response(state, actions, agent=1).item() == 1.0  # Q(0, b) = 0, 5, 3
    assert critic.best_response(state, actions, agent=1, avail=torch.tensor([[1.0, 0.0, 1.0]])).item() == 2.0
    assert critic.best_response(state, actions, agent=0).item() == 1.0  # Q(a, 0) = 0, 1


@pytest.mark.parametrize("twin", [False, True])
def test_value_norm_targets_are_normalised_and_values_denormalised(twin: bool) -> None:
    """With value_norm the networks fit normalised targets; ``value`` reports env units."""
    torch.manual_seed(0)
    cfg = QCriticConfig(twin=twin, hidden_sizes=(32,), lr=1e-2, value_norm=True)
    critic = QCritic(3, BOXES, cfg)
    learner = QCriticLearner(critic, cfg)
    actions = [torch.rand(32, 2), torch.rand(32, 1)]
    batch = batch_of(32, 3, actions, 100.0 + 10 * torch.randn(32, 2), torch.zeros(32))
    for _ in range(400):
        learner.update(batch, actions, actions, None)
    torch.testing.assert_close(critic.value(batch.state, actions, "min"), batch.returns.mean(-1), atol=1.5, rtol=0)
    with torch.no_grad():
        assert float(critic.raw(batch.state, actions)[0].abs().mean()) < 5.0
