"""PQN's formulas pinned against values worked by hand from JaxMARL's expressions
(baselines/QLearning/pqn_vdn_ff.py at c793d09): the lambda-returns (``_compute_targets``,
:277-303), the VDN and IQL losses (:348-357), the epsilon schedule (optax's ``linear_schedule``,
:99-103) and the learning-rate decay (:173-181)."""

from __future__ import annotations

import pytest
import torch

from harl.collect.pqn import epsilon_at
from harl.returns.q_lambda import QLambda, QLambdaConfig, q_lambda
from harl.update.mixers import NoMixer, VDNMixer
from harl.update.pqn import lr_at, regression_loss


def col(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32).view(-1, 1)


class TestLambdaReturns:
    def test_a_rollout_without_ends(self) -> None:
        """gamma 0.9, lambda 0.5, r = 1, 2, 3, max Q after each step 10, 20, 30:
        G2 = 3 + 0.9*30 = 30; G1 = 2 + 0.9*20 + 0.45*(30 - 20) = 24.5; G0 = 1 + 0.9*10 + 0.45*(24.5 - 10) = 16.525."""
        got = q_lambda(col(1, 2, 3), col(0, 0, 0), col(10, 20, 30), 0.9, 0.5)
        assert got.view(-1).tolist() == pytest.approx([16.525, 24.5, 30.0])

    def test_an_episode_end_cuts_the_return(self) -> None:
        """The episode ends at step 1: G1 = r1 = 2 (JaxMARL's ``(1 - done) * G + done * reward``), and
        G0 = 1 + 0.9*10 + 0.45*(2 - 10) = 6.4."""
        got = q_lambda(col(1, 2, 3), col(0, 1, 0), col(10, 20, 30), 0.9, 0.5)
        assert got.view(-1).tolist() == pytest.approx([6.4, 2.0, 30.0])

    def test_an_end_at_the_last_step_drops_the_bootstrap(self) -> None:
        got = q_lambda(col(1, 2, 3), col(0, 0, 1), col(10, 20, 30), 0.9, 0.5)
        # G2 = 3; G1 = 2 + 18 + 0.45*(3 - 20) = 12.35; G0 = 1 + 9 + 0.45*(12.35 - 10) = 11.0575
        assert got.view(-1).tolist() == pytest.approx([11.0575, 12.35, 3.0])

    def test_lambda_zero_is_one_step_q_learning(self) -> None:
        got = q_lambda(col(1, 2, 3), col(0, 0, 0), col(10, 20, 30), 0.9, 0.0)
        assert got.view(-1).tolist() == pytest.approx([10.0, 20.0, 30.0])

    def q_max(self) -> torch.Tensor:
        """Per-agent max Qs (4 rows: each step's observation and the one after the last), 1 env, 2 agents;
        the sums after each step are 10, 20, 30."""
        return torch.tensor([[1.0, 2.0], [4.0, 6.0], [15.0, 5.0], [10.0, 20.0]]).view(4, 1, 2)

    def rewards(self) -> torch.Tensor:
        """(T, N, A): the team's reward held by both agents (torch MPE's team_reward, SMAX)."""
        return torch.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]).view(3, 1, 2)

    def test_vdn_bootstraps_from_the_sum_over_agents(self) -> None:
        stage = QLambda(QLambdaConfig(gamma=0.9, lam=0.5), VDNMixer())
        got = stage.targets(self.rewards(), torch.zeros(3, 1), self.q_max())
        assert got.shape == (3, 1, 1)
        assert got.view(-1).tolist() == pytest.approx([16.525, 24.5, 30.0])

    def test_iql_bootstraps_each_agent_from_its_own_max(self) -> None:
        """Agent 0's max Qs after each step: 4, 15, 10: G2 = 3 + 9 = 12; G1 = 2 + 13.5 + 0.45*(12 - 15)
        = 14.15; G0 = 1 + 3.6 + 0.45*(14.15 - 4) = 9.1675.  Agent 1's: 6, 5, 20: G2 = 21; G1 = 2 + 4.5
        + 0.45*(21 - 5) = 13.7; G0 = 1 + 5.4 + 0.45*(13.7 - 6) = 9.865."""
        stage = QLambda(QLambdaConfig(gamma=0.9, lam=0.5), NoMixer())
        got = stage.targets(self.rewards(), torch.zeros(3, 1), self.q_max())
        assert got.shape == (3, 1, 2)
        assert got[:, 0, 0].tolist() == pytest.approx([9.1675, 14.15, 12.0])
        assert got[:, 0, 1].tolist() == pytest.approx([9.865, 13.7, 21.0])

    def test_reward_scale_and_the_team_reward(self) -> None:
        """REW_SCALE 10 on r = 1, 2, 3: G2 = 30 + 27 = 57; G1 = 20 + 18 + 0.45*(57 - 20) = 54.65;
        G0 = 10 + 9 + 0.45*(54.65 - 10) = 39.0925.  ``sum`` adds the agents' rewards (JaxMARL's MPE
        ``__all__``): 2, 4, 6 at scale 5 is the same."""
        scaled = QLambda(QLambdaConfig(gamma=0.9, lam=0.5, reward_scale=10.0), VDNMixer())
        got = scaled.targets(self.rewards(), torch.zeros(3, 1), self.q_max())
        assert got.view(-1).tolist() == pytest.approx([39.0925, 54.65, 57.0])
        summed = QLambda(QLambdaConfig(gamma=0.9, lam=0.5, reward_scale=5.0, team_reward="sum"), VDNMixer())
        assert summed.targets(self.rewards(), torch.zeros(3, 1), self.q_max()).view(-1).tolist() == pytest.approx(
            [39.0925, 54.65, 57.0])


class TestLoss:
    def test_vdn_regresses_the_sum_of_the_chosen_qs(self) -> None:
        """Chosen Qs (1, 2) and (3, 4) sum to 3 and 7 against targets 4 and 5: errors -1 and 2, loss
        (1 + 4) / 2 = 2.5: a full mean square, not half of one (``jnp.mean((q - target) ** 2)``)."""
        chosen = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
        assert float(regression_loss(chosen, torch.tensor([[4.0], [5.0]]), VDNMixer())) == pytest.approx(2.5)

    def test_iql_regresses_each_agent_and_averages_over_agents_too(self) -> None:
        chosen = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
        targets = torch.tensor([[2.0, 2.0], [2.0, 6.0]])  # errors -1, 0, 1, -2
        assert float(regression_loss(chosen, targets, NoMixer())) == pytest.approx(1.5)


class TestSchedules:
    def test_epsilon_falls_over_a_tenth_of_the_updates(self) -> None:
        """MPE: NUM_UPDATES = 10M // 16 // 256 = 2,441, EPS_DECAY 0.1: optax's transition over 244.1 updates."""
        decay = 0.1 * (10_000_000 // 16 // 256)
        assert epsilon_at(0, 1.0, 0.1, decay) == 1.0
        assert epsilon_at(122, 1.0, 0.1, decay) == pytest.approx(1.0 - 0.9 * 122 / 244.1)  # 0.55018...
        assert epsilon_at(244, 1.0, 0.1, decay) == pytest.approx(0.1003687)
        assert epsilon_at(245, 1.0, 0.1, decay) == pytest.approx(0.1)
        assert epsilon_at(10_000, 1.0, 0.1, decay) == pytest.approx(0.1)

    def test_a_schedule_of_no_steps_stays_at_its_start(self) -> None:
        """optax's ``linear_schedule`` with ``transition_steps <= 0`` is constant at ``init_value``."""
        assert epsilon_at(50, 1.0, 0.1, 0.0) == 1.0

    def test_the_learning_rate_decays_linearly_to_1e_10(self) -> None:
        assert lr_at(0, 5e-4, 100) == 5e-4
        assert lr_at(50, 5e-4, 100) == pytest.approx(2.5000005e-4)
        assert lr_at(100, 5e-4, 100) == pytest.approx(1e-10)
        assert lr_at(500, 5e-4, 100) == pytest.approx(1e-10)
        assert lr_at(50, 5e-4, 0) == 5e-4  # LR_LINEAR_DECAY false
