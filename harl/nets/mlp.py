"""Feed-forward building blocks shared by actors and critics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "leaky_relu": nn.LeakyReLU, "elu": nn.ELU}
GAIN_NONLINEARITY: dict[str, Literal["relu", "tanh", "leaky_relu"]] = {
    "relu": "relu", "tanh": "tanh", "leaky_relu": "leaky_relu", "elu": "leaky_relu"}
"""Activation -> the nonlinearity whose ``nn.init.calculate_gain`` initialises its layers
(HARL takes leaky_relu's gain for elu)."""


def activation_gain(activation: str) -> float:
    """The orthogonal-init gain of layers followed by ``activation`` (one of ``ACTIVATIONS``)."""
    return nn.init.calculate_gain(GAIN_NONLINEARITY[activation])


def init_linear(layer: nn.Linear, gain: float) -> nn.Linear:
    """Orthogonal weights, zero bias: the initialisation HARL's networks use."""
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
    return layer


class MLP(nn.Module):
    """Input LayerNorm (optional), then Linear -> activation -> LayerNorm per hidden layer.

    The per-layer LayerNorm follows HARL's MLP base; it keeps PPO stable across very
    different observation scales without hand-tuned observation normalisation.
    ``layer_norm = False`` leaves it out: plain ``Linear -> activation`` (EPyMARL's networks).
    """

    def __init__(self, in_dim: int, hidden_sizes: Sequence[int], activation: str = "relu",
                 input_norm: bool = True, layer_norm: bool = True) -> None:
        super().__init__()
        act = ACTIVATIONS[activation]
        gain = activation_gain(activation)
        layers: list[nn.Module] = [nn.LayerNorm(in_dim)] if input_norm else []
        width = in_dim
        for size in hidden_sizes:
            layers += [init_linear(nn.Linear(width, size), gain), act()]
            if layer_norm:
                layers.append(nn.LayerNorm(size))
            width = size
        self.body = nn.Sequential(*layers)
        self.out_dim = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class GRULayer(nn.Module):
    """A one-layer GRU over time whose state is zeroed where an episode starts, then LayerNorm.

    ``forward(x (L, B, F), h0 (B, H), starts (L, B))`` returns the normalised outputs
    ``(L, B, H)`` and the last raw state ``(B, H)``.  Before step ``t`` the state of every
    sequence with ``starts[t] = 1`` is reset to zero, so a sequence may run across an
    episode boundary.  The sequence is cut only where some state resets, and each piece
    goes through cuDNN/``nn.GRU`` in one call (HARL's RNN layer does the same).
    ``norm = False``: no LayerNorm on the outputs (``self.norm`` is the identity; EPyMARL's agents).
    """

    def __init__(self, in_dim: int, hidden_dim: int, norm: bool = True) -> None:
        super().__init__()
        self.gru = nn.GRU(in_dim, hidden_dim)
        for name, param in self.gru.named_parameters():
            if name.startswith("weight"):
                nn.init.orthogonal_(param)
            else:
                nn.init.zeros_(param)
        self.norm: nn.Module = nn.LayerNorm(hidden_dim) if norm else nn.Identity()
        self.hidden_dim = hidden_dim

    def forward(self, x: torch.Tensor, h0: torch.Tensor, starts: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        keep = 1.0 - starts.to(x.dtype)
        cuts = [0, *(torch.nonzero((starts[1:] > 0).any(-1)).view(-1) + 1).tolist(), x.shape[0]]
        h = h0.unsqueeze(0)
        outputs = []
        for begin, end in zip(cuts[:-1], cuts[1:]):
            h = h * keep[begin].view(1, -1, 1)
            out, h = self.gru(x[begin:end].contiguous(), h.contiguous())
            outputs.append(out)
        return self.norm(torch.cat(outputs)), h.squeeze(0)


INITS = ("orthogonal", "torch")
"""How the on-policy networks start: HARL's orthogonal weights (gain per activation, zero
biases), or PyTorch's own default initialisation of each layer (EPyMARL's networks)."""


def torch_default_init(module: nn.Module) -> nn.Module:
    """Every ``Linear`` and ``GRU`` inside ``module`` back to PyTorch's default initialisation."""
    for layer in module.modules():
        if isinstance(layer, (nn.Linear, nn.GRU)):
            layer.reset_parameters()
    return module
