"""Sable's loss, each term against numbers computed by hand from Mava's expressions
(mava/systems/sable/anakin/rec_sable.py:221-251, ff_sable.py:205-235)."""

from __future__ import annotations

import math

import pytest
import torch

from harl.update.objectives.sable import sable_policy_loss, standardize
from harl.update.sable_values import sable_value_loss


def test_advantages_standardised_with_the_population_std() -> None:
    """(gae - gae.mean()) / (gae.std() + 1e-8), jnp.std dividing by n: [1, 2, 3, 6] has mean 3,
    variance (4 + 1 + 0 + 9) / 4 = 3.5."""
    gae = torch.tensor([[1.0, 2.0], [3.0, 6.0]])
    std = math.sqrt(3.5)
    want = [[-2 / (std + 1e-8), -1 / (std + 1e-8)], [0.0, 3 / (std + 1e-8)]]
    assert standardize(gae).flatten().tolist() == pytest.approx(sum(want, []), abs=1e-7)


def test_clipped_surrogate_is_a_plain_mean_over_steps_and_agents() -> None:
    """ratios e^0.5 (clipped to 1.2 for A > 0), e^-0.5 (clipped to 0.8 for A < 0: the min keeps the
    clipped 0.8 * -1 = -0.8), 1 and e^0.1 (inside the clip); the loss is minus the mean of
    min(r A, clip(r) A) over the four (step, agent) pairs."""
    log_probs = torch.tensor([[0.5, -0.5], [0.0, 0.1]])
    old = torch.zeros(2, 2)
    adv = torch.tensor([[2.0, -1.0], [0.5, -3.0]])
    terms = [min(math.exp(0.5) * 2, 1.2 * 2),           # 2.4
             min(math.exp(-0.5) * -1, 0.8 * -1),         # -0.8 (min of -0.607 and -0.8)
             min(1.0 * 0.5, 1.0 * 0.5),                  # 0.5
             min(math.exp(0.1) * -3, math.exp(0.1) * -3)]  # e^0.1 inside [0.8, 1.2]
    loss, ratio = sable_policy_loss(log_probs, old, adv, 0.2)
    assert float(loss) == pytest.approx(-sum(terms) / 4, rel=1e-6)
    assert ratio.flatten().tolist() == pytest.approx([math.exp(0.5), math.exp(-0.5), 1.0, math.exp(0.1)], rel=1e-6)


def test_value_loss_is_half_the_mean_of_the_larger_squared_error() -> None:
    """v_clipped = v_old + clip(v - v_old, -0.2, 0.2); 0.5 * mean(max((v - R)^2, (v_clipped - R)^2)).
    Rows: v 1.0 / old 0.5 / R 0.0 -> clipped 0.7, max(1.0, 0.49) = 1.0; v 0.0 / old 0.5 / R 1.0 ->
    clipped 0.3, max(1.0, 0.49) = 1.0; v 2.0 / old 1.9 / R 1.0 -> clipped 2.0, 1.0; v 0.9 / old 1.5 /
    R 1.0 -> clipped 1.3, max(0.01, 0.09) = 0.09."""
    new = torch.tensor([[1.0, 0.0], [2.0, 0.9]])
    old = torch.tensor([[0.5, 0.5], [1.9, 1.5]])
    target = torch.tensor([[0.0, 1.0], [1.0, 1.0]])
    assert float(sable_value_loss(new, old, target, 0.2)) == pytest.approx(0.5 * (1.0 + 1.0 + 1.0 + 0.09) / 4)
    unclipped = 0.5 * (1.0 + 1.0 + 1.0 + 0.01) / 4
    assert float(sable_value_loss(new, old, target, None)) == pytest.approx(unclipped)
