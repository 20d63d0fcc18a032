"""Noise handed out alike to a per-agent loop and to a stack of agents, so the two can be compared
call by call (``[policy] batch_agents`` draws one block of noise per group)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch


class Draws:
    """Stands in for a noise source (``torch.randn_like``, ``Tensor.exponential_``): hands out
    ``blocks`` in order, one agent's rows to a per-agent call, a whole block to a stack's call,
    so the loop and the stack see the same numbers."""

    def __init__(self, blocks: Sequence[torch.Tensor]) -> None:
        self.blocks = list(blocks)
        self.row = 0

    def next(self, shape: torch.Size) -> torch.Tensor:
        block = self.blocks[0]
        if tuple(shape) == tuple(block.shape):
            assert self.row == 0
            self.blocks.pop(0)
            return block.clone()
        assert tuple(shape) == tuple(block.shape[1:]), (shape, block.shape)
        out = block[self.row].clone()
        self.row += 1
        if self.row == block.shape[0]:
            self.blocks.pop(0)
            self.row = 0
        return out

    def patch(self, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
        if kind == "randn":
            monkeypatch.setattr(torch, "randn_like", lambda like, **_: self.next(like.shape))
        else:
            monkeypatch.setattr(torch.Tensor, "exponential_", lambda t, *a, **k: t.copy_(self.next(t.shape)))


def per_agent(blocks: Sequence[torch.Tensor], agents: int) -> list[torch.Tensor]:
    """``blocks`` (a stack's draws, one per noise call) in the order the per-agent loop draws them."""
    return [block[i] for i in range(agents) for block in blocks]
