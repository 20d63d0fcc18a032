"""The GRU layer of recurrent actors: resets where episodes start, one call equals step by step."""

from __future__ import annotations

import torch

from harl.nets.mlp import GRULayer


def stepwise(layer: GRULayer, x: torch.Tensor, h0: torch.Tensor, starts: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference: one GRU step at a time per sequence, zeroing the state by hand at each start."""
    outs, lasts = [], []
    for b in range(x.shape[1]):
        h = h0[b].view(1, 1, -1)
        seq = []
        for t in range(x.shape[0]):
            if starts[t, b]:
                h = torch.zeros_like(h)
            out, h = layer.gru(x[t:t + 1, b:b + 1], h)
            seq.append(out)
        outs.append(torch.cat(seq))
        lasts.append(h.view(-1))
    return layer.norm(torch.cat(outs, 1)), torch.stack(lasts)


def test_gru_state_resets_where_starts_say_so() -> None:
    """Sequence 1 restarts at step 3 and sequence 2 at step 0: from there they ignore h0 and the past."""
    torch.manual_seed(0)
    layer = GRULayer(4, 6)
    x, h0 = torch.randn(7, 3, 4), torch.randn(3, 6)
    starts = torch.zeros(7, 3)
    starts[3, 1] = starts[0, 2] = 1.0
    out, last = layer(x, h0, starts)
    ref_out, ref_last = stepwise(layer, x, h0, starts)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(last, ref_last)
    fresh, _ = layer(x[3:, 1:2], torch.zeros(1, 6), torch.zeros(4, 1))
    torch.testing.assert_close(out[3:, 1:2], fresh)  # what came before the reset is forgotten
    other_h0, _ = layer(x, torch.randn(3, 6), starts)
    torch.testing.assert_close(other_h0[:, 2], out[:, 2])  # a start at step 0 ignores h0
    assert not torch.allclose(other_h0[:3, 1], out[:3, 1])  # before its reset, sequence 1 used h0


def test_one_call_equals_steps_with_the_state_carried() -> None:
    """Running 5 steps at once gives what 5 single steps give when each passes its state on."""
    torch.manual_seed(1)
    layer = GRULayer(3, 4)
    x, h = torch.randn(5, 2, 3), torch.randn(2, 4)
    starts = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    whole, last = layer(x, h, starts)
    steps = []
    for t in range(5):
        out, h = layer(x[t:t + 1], h, starts[t:t + 1])
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps), whole)
    torch.testing.assert_close(h, last)
