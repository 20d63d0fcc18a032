"""Feed-forward building blocks shared by actors and critics."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "leaky_relu": nn.LeakyReLU, "elu": nn.ELU}


def init_linear(layer: nn.Linear, gain: float) -> nn.Linear:
    """Orthogonal weights, zero bias: the initialisation HARL's networks use."""
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
    return layer


class MLP(nn.Module):
    """Input LayerNorm (optional), then Linear -> activation -> LayerNorm per hidden layer.

    The per-layer LayerNorm follows HARL's MLP base; it keeps PPO stable across very
    different observation scales without hand-tuned observation normalisation.
    """

    def __init__(self, in_dim: int, hidden_sizes: Sequence[int], activation: str = "relu",
                 input_norm: bool = True) -> None:
        super().__init__()
        act = ACTIVATIONS[activation]
        gain = nn.init.calculate_gain("leaky_relu" if activation == "elu" else activation)
        layers: list[nn.Module] = [nn.LayerNorm(in_dim)] if input_norm else []
        width = in_dim
        for size in hidden_sizes:
            layers += [init_linear(nn.Linear(width, size), gain), act(), nn.LayerNorm(size)]
            width = size
        self.body = nn.Sequential(*layers)
        self.out_dim = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)
