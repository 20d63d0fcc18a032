"""ValueNorm: debiased running statistics and exact inverse transforms."""

from __future__ import annotations

import torch

from harl.returns.value_norm import ValueNorm


def test_first_update_gives_the_batch_statistics() -> None:
    """After one update the debiased mean/var equal the batch's own (up to the variance floor)."""
    norm = ValueNorm()
    x = torch.tensor([1.0, 3.0, 5.0, 7.0])
    norm.update(x)
    mean, var = norm.stats()
    assert abs(mean.item() - 4.0) < 1e-6
    assert abs(var.item() - 5.0) < 1e-4


def test_normalize_and_denormalize_are_inverse() -> None:
    """denormalize(normalize(x)) == x, and normalised targets have ~zero mean, unit std."""
    norm = ValueNorm()
    x = torch.randn(1000, generator=torch.Generator().manual_seed(0)) * 30 + 100
    norm.update(x)
    torch.testing.assert_close(norm.denormalize(norm.normalize(x)), x)
    y = norm.normalize(x)
    assert abs(y.mean().item()) < 1e-3 and abs(y.std().item() - 1) < 1e-2


def test_variance_floor() -> None:
    """Constant targets do not divide by zero: the variance is floored at 1e-2."""
    norm = ValueNorm()
    norm.update(torch.full((10,), 2.0))
    assert norm.stats()[1].item() == 1e-2
