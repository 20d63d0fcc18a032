"""HASAC's critic temperature: HARL's separate alpha_c, its update and its use in the soft target."""

from __future__ import annotations

import math

import pytest
import torch
from gymnasium import spaces

from harl.buffers.replay import ReplayBatch
from harl.policy.off_policy import CategoricalActor, OffPolicyActors
from harl.update.objectives.sac import SACConfig, make_learner
from harl.update.objectives.sac_temperature import CriticTemperature, critic_alpha_loss
from harl.update.q_critic import QCritic, QCriticConfig

DISCRETE = spaces.Discrete(3)


def test_critic_alpha_loss_hand_example() -> None:
    """HARL's update_alpha: -mean[log a_c (sum_i log pi_i + sum_i target_i)].
    log pi_0 = [-1, -3], log pi_1 = [-2, -2], target -4: joint + target = [-7, -9];
    loss = -mean(log a_c * [-7, -9]) = 8 log a_c, gradient 8."""
    log_alpha = torch.zeros((), requires_grad=True)
    critic_alpha_loss(log_alpha, [torch.tensor([-1.0, -3.0]), torch.tensor([-2.0, -2.0])], -4.0).backward()
    assert log_alpha.grad.item() == pytest.approx(8.0)


def test_steps_once_all_agents_reported() -> None:
    """Agent 0's report alone changes nothing; with agent 1's, one Adam step of size lr against the
    gradient's sign: log a_c = 0 - 0.1, a_c = exp(-0.1) = 0.904837."""
    temp = CriticTemperature(2, 1.0, 0.1, -4.0, torch.device("cpu"))
    temp.observe(0, torch.tensor([-1.0, -3.0]))
    assert float(temp.alpha) == 1.0
    temp.observe(1, torch.tensor([-2.0, -2.0]))
    assert float(temp.alpha) == pytest.approx(0.904837, abs=1e-6)


def test_fixed_alpha_keeps_the_critic_temperature() -> None:
    """Without auto_alpha HARL's critic uses the fixed ``alpha``."""
    temp = CriticTemperature(1, 0.3, None, 0.0, torch.device("cpu"))
    temp.observe(0, torch.tensor([-5.0]))
    assert float(temp.alpha) == pytest.approx(0.3)


def team(config: SACConfig) -> tuple[list, ReplayBatch]:
    torch.manual_seed(0)
    actors = OffPolicyActors([CategoricalActor(2, DISCRETE, (8,), "relu", False, 0.01) for _ in range(2)],
                           with_targets=False)
    critic = QCritic(3, [DISCRETE] * 2, QCriticConfig(hidden_sizes=(8,)))
    shared: dict = {}  # one team: its learners share the critic's temperature
    learners = [make_learner(i, actors, critic, config, DISCRETE, shared) for i in range(2)]
    n = 8
    batch = ReplayBatch(state=torch.randn(n, 3), obs=[torch.randn(n, 2)] * 2, actions=[torch.zeros(n, 1)] * 2,
                        avail=[None] * 2, active=torch.ones(n, 2), returns=torch.zeros(n, 2),
                        discount=torch.ones(n), steps=torch.ones(n, dtype=torch.long),
                        next_state=torch.randn(n, 3), next_obs=[torch.randn(n, 2)] * 2, next_avail=[None] * 2)
    return learners, batch


@pytest.mark.parametrize(("mode", "expected"), [("separate", 1.0), ("agents", math.exp(-1.0))])
def test_soft_target_penalty_uses_the_chosen_temperature(mode: str, expected: float) -> None:
    """The penalty next_action hands the critic is alpha * log pi with alpha_c (separate: shared, 1 at
    the start) or the agent's own alpha (here set to exp(-1))."""
    learners, batch = team(SACConfig(critic_alpha=mode))
    shared = learners[0].critic_temp
    assert (shared is not None and shared is learners[1].critic_temp) == (mode == "separate")
    with torch.no_grad():
        learners[0].log_alpha.fill_(-1.0)
    torch.manual_seed(1)
    _, penalty = learners[0].next_action(batch)
    torch.manual_seed(1)
    _, log_prob = learners[0].actor.rsample(batch.next_obs[0])
    torch.testing.assert_close(penalty, expected * log_prob)


def test_the_team_round_updates_and_checkpoints_the_critic_temperature() -> None:
    """Discrete targets 0 + 0, log pi_i ~ -ln 3 < 0: the gradient -mean(sum_i log pi_i) ~ 2.2 > 0, so
    after both agents' updates one Adam step gives log a_c = -alpha_lr = -0.01; agent 0's state
    dict carries it."""
    learners, batch = team(SACConfig(alpha_lr=0.01))
    actions = [learner.initial_action(batch) for learner in learners]
    for learner in learners:
        learner.update(batch, list(actions))
    temp = learners[0].critic_temp
    assert float(temp.log_alpha.detach()) == pytest.approx(-0.01, abs=1e-6)
    saved = learners[0].state_dict()
    with torch.no_grad():
        temp.log_alpha.fill_(0.5)
    learners[0].load_state_dict(saved)
    assert float(temp.log_alpha.detach()) == pytest.approx(-0.01, abs=1e-6)
