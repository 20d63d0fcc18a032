"""Running normalisation of value targets (HARL's ValueNorm, in our words).

A debiased exponential moving average of the targets' mean and mean square.  With
beta = 0.99999 it adapts slowly, so the critic's output scale drifts gently while
returns grow during training.
"""

from __future__ import annotations

import torch
from torch import nn


class ValueNorm(nn.Module):
    """Normalise targets for the critic; denormalise its outputs for GAE and advantages."""

    # registered buffers (register_buffer in __init__)
    running_mean: torch.Tensor
    running_mean_sq: torch.Tensor
    debias: torch.Tensor

    def __init__(self, beta: float = 0.99999, epsilon: float = 1e-5, min_var: float = 1e-2) -> None:
        super().__init__()
        self.beta = beta
        self.epsilon = epsilon
        self.min_var = min_var
        self.register_buffer("running_mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("running_mean_sq", torch.zeros((), dtype=torch.float64))
        self.register_buffer("debias", torch.zeros((), dtype=torch.float64))

    def stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        debias = self.debias.clamp(min=self.epsilon)
        mean = self.running_mean / debias
        var = (self.running_mean_sq / debias - mean**2).clamp(min=self.min_var)
        return mean, var

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        x = x.detach().double()
        self.running_mean.mul_(self.beta).add_((1 - self.beta) * x.mean())
        self.running_mean_sq.mul_(self.beta).add_((1 - self.beta) * (x**2).mean())
        self.debias.mul_(self.beta).add_(1 - self.beta)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        mean, var = self.stats()
        return ((x - mean.to(x.dtype)) / var.sqrt().to(x.dtype))

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        mean, var = self.stats()
        return x * var.sqrt().to(x.dtype) + mean.to(x.dtype)
