"""The PPO objective on hand-computed examples, and the ratio aggregation."""

from __future__ import annotations

import math

import pytest
import torch
from gymnasium import spaces

from harl.buffers.rollout import AgentBatch
from harl.policy.on_policy import Actor, PolicyConfig
from harl.update.common import aggregate_ratio, ratio_aggregation
from harl.update.objectives.ppo import PPOConfig, ppo_loss
from harl.update.objectives.surrogate import SurrogateLearner


def test_clipped_surrogate_hand_example() -> None:
    """Four samples, clip 0.2: min(rA, clip(r)A), weighted by the factor, averaged over active ones."""
    ratio = torch.tensor([[1.5], [0.5], [1.1], [2.0]])
    adv = torch.tensor([[1.0], [-2.0], [3.0], [5.0]])
    factor = torch.tensor([[1.0], [2.0], [0.5], [1.0]])
    active = torch.tensor([[1.0], [1.0], [1.0], [0.0]])  # the last sample is masked out
    # sample 0: min(1.5, 1.2) = 1.2;  sample 1: min(-1.0, -1.6) = -1.6, x2 = -3.2
    # sample 2: min(3.3, 3.3) = 3.3, x0.5 = 1.65
    expected = -(1.2 - 3.2 + 1.65) / 3
    loss = ppo_loss(ratio, adv, factor, active, clip=0.2)
    assert math.isclose(loss.item(), expected, rel_tol=1e-6)


def test_ratio_aggregation_prod_and_mean() -> None:
    """prod multiplies per-dimension ratios (joint likelihood); mean averages them."""
    log_ratio = torch.log(torch.tensor([[2.0, 0.25, 4.0]]))
    assert math.isclose(aggregate_ratio(log_ratio, "prod").item(), 2.0, rel_tol=1e-6)
    assert math.isclose(aggregate_ratio(log_ratio, "mean").item(), (2 + 0.25 + 4) / 3, rel_tol=1e-6)


def test_gradient_vanishes_outside_the_clip_range() -> None:
    """A ratio above 1 + clip with positive advantage gets no gradient (the clipped branch is active)."""
    ratio = torch.tensor([[1.5]], requires_grad=True)
    ppo_loss(ratio, torch.ones(1, 1), torch.ones(1, 1), torch.ones(1, 1), 0.2).backward()
    assert ratio.grad.item() == 0.0


def test_multidiscrete_mean_is_the_joint_ratio() -> None:
    """HARL's ACTLayer sums a MultiDiscrete's sub-action log-probs into one column, so "mean" over it is
    exp(0.2 - 0.1) = 1.1051709, not the per-sub-action mean (e^0.2 + e^-0.1) / 2 = 1.0631222; a Box keeps
    the mean of its per-dimension ratios."""
    torch.manual_seed(0)
    actor = Actor(3, spaces.MultiDiscrete([3, 2]), PolicyConfig(hidden_sizes=(8,)))
    learner = SurrogateLearner(actor, PPOConfig(action_aggregation="mean"), torch.Generator(), ppo_loss)
    obs = torch.randn(1, 3)
    actions = torch.tensor([[2.0, 1.0]])
    with torch.no_grad():
        log_probs, _ = actor.evaluate(obs, actions, None, None, None)
    batch = AgentBatch(obs=obs, actions=actions, old_log_probs=log_probs - torch.tensor([[0.2, -0.1]]), avail=None,
                       active=torch.ones(1, 1), advantages=torch.ones(1, 1))
    assert learner.ratio(batch).item() == pytest.approx(1.1051709, abs=1e-6)
    assert ratio_aggregation(Actor(3, spaces.Box(-1, 1, (2,)), PolicyConfig(hidden_sizes=(8,))), "mean") == "mean"
