"""Convolutional encoders for image observations and states, in HARL's layouts.

Two layouts, as HARL builds them (PKU-MARL/HARL, harl/models/base/cnn.py and plain_cnn.py;
read for the facts, written here anew):

- ``CNNBase`` (on-policy actors and the V critic; HARL's ``CNNBase``/``CNNLayer``): one
  ``Conv2d(C, h0 // 2, kernel 3, stride 1)`` -> activation -> flatten -> ``Linear(.., h0)``
  -> activation, then ``Linear(h_{i-1}, h_i)`` -> activation for the other hidden sizes.
  Orthogonal weights with the activation's gain, zero biases.  It *replaces* the MLP base
  (no LayerNorm), so its output width is ``hidden_sizes[-1]``.
- ``PlainCNN`` (off-policy actors and Q critics; HARL's ``PlainCNN``): ``Conv2d(C, w // 4,
  3, 1)`` -> activation -> flatten -> ``Linear(.., w)`` -> activation with ``w =
  hidden_sizes[0]`` and PyTorch's default initialisation; the usual MLP follows on its
  ``w`` features (for a Q critic: the features and the actions, concatenated).

Both take the input flat ``(..., H*W*C)`` (as the buffers store it) or shaped, any dtype:
``ImageLayout.to_chw`` permutes HWC to CHW and scales uint8 by 1/255 on the network's device.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from harl.nets.entity import EntityEncoder
from harl.nets.image import ImageLayout
from harl.nets.mlp import ACTIVATIONS, MLP, activation_gain, init_linear

KERNEL, STRIDE = 3, 1
"""HARL's defaults (``kernel_size=3, stride=1``)."""


def conv_output(layout: ImageLayout, channels: int) -> int:
    """Flattened size of a ``KERNEL``/``STRIDE`` convolution's output with ``channels`` maps."""
    _, h, w = layout.chw
    return channels * ((h - KERNEL) // STRIDE + 1) * ((w - KERNEL) // STRIDE + 1)


class CNNBase(nn.Module):
    """HARL's on-policy CNN base: conv (h0 // 2 maps) -> flatten -> Linear stack; out width ``hidden_sizes[-1]``.

    ``extra_dim`` > 0: ``forward(x, extra)`` joins ``extra`` (an FP critic's one-hot agent
    ids, ``(..., A, extra_dim)``) to the flattened maps before the first Linear, so the
    convolution runs once per state, not once per agent copy.
    """

    def __init__(self, layout: ImageLayout, hidden_sizes: Sequence[int], activation: str,
                 extra_dim: int = 0) -> None:
        super().__init__()
        self.layout = layout
        act, gain = ACTIVATIONS[activation], activation_gain(activation)
        maps = hidden_sizes[0] // 2
        self.conv = nn.Conv2d(layout.chw[0], maps, KERNEL, STRIDE)
        nn.init.orthogonal_(self.conv.weight, gain=gain)
        assert self.conv.bias is not None  # Conv2d's bias=True
        nn.init.zeros_(self.conv.bias)
        self.conv_act = act()
        widths = [conv_output(layout, maps) + extra_dim, *hidden_sizes]
        layers: list[nn.Module] = []
        for a, b in zip(widths[:-1], widths[1:]):
            layers += [init_linear(nn.Linear(a, b), gain), act()]
        self.linears = nn.Sequential(*layers)
        self.out_dim = hidden_sizes[-1]

    def maps(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., image)`` -> ``(..., flattened feature maps)``."""
        lead = self.layout.lead(x)
        return self.conv_act(self.conv(self.layout.to_chw(x))).reshape(*lead, -1)

    def forward(self, x: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
        flat = self.maps(x)
        if extra is not None:
            flat = torch.cat([flat.unsqueeze(-2).expand(*extra.shape[:-1], flat.shape[-1]), extra], -1)
        return self.linears(flat)


class PlainCNN(nn.Module):
    """HARL's off-policy feature extractor: conv (width // 4 maps) -> flatten -> Linear(width) -> activation."""

    def __init__(self, layout: ImageLayout, width: int, activation: nn.Module) -> None:
        super().__init__()
        self.layout = layout
        maps = width // 4
        self.net = nn.Sequential(nn.Conv2d(layout.chw[0], maps, KERNEL, STRIDE), activation, nn.Flatten(),
                                 nn.Linear(conv_output(layout, maps), width), activation)
        self.out_dim = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = self.layout.lead(x)
        return self.net(self.layout.to_chw(x)).reshape(*lead, self.out_dim)


class ImageMLP(nn.Module):
    """``encoder = "mlp"`` on a (small) image: flatten, scale, then the usual MLP."""

    def __init__(self, layout: ImageLayout, mlp: nn.Module, out_dim: int) -> None:
        super().__init__()
        self.layout = layout
        self.mlp = mlp
        self.out_dim = out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.layout.flat(x))


OnPolicyBase = CNNBase | MLP | ImageMLP | EntityEncoder
"""What reads an on-policy actor's observation (``out_dim`` wide; ``EntityEncoder``: ``harl.nets.entity``)."""


def on_policy_base(layout: ImageLayout | None, encoder: str, in_dim: int, hidden_sizes: Sequence[int],
                   activation: str, input_norm: bool, layer_norm: bool = True) -> OnPolicyBase:
    """An actor's base (``out_dim`` wide): HARL's CNN, or the MLP (on an image: flattened and scaled);
    ``layer_norm``: the MLP's LayerNorm after each hidden layer."""
    if encoder == "cnn":
        assert layout is not None
        return CNNBase(layout, hidden_sizes, activation)
    mlp = MLP(in_dim, hidden_sizes, activation, input_norm, layer_norm)
    return mlp if layout is None else ImageMLP(layout, mlp, mlp.out_dim)
