"""Sable's network: the training call recomputes what the acting call sampled, shapes, bad input."""

from __future__ import annotations

import pytest
import torch

from harl.nets.sable.network import SableHidden, SableNetwork

B, T, N, D, A, E, H = 3, 6, 3, 5, 4, 8, 2


def _net(discrete: bool, chunk: int | None = None, n_block: int = 2) -> SableNetwork:
    torch.manual_seed(0)
    net = SableNetwork(D, A, N, discrete=discrete, n_block=n_block, embed_dim=E, n_head=H,
                       chunk_timesteps=chunk).double()
    with torch.no_grad():  # SwiGLU and log-std start at zero and norms at one: perturb so errors show
        for name, p in net.named_parameters():
            if "ffn" in name or "log_std" in name or "weight" in name and p.dim() == 1:
                p.add_(0.3 * torch.randn_like(p))
    return net


def _starts() -> torch.Tensor:
    """Sequence 0: an episode starts at t=2 (mid-chunk for chunks of 3), after a carried state;
    sequence 1 starts at t=0; sequence 2 never starts."""
    s = torch.zeros(B, T, dtype=torch.bool)
    s[0, 2] = s[1, 0] = True
    return s


def _hidden(net: SableNetwork) -> SableHidden:
    g = torch.Generator().manual_seed(3)
    return SableHidden(*(0.3 * torch.randn(h.shape, generator=g, dtype=torch.float64)
                         for h in net.initial_hidden(B)))


def _rollout(net: SableNetwork, legal: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(5)
    obs = torch.randn(B, T, N, D, generator=g, dtype=torch.float64)
    starts, h = _starts(), _hidden(net)
    acts, logps, values = [], [], []
    with torch.no_grad():
        for t in range(T):
            out = net.act(obs[:, t], h, starts[:, t], None if legal is None else legal[:, t], generator=g)
            acts.append(out.actions)
            logps.append(out.log_probs)
            values.append(out.values)
            h = out.hidden
    return obs, torch.stack(acts, 1), torch.stack(logps, 1), torch.stack(values, 1), h


def _legal() -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    legal = torch.rand(B, T, N, A, generator=g) > 0.3
    legal[..., 0] = True
    return legal


@pytest.mark.parametrize("discrete", [True, False])
@pytest.mark.parametrize("chunk", [None, 3])
def test_training_call_recomputes_acting(discrete: bool, chunk: int | None) -> None:
    net = _net(discrete, chunk)
    legal = _legal() if discrete else None
    obs, actions, logps, values, h_end = _rollout(net, legal)
    with torch.no_grad():
        ev = net.evaluate(obs, actions, _hidden(net), _starts(), legal)
    torch.testing.assert_close(ev.log_probs, logps, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(ev.values, values, rtol=1e-9, atol=1e-9)
    for got, want in zip(ev.hidden, h_end, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
    if discrete:  # sampled actions respect the mask
        assert legal is not None
        assert legal.gather(-1, actions[..., None]).all()


def test_acting_decoder_state_matters() -> None:
    """Sequence 2's first log-prob depends on the carried decoder state (no episode start there)."""
    net = _net(True)
    obs, actions, _, _, _ = _rollout(net, None)
    h = _hidden(net)
    zeroed = SableHidden(h.encoder, torch.zeros_like(h.decoder_self), torch.zeros_like(h.decoder_cross))
    with torch.no_grad():
        a = net.evaluate(obs, actions, h, _starts()).log_probs
        b = net.evaluate(obs, actions, zeroed, _starts()).log_probs
    assert not torch.allclose(a[2, 0], b[2, 0])
    torch.testing.assert_close(a[1], b[1])  # sequence 1 starts at t=0: the carried state is dropped


@pytest.mark.parametrize("discrete", [True, False])
def test_shapes(discrete: bool) -> None:
    net = SableNetwork(D, A, N, discrete=discrete)  # Mava's defaults
    h = net.initial_hidden(B)
    assert tuple(h.encoder.shape) == (B, 1, 1, 64, 64)
    obs = torch.randn(B, T, N, D)
    out = net.act(obs[:, 0], h, torch.ones(B, dtype=torch.bool))
    assert tuple(out.actions.shape) == ((B, N) if discrete else (B, N, A))
    assert tuple(out.log_probs.shape) == tuple(out.values.shape) == (B, N)
    assert all(tuple(x.shape) == tuple(y.shape) for x, y in zip(out.hidden, h, strict=True))
    actions = torch.randint(0, A, (B, T, N)) if discrete else torch.randn(B, T, N, A)
    ev = net.evaluate(obs, actions, h, torch.zeros(B, T, dtype=torch.bool))
    for x in (ev.values, ev.log_probs, ev.entropy):
        assert tuple(x.shape) == (B, T, N)
    ev.log_probs.sum().backward()
    assert net.action_head[0].weight.grad is not None
    if not discrete:
        assert net.log_std is not None and net.log_std.grad is not None


def test_bad_input_says_why() -> None:
    net = SableNetwork(D, A, N)
    h = net.initial_hidden(B)
    with pytest.raises(ValueError, match=r"expected \(B, T, N, obs_dim\) with N=3"):
        net.evaluate(torch.randn(B, T, N + 1, D), torch.zeros(B, T, N + 1, dtype=torch.long), h,
                     torch.zeros(B, T, dtype=torch.bool))
    with pytest.raises(ValueError, match="one episode-start flag per timestep"):
        net.act(torch.randn(B, N, D), h, torch.zeros(B, N, dtype=torch.bool))
    with pytest.raises(ValueError, match="hidden.encoder of shape"):
        net.act(torch.randn(B, N, D), net.initial_hidden(B + 1), torch.zeros(B, dtype=torch.bool))
    with pytest.raises(ValueError, match="not whole chunks"):
        SableNetwork(D, A, N, chunk_timesteps=4).evaluate(
            torch.randn(B, T, N, D), torch.zeros(B, T, N, dtype=torch.long), h, torch.zeros(B, T, dtype=torch.bool))


def test_timestep_encoding_acting_and_training_agree() -> None:
    """With timestep encoding on, both calls add the same step-count sinusoid; it changes the output."""
    torch.manual_seed(0)
    net = SableNetwork(D, A, N, n_block=1, embed_dim=E, n_head=H, positional_encoding=True).double()
    g = torch.Generator().manual_seed(5)
    obs = torch.randn(B, T, N, D, generator=g, dtype=torch.float64)
    steps = torch.arange(T).repeat(B, 1)[..., None].expand(B, T, N).clone()
    starts, h = _starts(), _hidden(net)
    acts, logps = [], []
    with torch.no_grad():
        for t in range(T):
            out = net.act(obs[:, t], h, starts[:, t], generator=g, step_count=steps[:, t])
            acts.append(out.actions)
            logps.append(out.log_probs)
            h = out.hidden
        actions = torch.stack(acts, 1)
        ev = net.evaluate(obs, actions, _hidden(net), starts, step_count=steps)
        shifted = net.evaluate(obs, actions, _hidden(net), starts, step_count=steps + 7)
    torch.testing.assert_close(ev.log_probs, torch.stack(logps, 1), rtol=1e-9, atol=1e-9)
    assert not torch.allclose(ev.values, shifted.values)
    with pytest.raises(ValueError, match="step_count is needed"):
        net.evaluate(obs, actions, _hidden(net), starts)
