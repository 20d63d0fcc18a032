"""A running mean and variance of a stream of samples: EPyMARL's ``RunningMeanStd``, which its
reward standardisation reads (``[returns] reward_norm`` of ``episode_td`` and ``n_step_v``).

The parallel algorithm (Chan et al.), as EPyMARL writes it: count starts at 1e-4, mean at 0,
variance at 1, and each batch's variance is the unbiased one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


class RunningMeanStd:
    """Mean and variance of samples of ``shape``: ``()`` for one stream of numbers, ``(width,)`` for a
    stream of rows whose columns are kept apart (one per agent)."""

    def __init__(self, shape: tuple[int, ...] = (), device: torch.device | str = "cpu") -> None:
        self.mean = torch.zeros(shape, device=device)
        self.var = torch.ones(shape, device=device)
        self.count = 1e-4

    def update(self, samples: torch.Tensor) -> None:
        """Add ``samples`` ``(..., *shape)``: every leading index is one more sample."""
        rows = samples.reshape(-1, *self.mean.shape)
        n = rows.shape[0]
        if n == 0:
            return
        batch_mean = rows.mean(0)
        batch_var = rows.var(0) if n > 1 else torch.zeros_like(batch_mean)
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean = self.mean + delta * n / total
        m2 = self.var * self.count + batch_var * n + delta.square() * self.count * n / total
        self.var = m2 / total
        self.count = total

    def standardise(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.var.sqrt()

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": self.count}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.mean = state["mean"].to(self.mean.device)
        self.var = state["var"].to(self.var.device)
        self.count = float(state["count"])
