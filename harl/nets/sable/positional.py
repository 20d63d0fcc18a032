"""Sable's optional timestep encoding: the sinusoid of each token's episode step count.

Added to key, query and value before retention when ``timestep_positional_encoding`` is on
(off by default, mava/configs/network/rec_retention.yaml:11; mava/utils/sable_utils.py:96-140).
"""

from __future__ import annotations

import math

import torch


def timestep_encoding(step_count: torch.Tensor, width: int) -> torch.Tensor:
    """(B, S) step counts -> (B, S, width): sin at even features, cos at odd, rates 10000**(-2i/width)."""
    if width % 2:
        raise ValueError(f"the timestep encoding needs an even width, got {width}")
    rates = torch.exp(torch.arange(0, width, 2, device=step_count.device) * (-math.log(10000.0) / width))
    angles = step_count.to(rates.dtype)[..., None] * rates
    encoding = torch.zeros(*step_count.shape, width, device=step_count.device)
    encoding[..., 0::2] = torch.sin(angles)
    encoding[..., 1::2] = torch.cos(angles)
    return encoding
