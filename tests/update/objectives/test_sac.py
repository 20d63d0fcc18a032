"""SAC: the temperature moves toward the target entropy; actors' log-densities are right."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.buffers.replay import ReplayBatch
from harl.errors import ConfigError
from harl.policy.off_policy import CategoricalActor, OffPolicyActors, SquashedGaussianActor
from harl.policy.on_policy import PolicyConfig
from harl.update.objectives.sac import SACConfig, SACLearner, alpha_loss, default_target_entropy, make_actor
from harl.update.q_critic import QCritic, QCriticConfig

BOX = spaces.Box(-2.0, 2.0, (2,), np.float32)


def learner(target_entropy: float, alpha: float = 0.2) -> tuple[SACLearner, ReplayBatch]:
    torch.manual_seed(0)
    team = OffPolicyActors([SquashedGaussianActor(3, BOX, (16,), "relu", False)], with_targets=False)
    critic = QCritic(4, [BOX], QCriticConfig(hidden_sizes=(8,)))
    sac = SACLearner(0, team, critic, SACConfig(alpha=alpha, alpha_lr=0.05), target_entropy)
    n = 64
    batch = ReplayBatch(state=torch.randn(n, 4), obs=[torch.randn(n, 3)], actions=[torch.zeros(n, 2)],
                        avail=[None], active=torch.ones(n, 1), returns=torch.zeros(n, 1),
                        discount=torch.zeros(n), steps=torch.ones(n, dtype=torch.long),
                        next_state=torch.randn(n, 4), next_obs=[torch.randn(n, 3)], next_avail=[None])
    return sac, batch


@pytest.mark.parametrize(("target", "direction"), [(50.0, 1), (-50.0, -1)])
def test_alpha_moves_toward_the_target_entropy(target: float, direction: int) -> None:
    """Entropy below target: alpha grows; above target: alpha shrinks (monotonically here)."""
    sac, batch = learner(target)
    alphas = [float(sac.alpha)]
    for _ in range(20):
        sac.update(batch, [sac.initial_action(batch)])
        alphas.append(float(sac.alpha))
    steps = np.diff(alphas)
    assert np.all(direction * steps > 0), alphas


def test_alpha_loss_gradient_sign() -> None:
    """d loss / d log alpha = -(log pi + target): negative (alpha up) when entropy < target."""
    log_alpha = torch.zeros((), requires_grad=True)
    log_probs = torch.full((5,), -1.0)  # entropy estimate 1
    alpha_loss(log_alpha, log_probs, 3.0, torch.ones(5)).backward()
    assert log_alpha.grad.item() == pytest.approx(-2.0)


def test_fixed_alpha_does_not_move() -> None:
    """auto_alpha = false keeps the configured temperature."""
    torch.manual_seed(0)
    team = OffPolicyActors([SquashedGaussianActor(3, BOX, (8,), "relu", False)], with_targets=False)
    critic = QCritic(4, [BOX], QCriticConfig(hidden_sizes=(8,)))
    sac = SACLearner(0, team, critic, SACConfig(alpha=0.3, auto_alpha=False), -2.0)
    _, batch = learner(0.0)
    sac.update(batch, [sac.initial_action(batch)])
    assert float(sac.alpha) == pytest.approx(0.3)


def test_squashed_gaussian_log_density_matches_a_change_of_variables() -> None:
    """log p(a) = log N(u) - sum log|d a / d u| with a = centre + half tanh(u), checked numerically."""
    torch.manual_seed(2)
    actor = SquashedGaussianActor(3, BOX, (8,), "relu", False)
    obs = torch.randn(4, 3)
    torch.manual_seed(5)
    action, log_prob = actor.rsample(obs)
    assert bool((action.abs() <= 2.0).all())
    x = actor.body(obs)
    mu, log_std = actor.mu(x), actor.log_std(x).clamp(-20, 2)
    u = torch.atanh((action / 2.0).clamp(-1 + 1e-6, 1 - 1e-6))
    normal = torch.distributions.Normal(mu, log_std.exp())
    expected = (normal.log_prob(u) - torch.log(2.0 * (1 - torch.tanh(u) ** 2))).sum(-1)
    torch.testing.assert_close(log_prob, expected, atol=2e-3, rtol=1e-3)


def test_categorical_samples_are_one_hot_masked_and_carry_gradients() -> None:
    """Straight-through samples are exact one-hots of available actions, with gradients to the logits."""
    actor = CategoricalActor(3, spaces.MultiDiscrete([3, 2]), (8,), "relu", True, 0.01)
    avail = torch.tensor([[1.0, 0.0, 1.0, 1.0, 1.0]]).expand(200, 5)
    onehot, log_prob = actor.rsample(torch.randn(200, 3), avail)
    assert onehot.shape == (200, 5) and bool((onehot[:, 1] == 0).all())
    torch.testing.assert_close(onehot[:, :3].sum(-1), torch.ones(200))
    # near-uniform start: log-prob of a sample = log(1/2) + log(1/2)
    torch.testing.assert_close(log_prob, torch.full((200,), 2 * math.log(0.5)), atol=0.05, rtol=0)
    (onehot[:, 0] * 1.0).sum().backward()
    assert actor.logits.weight.grad is not None and float(actor.logits.weight.grad.abs().sum()) > 0


class TestHARLDefaults:
    """HARL's off_policy_base_runner: targets ``-prod(shape)`` (Box) and ``-0.98 log(1 / prod(shape))``
    (others), log alpha starting at 0; harl's log pi also holds the Box scaling, so the Box target moves."""

    def test_discrete_target_is_zero(self) -> None:
        """Discrete(5).shape == (): prod(()) = 1, -0.98 * log(1 / 1) = 0 (not 0.98 log 5 = 1.577)."""
        assert default_target_entropy(spaces.Discrete(5)) == 0.0

    def test_multidiscrete_target(self) -> None:
        """MultiDiscrete([2, 3]).shape == (2,): -0.98 log(1/2) = 0.67923 per log-prob column; HARL's loss
        averages its 2 columns, harl's log pi is their sum: 2 * 0.67923 = 1.35857."""
        assert default_target_entropy(spaces.MultiDiscrete([2, 3])) == pytest.approx(1.35857, abs=1e-5)

    def test_box_targets_mean_harls_in_tanh_space(self) -> None:
        """[-1, 1]^3: -3.  [-2, 2]^2: -2 + 2 ln 2 = -0.61371.  MPE's [0, 1]^5: -5 + 5 ln 0.5 = -8.46574."""
        assert default_target_entropy(spaces.Box(-1.0, 1.0, (3,), np.float32)) == -3.0
        assert default_target_entropy(BOX) == pytest.approx(-0.61371, abs=1e-5)
        assert default_target_entropy(spaces.Box(0.0, 1.0, (5,), np.float32)) == pytest.approx(-8.46574, abs=1e-5)

    def test_alpha_loss_term_equals_harls_on_the_tanh_sample(self) -> None:
        """log pi(a) + target here == HARL's tanh-space log pi(t) - dim, t = tanh(u) (HARL's logp:
        sum[log N(u) - log(1 - tanh(u)^2)]), for a [0, 1]^5 Box."""
        box = spaces.Box(0.0, 1.0, (5,), np.float32)
        torch.manual_seed(3)
        actor = SquashedGaussianActor(3, box, (8,), "relu", False)
        obs = torch.randn(6, 3)
        torch.manual_seed(4)
        action, log_prob = actor.rsample(obs)
        x = actor.body(obs)
        mu, log_std = actor.mu(x), actor.log_std(x).clamp(-20, 2)
        u = torch.atanh((2 * action - 1).clamp(-1 + 1e-6, 1 - 1e-6))
        harl_logp = (torch.distributions.Normal(mu, log_std.exp()).log_prob(u) - torch.log(1 - torch.tanh(u) ** 2)).sum(-1)
        torch.testing.assert_close(log_prob + default_target_entropy(box), harl_logp - 5.0, atol=5e-3, rtol=1e-3)

    def test_act_limit_squash_is_harls_policy(self) -> None:
        """``squash = "act_limit"`` on MPE's [0, 1]^2: HARL's SquashedGaussianPolicy, by hand:
        u = mu + std * eps, a = high[0] * tanh(u) = tanh(u) (in [-1, 1]; the env clips), and
        logp = sum[log N(u; mu, std)] - sum[2 (log 2 - u - softplus(-2u))].  mu = (0.3, -0.5),
        log_std = (-1, 0), eps = (1, -2): u = (0.66788, -2.5), a = (0.58358, -0.98661),
        log N = (-0.41894, -2.91894), correction = (-0.41638, -3.62714): logp = 0.70564.
        The default target is HARL's -dim = -2 (the scale is 1)."""
        box = spaces.Box(0.0, 1.0, (2,), np.float32)
        actor = SquashedGaussianActor(3, box, (8,), "relu", False, squash="act_limit")
        params = torch.tensor([[0.3, -0.5]]), torch.tensor([[-1.0, 0.0]])
        real = torch.randn_like
        torch.randn_like = lambda x, *a, **k: torch.tensor([[1.0, -2.0]])  # type: ignore[assignment]
        try:
            action, log_prob = actor.sample(params)
        finally:
            torch.randn_like = real
        torch.testing.assert_close(action, torch.tensor([[0.58358, -0.98661]]), atol=1e-5, rtol=0)
        assert float(log_prob) == pytest.approx(0.70564, abs=1e-4)
        assert default_target_entropy(box, "act_limit") == -2.0
        assert default_target_entropy(spaces.Box(0.0, 2.0, (2,), np.float32), "act_limit") == pytest.approx(
            -2 + 2 * math.log(2), abs=1e-6)

    def test_act_limit_needs_a_positive_high(self) -> None:
        with pytest.raises(ConfigError, match="act_limit"):
            make_actor(3, spaces.Box(-1.0, 0.0, (2,), np.float32), PolicyConfig(hidden_sizes=(8,)),
                       SACConfig(squash="act_limit"), 0, "p.toml")

    def test_auto_alpha_starts_at_one(self) -> None:
        """auto_alpha: log alpha = 0 (torch.zeros(1) in HARL) whatever ``alpha``; initial_alpha = 0.2 is harl's old start."""
        sac, _ = learner(0.0, alpha=0.2)
        assert float(sac.log_alpha.detach()) == 0.0 and float(sac.alpha) == 1.0
        team = OffPolicyActors([SquashedGaussianActor(3, BOX, (8,), "relu", False)], with_targets=False)
        critic = QCritic(4, [BOX], QCriticConfig(hidden_sizes=(8,)))
        old = SACLearner(0, team, critic, SACConfig(initial_alpha=0.2), -2.0)
        assert float(old.alpha) == pytest.approx(0.2)
