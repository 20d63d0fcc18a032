"""Image observations: which encoder reads a space, its channel order, and how it is stored.

An observation (or state) space is an image when it is a 3-D ``Box``.  Buffers keep a
``uint8`` image as ``uint8`` (a quarter of float32's bytes); the network casts it to float
and scales it by 1/255 on its own device (``ImageLayout.chw``), so the /255 happens where
the convolution runs, never in storage or transport.

Channel order: most envs (PettingZoo, Melting Pot, gymnasium's pixel wrappers) give HWC,
torch's convolutions read CHW.  ``channel_order = "auto"`` takes the end of size 1, 3 or 4
as the channels (the last one when both ends could be: HWC is the common case), else the
smaller end (stacked frames or agents' images: ``(28, 48, 6)``).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import torch
from gymnasium import spaces

from harl.errors import ConfigError
from harl.nets.entity import require_layout

ENCODERS = ("auto", "mlp", "cnn", "entity")
"""``encoder`` keys' choices; ``entity``: attention over the entities of an observation the env splits
(``harl.nets.entity``), never chosen by ``auto``."""
CHANNEL_ORDERS = ("auto", "last", "first")
MAX_MLP_IMAGE_INPUT = 16_384
"""Largest flattened image an ``encoder = "mlp"`` network accepts: past this its first layer alone
is a dense matrix of millions of weights per hidden unit row, slow and rarely learnable."""
_CHANNEL_SIZES = (1, 3, 4)


def is_image(space: Any) -> bool:
    """A 3-D Box: what the CNN encoder reads."""
    return isinstance(space, spaces.Box) and len(space.shape) == 3


def storage_dtype(space: Any) -> torch.dtype:
    """uint8 for a uint8 image (kept as is in the buffers), float32 otherwise."""
    if is_image(space) and np.dtype(space.dtype) == np.uint8:
        return torch.uint8
    return torch.float32


def storage_bytes(space: Any) -> int:
    """Bytes one stored value of ``space`` takes (1 for a uint8 image, else 4)."""
    return 1 if storage_dtype(space) == torch.uint8 else 4


@attrs.frozen
class ImageLayout:
    """How a stored image becomes the ``(N, C, H, W)`` float input of a convolution."""

    shape: tuple[int, ...]
    """The space's shape, as the env gives it."""
    channels_last: bool
    scale: float
    """1/255 for uint8 images, 1 for float images (taken as already scaled)."""

    @property
    def chw(self) -> tuple[int, int, int]:
        h, w, c = self.shape if self.channels_last else (*self.shape[1:], self.shape[0])
        return c, h, w

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def lead(self, x: torch.Tensor) -> tuple[int, ...]:
        """The leading (batch) dims of ``x``, stored flat ``(..., size)`` or shaped ``(..., *shape)``."""
        if tuple(x.shape[-3:]) == self.shape:
            return tuple(x.shape[:-3])
        return tuple(x.shape[:-1])

    def to_chw(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., size)`` or ``(..., *shape)``, any dtype -> ``(N, C, H, W)`` float, scaled."""
        x = x.reshape(-1, *self.shape)
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        x = x.float()
        return x * self.scale if self.scale != 1.0 else x

    def flat(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., size)`` float, scaled: an image for an MLP."""
        x = x.reshape(*self.lead(x), self.size).float()
        return x * self.scale if self.scale != 1.0 else x


def image_layout(space: spaces.Box, channel_order: str, table: str, source: str) -> ImageLayout:
    """The layout of a 3-D Box under ``[table] channel_order`` (auto, last, first)."""
    shape = tuple(int(n) for n in space.shape)
    if channel_order == "auto":
        last, first = shape[-1] in _CHANNEL_SIZES, shape[0] in _CHANNEL_SIZES
        if last or first:
            channels_last = last
        elif shape[-1] != shape[0]:  # e.g. (28, 48, 6): two RGB images stacked on the channels
            channels_last = shape[-1] < shape[0]
        else:
            raise ConfigError(
                f"{source}: {table}.channel_order: cannot tell the channel axis of an image of shape "
                f'{shape} (neither end is 1, 3 or 4, nor the smaller); set {table}.channel_order = "last" (HWC) '
                'or "first" (CHW)')
    else:
        channels_last = channel_order == "last"
    scale = 1.0 / 255.0 if np.dtype(space.dtype) == np.uint8 else 1.0
    return ImageLayout(shape, channels_last, scale)


def choose_encoder(space: Any, encoder: str, table: str, source: str) -> str:
    """``cnn``, ``mlp`` or ``entity`` for ``space`` under ``[table] encoder``; clear errors for what cannot work."""
    image = is_image(space)
    if encoder == "entity":
        require_layout(space, table, source)
        return encoder
    if encoder == "auto":
        return "cnn" if image else "mlp"
    shape = tuple(space.shape) if isinstance(space, spaces.Box) else space
    if encoder == "cnn" and not image:
        raise ConfigError(
            f'{source}: {table}.encoder: "cnn" reads 3-D Box images, but the input is {shape}; '
            f'set {table}.encoder = "mlp" (or "auto")')
    if encoder == "mlp" and image and int(np.prod(space.shape)) > MAX_MLP_IMAGE_INPUT:
        raise ConfigError(
            f'{source}: {table}.encoder: "mlp" on an image of shape {shape} flattens it to '
            f"{int(np.prod(space.shape)):,} inputs (more than {MAX_MLP_IMAGE_INPUT:,}); "
            f'set {table}.encoder = "cnn" (or "auto"), or shrink the image with a resize wrapper')
    return encoder
