"""EPyMARL's n-step returns from V (``[returns] kind = "n_step_v"``), numbers by hand and against
EPyMARL's own expression (its ``nstep_returns`` with ``add_value_last_step``, written out here)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from harl.returns.n_step_v import NStepV, NStepVConfig, n_step_v_returns
from harl.returns.running_stats import RunningMeanStd


def epymarl_nstep(rewards: torch.Tensor, mask: torch.Tensor, values: torch.Tensor, n: int,
                  gamma: float) -> torch.Tensor:
    """EPyMARL's ``PPOLearner.nstep_returns`` (add_value_last_step = True) on ``(B, T)`` rewards and
    mask and ``(B, T + 1)`` values: the value of the slot after the batch's last step is added
    unmasked, every other value and reward masked."""
    batch, steps = rewards.shape
    out = torch.zeros(batch, steps)
    for start in range(steps):
        total = torch.zeros(batch)
        for step in range(n + 1):
            t = start + step
            if t >= steps:
                break
            if step == n:
                total += gamma**step * values[:, t] * mask[:, t]
            elif t == steps - 1:
                total += gamma**step * rewards[:, t] * mask[:, t]
                total += gamma ** (step + 1) * values[:, t + 1]
            else:
                total += gamma**step * rewards[:, t] * mask[:, t]
        out[:, start] = total
    return out


def seven_steps() -> dict[str, torch.Tensor]:
    """Two envs, T = 7: env 0 runs one episode through the whole rollout (cut by its end); env 1's
    episode terminates at step 3 and a new one fills steps 4-6."""
    rewards = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [1.0, 1.0, 1.0, 1.0, 9.0, 9.0, 9.0]]).T
    values = torch.tensor([[10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0],
                           [5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0]]).T
    terminated = torch.zeros(7, 2, dtype=torch.bool)
    terminated[3, 1] = True
    next_values = values[1:].clone()
    next_values[3, 1] = 100.0  # V of env 1's pre-reset state (what a truncation would bootstrap from)
    return {"rewards": rewards, "values": values, "next_values": next_values, "terminated": terminated,
            "truncated": torch.zeros(7, 2, dtype=torch.bool)}


def test_five_step_returns_by_hand() -> None:
    """gamma 0.5, n 5: full windows bootstrap from V(s_t+5), the rollout's end from V(s_7),
    a termination from nothing."""
    r = seven_steps()
    g = n_step_v_returns(r["rewards"], r["values"], r["next_values"], r["terminated"], r["truncated"], 0.5, 5)
    # env 0, t = 0: 1 + .5*2 + .25*3 + .125*4 + .0625*5 + .03125 * V(s_5) = 60
    assert g[0, 0].item() == pytest.approx(1 + 1 + 0.75 + 0.5 + 0.3125 + 1.875)
    # t = 3: 4 + .5*5 + .25*6 + .125*7, then the rollout ends: + .0625 * V(s_7) = 80
    assert g[3, 0].item() == pytest.approx(4 + 2.5 + 1.5 + 0.875 + 5.0)
    assert g[6, 0].item() == pytest.approx(7 + 0.5 * 80)
    # env 1 terminates at step 3: 1 + .5 + .25 + .125 from t = 0, no value after the end
    assert g[0, 1].item() == pytest.approx(1.875)
    assert g[2, 1].item() == pytest.approx(1.5)
    assert g[3, 1].item() == pytest.approx(1.0)


def test_a_truncation_bootstraps_from_the_state_reached() -> None:
    r = seven_steps()
    truncated = r["terminated"]
    g = n_step_v_returns(r["rewards"], r["values"], r["next_values"], torch.zeros_like(truncated), truncated, 0.5, 5)
    assert g[2, 1].item() == pytest.approx(1 + 0.5 * 1 + 0.25 * 100.0)


def test_equal_to_epymarls_expression_over_a_seven_step_masked_episode() -> None:
    """EPyMARL's batch of two episodes, 7 and 4 steps (the second masked from step 4): its returns
    equal harl's on a rollout where env 0's episode is cut by the rollout's end (EPyMARL's
    add_value_last_step at the longest episode's last step) and env 1's terminates at step 3,
    but for one difference, named in docs/algorithms.md: where a shorter episode's window reaches
    the batch's last slot (t >= T - n), EPyMARL adds g^(T - t) V(slot T) unmasked, the value of
    the padding after it; harl never bootstraps past a termination."""
    torch.manual_seed(0)
    rewards = torch.randn(7, 2)
    values = torch.randn(8, 2)
    terminated = torch.zeros(7, 2, dtype=torch.bool)
    terminated[3, 1] = True
    ours = n_step_v_returns(rewards, values, values[1:], terminated, torch.zeros_like(terminated), 0.99, 5)
    mask = torch.ones(2, 7)
    mask[1, 4:] = 0.0
    theirs = epymarl_nstep(rewards.T * mask, mask, values.T, 5, 0.99)
    torch.testing.assert_close(ours[:, 0], theirs[0])
    torch.testing.assert_close(ours[:2, 1], theirs[1, :2])  # steps 4-6 are EPyMARL's padding
    for t in (2, 3):
        assert (theirs[1, t] - ours[t, 1]).item() == pytest.approx(0.99 ** (7 - t) * values[7, 1].item(), abs=1e-6)


def test_one_step_is_td_zero_and_agents_broadcast() -> None:
    """n = 1: r + g V(s'); a trailing agent axis takes the env's ends."""
    rewards = torch.tensor([[[1.0, 2.0]], [[3.0, 4.0]]])  # (T=2, E=1, A=2)
    values = torch.tensor([[[1.0, 1.0]], [[2.0, 3.0]], [[5.0, 7.0]]])
    g = n_step_v_returns(rewards, values, values[1:], torch.zeros(2, 1, dtype=torch.bool),
                         torch.zeros(2, 1, dtype=torch.bool), 0.9, 1)
    torch.testing.assert_close(g, torch.tensor([[[1 + 0.9 * 2, 2 + 0.9 * 3]], [[3 + 0.9 * 5, 4 + 0.9 * 7]]]))


def test_running_mean_std_is_epymarls() -> None:
    """Two updates of EPyMARL's RunningMeanStd (count 1e-4, unbiased batch variances), by hand."""
    stats = RunningMeanStd((1,))
    first, second = torch.tensor([[1.0], [3.0]]), torch.tensor([[0.0], [0.0], [6.0]])
    mean, var, count = 0.0, 1.0, 1e-4
    for batch in (first, second):
        stats.update(batch)
        n, b_mean, b_var = batch.shape[0], batch.mean().item(), batch.var().item()
        delta, total = b_mean - mean, count + n
        mean, var = mean + delta * n / total, (var * count + b_var * n + delta**2 * count * n / total) / total
        count = total
    assert stats.mean.item() == pytest.approx(mean) and stats.var.item() == pytest.approx(var)
    assert stats.count == pytest.approx(count)
    assert stats.standardise(torch.tensor([7.0])).item() == pytest.approx((7.0 - mean) / var**0.5)


class Rollout:
    """What ``n_step_v`` reads of a rollout buffer (one env, two agents, T = 2, no ends)."""

    def __init__(self, rewards: torch.Tensor) -> None:
        self.rewards = rewards
        self.values = torch.zeros(3, 1, 2)
        self.terminated = torch.zeros(2, 1, dtype=torch.bool)
        self.truncated = torch.zeros(2, 1, dtype=torch.bool)
        self.got: Any = None

    @property
    def next_values(self) -> torch.Tensor:
        return self.values[1:]

    def critic_rewards(self) -> torch.Tensor:
        return self.rewards

    def set_targets(self, advantages: torch.Tensor, returns: torch.Tensor) -> None:
        self.got = (advantages, returns)


def test_standardised_rewards_per_agent_and_the_statistics_are_saved() -> None:
    """Each agent's column standardised by its own running statistics (a common reward: the same
    ones), updated with the rollout first; the statistics survive a state_dict round trip."""
    cfg = NStepVConfig(gamma=0.5, n_step=1, reward_norm=True)
    stage = NStepV(cfg, 2)
    rewards = torch.tensor([[[1.0, 1.0]], [[3.0, 3.0]]])
    stage.compute(Rollout(rewards))  # type: ignore[arg-type]
    again = Rollout(rewards)
    stage.compute(again)  # type: ignore[arg-type]
    stats = stage.reward_stats
    assert stats is not None and stats.count == pytest.approx(4 + 1e-4)
    expected = (rewards - stats.mean) / stats.var.sqrt()
    torch.testing.assert_close(again.got[1], expected)  # n = 1, V = 0: the standardised rewards
    restored = NStepV(cfg, 2)
    restored.load_state_dict(stage.state_dict())
    assert restored.reward_stats is not None
    torch.testing.assert_close(restored.reward_stats.mean, stats.mean)
    assert restored.reward_stats.count == stats.count
    assert NStepV(NStepVConfig(), 2).state_dict() == {}


def test_value_after_last_step_is_epymarls_for_episodes_as_long_as_the_batch() -> None:
    """EPyMARL's batch of two 4-step episodes, both terminated at its last slot: add_value_last_step
    bootstraps both from V(slot 4), their terminal observations' value; with
    ``value_after_last_step`` harl's returns equal these, and without it harl's add nothing there
    (g = 0.5, n = 2: from t = 2, 1 * r_2 + .5 * r_3 + .25 * V(s_4))."""
    rewards = torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 1.0, 8.0]]).T
    values = torch.tensor([[1.0, 1.0, 1.0, 1.0, 40.0], [2.0, 2.0, 2.0, 2.0, 80.0]]).T
    terminated = torch.zeros(4, 2, dtype=torch.bool)
    terminated[3] = True
    theirs = epymarl_nstep(rewards.T, torch.ones(2, 4), values.T, 2, 0.5)
    assert theirs[0, 2].item() == pytest.approx(3 + 0.5 * 4 + 0.25 * 40)
    rollout = Rollout(rewards)
    rollout.values, rollout.terminated, rollout.truncated = values, terminated, torch.zeros_like(terminated)
    NStepV(NStepVConfig(n_step=2, gamma=0.5, value_after_last_step=True), 1).compute(rollout)  # type: ignore[arg-type]
    torch.testing.assert_close(rollout.got[1], theirs.T)
    NStepV(NStepVConfig(n_step=2, gamma=0.5), 1).compute(rollout)  # type: ignore[arg-type]
    assert rollout.got[1][2, 0].item() == pytest.approx(3 + 0.5 * 4)
    assert rollout.got[1][3, 1].item() == pytest.approx(8.0)
