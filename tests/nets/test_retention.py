"""Sable's retention: its three forms agree, its decay matrix is Mava's, bad input says why."""

from __future__ import annotations

import pytest
import torch

from harl.nets.sable import MultiScaleRetention, decay_matrix, head_decays, network_hidden_shape
from harl.nets.sable.decay import carry_decay, cross_decay

B, T, N, E, H = 3, 6, 3, 8, 2


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tokens, a carried state, per-token starts (an episode starts mid-sequence in sequence 0,
    at t=0 in sequence 1, never in sequence 2; t=1 falls inside a chunk of 2 timesteps, t=1 and t=4 inside chunks of 3)
    and step counts."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T * N, E, generator=g, dtype=torch.float64)
    h0 = torch.randn(B, H, E // H, E // H, generator=g, dtype=torch.float64)
    ts = torch.zeros(B, T, dtype=torch.bool)
    ts[0, 1] = ts[0, 4] = ts[1, 0] = True
    steps = torch.arange(T).repeat(B, 1)
    return x, h0, ts.repeat_interleave(N, dim=1), steps.repeat_interleave(N, dim=1)


def _layer(causal: bool, positional: bool = False) -> MultiScaleRetention:
    torch.manual_seed(1)
    layer = MultiScaleRetention(E, H, N, causal=causal, positional_encoding=positional).double()
    with torch.no_grad():  # a non-trivial norm, so a wrong head layout would show
        layer.group_norm.weight.uniform_(0.5, 1.5)
        layer.group_norm.bias.uniform_(-0.5, 0.5)
    return layer


def _stepwise(layer: MultiScaleRetention, x: torch.Tensor, h: torch.Tensor, starts: torch.Tensor,
              steps: torch.Tensor, per_agent: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The recurrent form, timestep by timestep (and agent by agent when ``per_agent``)."""
    outs = []
    for t in range(T):
        tok = slice(t * N, (t + 1) * N)
        xt, st, ct = x[:, tok], starts[:, t * N], steps[:, tok]
        if per_agent:
            for a in range(N):
                y, h = layer.recurrent(xt[:, a:a + 1], xt[:, a:a + 1], xt[:, a:a + 1], h, st,
                                       new_timestep=a == 0, step_count=ct[:, a:a + 1])
                outs.append(y)
        else:
            y, h = layer.recurrent(xt, xt, xt, h, st, step_count=ct)
            outs.append(y)
    return torch.cat(outs, dim=1), h


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("positional", [False, True])
def test_parallel_recurrent_and_chunkwise_agree(causal: bool, positional: bool) -> None:
    """One pass == step by step (the decoder agent by agent) == 2 or 3 chunks, state carried."""
    layer = _layer(causal, positional)
    x, h0, starts, steps = _inputs()
    with torch.no_grad():
        par, h_par = layer(x, x, x, h0, starts, steps)
        rec, h_rec = _stepwise(layer, x, h0, starts, steps, per_agent=causal)
        torch.testing.assert_close(rec, par)
        torch.testing.assert_close(h_rec, h_par)
        for chunk in (2 * N, 3 * N):
            out, h = layer.chunkwise(x, x, x, h0, starts, chunk, steps)
            torch.testing.assert_close(out, par)
            torch.testing.assert_close(h, h_par)


def test_an_episode_start_forgets_the_past() -> None:
    """From sequence 0's last start (t=4) on, the output is what a fresh state on t>=4 gives."""
    layer = _layer(causal=True)
    x, h0, starts, _ = _inputs()
    with torch.no_grad():
        out, h = layer(x, x, x, h0, starts)
        tail = x[:1, 4 * N:]
        fresh, h_fresh = layer(tail, tail, tail, layer.initial_state(1).double(), torch.zeros(1, 2 * N))
    torch.testing.assert_close(out[:1, 4 * N:], fresh)
    torch.testing.assert_close(h[:1], h_fresh)


def test_decay_matrix_by_hand() -> None:
    """2 agents, 3 timesteps, an episode starting at t=2 (a reset after t=1), kappa = 0.5.

    Mava: kappa**(n - m) for m <= n, zeroed where a start falls in (m, n], repeated over agents,
    times the token-level lower triangle for the decoder.
    """
    starts = torch.tensor([[0, 0, 0, 0, 1, 1]])
    kappa = torch.tensor([0.5])
    encoder = torch.tensor([[1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
                            [1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
                            [0.5, 0.5, 1.0, 1.0, 0.0, 0.0],
                            [0.5, 0.5, 1.0, 1.0, 0.0, 0.0],
                            [0.0, 0.0, 0.0, 0.0, 1.0, 1.0],
                            [0.0, 0.0, 0.0, 0.0, 1.0, 1.0]])
    decoder = torch.tensor([[1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                            [1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
                            [0.5, 0.5, 1.0, 0.0, 0.0, 0.0],
                            [0.5, 0.5, 1.0, 1.0, 0.0, 0.0],
                            [0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
                            [0.0, 0.0, 0.0, 0.0, 1.0, 1.0]])
    torch.testing.assert_close(decay_matrix(starts, kappa, 2, causal=False)[0, 0], encoder)
    torch.testing.assert_close(decay_matrix(starts, kappa, 2, causal=True)[0, 0], decoder)
    # xi: kappa**(t + 1) until the first start -> 0.5, 0.25, 0 per timestep, per agent
    xi = torch.tensor([0.5, 0.5, 0.25, 0.25, 0.0, 0.0])
    torch.testing.assert_close(cross_decay(starts, kappa, 2)[0, 0, :, 0], xi)
    # the carried state is dropped: an episode starts in the chunk
    assert carry_decay(starts, kappa, 2).item() == 0.0
    assert carry_decay(torch.zeros(1, 6), kappa, 2).item() == 0.125


def test_mava_default_decays() -> None:
    """kappa = (1 - exp(linspace(log 1/32, log 1/512, H))) * 0.8: 0.775 for one head; 0.775 and
    0.7984375 for two."""
    torch.testing.assert_close(head_decays(1, 0.8), torch.tensor([0.775], dtype=torch.float64))
    torch.testing.assert_close(head_decays(2, 0.8), torch.tensor([0.775, 0.7984375], dtype=torch.float64))
    assert network_hidden_shape(4, 1, 1, 64) == (4, 1, 1, 64, 64)


def test_bad_input_says_why() -> None:
    with pytest.raises(ValueError, match=r"embed_dim \(10\) must be a multiple of n_head \(3\)"):
        MultiScaleRetention(10, 3, 2)
    with pytest.raises(ValueError, match=r"decay_scaling_factor must lie in \[0, 1\]"):
        MultiScaleRetention(8, 2, 2, decay_scaling_factor=1.5)
    layer = _layer(causal=True)
    x, h0, starts, _ = _inputs()
    with pytest.raises(ValueError, match="chunk_size 4 must be a whole number of timesteps of 3 agents"):
        layer.chunkwise(x, x, x, h0, starts, 4)
    with pytest.raises(ValueError, match="chunk_size 12 .* divide the sequence of 18 tokens"):
        layer.chunkwise(x, x, x, h0, starts, 12)
    with pytest.raises(ValueError, match="`starts` .* is required"):
        layer.recurrent(x[:, :1], x[:, :1], x[:, :1], h0, None)
    with pytest.raises(ValueError, match="hidden state of shape"):
        layer(x, x, x, h0[:, :1], starts)
    with pytest.raises(ValueError, match="step_count is needed"):
        _layer(causal=False, positional=True)(x, x, x, h0, starts)
