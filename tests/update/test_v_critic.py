"""Value loss (clipped, Huber) and the critic's EP/FP inputs."""

from __future__ import annotations

import torch

from harl.update.v_critic import VCritic, VCriticConfig, huber, value_loss


def test_huber_is_quadratic_then_linear() -> None:
    """0.5 e^2 up to delta, delta (|e| - delta/2) beyond; delta 0 means squared error."""
    e = torch.tensor([0.5, -2.0, 12.0])
    torch.testing.assert_close(huber(e, 10.0), torch.tensor([0.125, 2.0, 10 * (12 - 5.0)]))
    torch.testing.assert_close(huber(e, 0.0), 0.5 * e**2)


def test_value_clipping_takes_the_pessimistic_loss() -> None:
    """Old 0, new 1, target 2, clip 0.2: the clipped prediction 0.2 has the larger loss and wins."""
    new, old, target = torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([2.0])
    plain = value_loss(new, old, target, None, 0.0)
    clipped = value_loss(new, old, target, 0.2, 0.0)
    assert plain.item() == 0.5 * 1.0**2
    assert abs(clipped.item() - 0.5 * 1.8**2) < 1e-6
    # When the clipped prediction is closer to the target, the plain loss is kept.
    assert abs(value_loss(torch.tensor([1.0]), old, torch.tensor([0.1]), 0.2, 0.0).item() - 0.5 * 0.9**2) < 1e-6


def test_fp_state_gives_one_value_per_agent() -> None:
    """FP: the critic sees the state plus each agent's one-hot id and returns (batch, agents)."""
    critic = VCritic(5, 3, VCriticConfig(state_type="FP", value_norm=False))
    state = torch.randn(7, 5)
    assert critic.inputs(state).shape == (7, 3, 8)
    assert critic.value(state).shape == (7, 3)
    ep = VCritic(5, 3, VCriticConfig(state_type="EP"))
    assert ep.value(state).shape == (7,)
