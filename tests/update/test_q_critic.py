"""Q critics: polyak exactness, TD targets (twin minimum, TD3 smoothing), joint-Q best responses."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from harl.buffers.replay import ReplayBatch
from harl.nets.q import StackedMLP
from harl.policy.off_policy import plain_mlp
from harl.update.common import polyak_update
from harl.update.objectives.ddpg import smoothed_target_actions
from harl.update.q_critic import (
    JointQCritic,
    JointQCriticConfig,
    QCritic,
    QCriticConfig,
    QCriticLearner,
    one_hot_actions,
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
            critic.targets.weights[-1].zero_()
            critic.targets.biases[-1].copy_(torch.tensor([5.0, -2.0]).reshape(2, 1, 1))
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


class TestStackedTwins:
    """The twin critics run as one batched network: same numbers as two separate MLPs."""

    @pytest.mark.parametrize("input_norm", [False, True])
    def test_outputs_and_gradients_match_two_separate_networks(self, input_norm: bool) -> None:
        """Same initial weights (same seed), outputs and every weight and input gradient, to float tolerance."""
        sizes = [7, 16, 12, 1]
        torch.manual_seed(3)
        separate = [plain_mlp(sizes, "tanh", None, input_norm) for _ in range(2)]
        torch.manual_seed(3)
        stacked = StackedMLP(sizes, "tanh", input_norm, 2)
        for n, net in enumerate(separate):  # built from the same random draws
            linears = [m for m in net if isinstance(m, nn.Linear)]
            for j, lin in enumerate(linears):
                assert torch.equal(stacked.weights[j][n], lin.weight) and torch.equal(stacked.biases[j][n, 0], lin.bias)
        with torch.no_grad():  # move the norm's affine parameters off their (1, 0) start
            for net in separate:
                for p in net.parameters():
                    p.add_(0.1 * torch.randn_like(p))
            for j in range(3):
                stacked.weights[j].copy_(torch.stack([[m for m in n if isinstance(m, nn.Linear)][j].weight for n in separate]))
                stacked.biases[j].copy_(torch.stack([[m for m in n if isinstance(m, nn.Linear)][j].bias for n in separate]).unsqueeze(1))
            if input_norm:
                stacked.norm[0].copy_(torch.stack([n[0].weight for n in separate]).unsqueeze(1))
                stacked.norm[1].copy_(torch.stack([n[0].bias for n in separate]).unsqueeze(1))
        x1 = torch.randn(5, 3, 7, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_(True)
        out = stacked(x1)
        assert out.shape == (2, 5, 3, 1)
        expected = torch.stack([net(x2) for net in separate])
        torch.testing.assert_close(out, expected)
        w = torch.randn(2, 5, 3, 1)
        (out * w).sum().backward()
        (expected * w).sum().backward()
        torch.testing.assert_close(x1.grad, x2.grad)
        for n, net in enumerate(separate):
            linears = [m for m in net if isinstance(m, nn.Linear)]
            for j, lin in enumerate(linears):
                torch.testing.assert_close(stacked.weights[j].grad[n], lin.weight.grad)
                torch.testing.assert_close(stacked.biases[j].grad[n, 0], lin.bias.grad)
            if input_norm:
                torch.testing.assert_close(stacked.norm[0].grad[n, 0], net[0].weight.grad)
                torch.testing.assert_close(stacked.norm[1].grad[n, 0], net[0].bias.grad)
        torch.testing.assert_close(stacked.one(x1.detach(), 1), expected[1].detach())

    def test_critic_step_matches_the_loss_of_two_separate_critics(self) -> None:
        """The TD loss on the stacked twins is the sum of each network's mean squared error."""
        torch.manual_seed(0)
        cfg = QCriticConfig(twin=True, hidden_sizes=(16,))
        critic = QCritic(3, BOXES, cfg)
        actions = [torch.rand(16, 2), torch.rand(16, 1)]
        batch = batch_of(16, 3, actions, torch.randn(16, 2), torch.zeros(16))
        q = critic.raw(batch.state, actions).detach()
        target = batch.returns.mean(-1)
        expected = sum(0.5 * ((target - q[n]) ** 2).mean() for n in range(2))
        stats = QCriticLearner(critic, cfg).update(batch, actions, actions, None)
        torch.testing.assert_close(stats["critic_loss"], expected)


@pytest.mark.parametrize("input_norm", [False, True])
def test_checkpoints_of_separate_twin_networks_still_load(input_norm: bool) -> None:
    """A critic state saved with one nn.Sequential per twin loads into the stacked layout, same values."""
    torch.manual_seed(5)
    cfg = QCriticConfig(twin=True, hidden_sizes=(8, 8), input_norm=input_norm)
    sizes = [3 + 3, 8, 8, 1]
    old = nn.ModuleDict({"nets": nn.ModuleList(plain_mlp(sizes, "relu", None, input_norm) for _ in range(2)),
                         "targets": nn.ModuleList(plain_mlp(sizes, "relu", None, input_norm) for _ in range(2))})
    critic = QCritic(3, BOXES, cfg)
    state = dict(critic.state_dict())
    state = {k: v for k, v in state.items() if not k.startswith(("nets.", "targets."))}
    state.update(old.state_dict())
    critic.load_state_dict(state)
    x, actions = torch.randn(6, 3), [torch.rand(6, 2), torch.rand(6, 1)]
    inputs = critic.inputs(x, actions)
    with torch.no_grad():
        torch.testing.assert_close(critic.raw(x, actions), torch.stack([n(inputs) for n in old["nets"]]).squeeze(-1))
        torch.testing.assert_close(critic.raw(x, actions, critic.targets),
                                   torch.stack([n(inputs) for n in old["targets"]]).squeeze(-1))
