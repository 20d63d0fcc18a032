"""Plain networks of the off-policy family (HARL's off-policy models): ``Linear -> activation``
stacks with PyTorch's default initialisation, their image encoders, and the masked argmax that
greedy actors and critics share."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.nn import functional as F

from harl.nets.cnn import ImageMLP, PlainCNN
from harl.nets.entity import EntityEncoder, require_layout
from harl.nets.image import choose_encoder, image_layout, is_image
from harl.nets.mlp import ACTIVATIONS

OFF_POLICY_ACTIVATIONS = {**ACTIVATIONS, "hardswish": nn.Hardswish, "identity": nn.Identity}


class EdgeLinear(nn.Linear):
    """A network's first or last ``Linear``: fp32 even under bf16 autocast.

    Raw inputs (angles, velocities, actions) and outputs (values, means) keep fp32 precision
    and only the hidden layers, which hold nearly all the FLOPs, run in bf16.  Without
    autocast this is ``nn.Linear``.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.is_autocast_enabled(x.device.type):
            return super().forward(x)
        with torch.autocast(x.device.type, enabled=False):
            return F.linear(x.float(), self.weight, self.bias)


def plain_mlp(sizes: Sequence[int], activation: str, final_activation: str | None = None,
              input_norm: bool = False) -> nn.Sequential:
    """``Linear -> activation`` per layer; the last layer gets ``final_activation`` (none by default)."""
    layers: list[nn.Module] = [nn.LayerNorm(sizes[0])] if input_norm else []
    for j in range(len(sizes) - 1):
        edge = j == 0 or j == len(sizes) - 2
        layers.append((EdgeLinear if edge else nn.Linear)(sizes[j], sizes[j + 1]))
        name = activation if j < len(sizes) - 2 else final_activation
        if name is not None:
            layers.append(OFF_POLICY_ACTIVATIONS[name]())
    return nn.Sequential(*layers)


def off_policy_encoder(space: spaces.Box, encoder: str, channel_order: str, width: int, activation: str,
                       table: str, source: str) -> tuple[nn.Module | None, int]:
    """(what reads the input first, its output width): HARL's ``PlainCNN`` (``width`` features) for
    an image under ``encoder = "cnn"``, a flatten-and-scale for an image under ``"mlp"``, the entities'
    attention (``width`` features) under ``"entity"``, else None."""
    kind = choose_encoder(space, encoder, table, source)
    if kind == "entity":
        entities = EntityEncoder(require_layout(space, table, source), [width], activation)
        return entities, entities.out_dim
    if not is_image(space):
        return None, int(np.prod(space.shape))
    layout = image_layout(space, channel_order, table, source)
    if kind == "cnn":
        return PlainCNN(layout, width, OFF_POLICY_ACTIVATIONS[activation]()), width
    return ImageMLP(layout, nn.Identity(), layout.size), layout.size


def prefixed(encoder: nn.Module | None, net: nn.Module) -> nn.Module:
    """``net`` reading ``encoder``'s output (``net`` itself without an encoder)."""
    return net if encoder is None else nn.Sequential(encoder, net)


def masked_argmax(values: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
    """(B,) argmax over the last axis among available entries."""
    if avail is not None:
        values = values.masked_fill(avail == 0, -math.inf)
    return values.argmax(-1)
