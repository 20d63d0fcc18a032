"""The value family's fused recurrent unroll (``AgentQNetworks.unroll``) against EPyMARL's step loop."""

from __future__ import annotations

import pytest
import torch
from gymnasium import spaces

from harl.policy.agent_q import AgentQNetworks


def team(share: bool, recurrent: bool = True, hidden: int = 16) -> AgentQNetworks:
    """Three agents whose observation widths and action counts differ (padded as EPyMARL pads them)."""
    obs = [spaces.Box(-1, 1, (5,)), spaces.Box(-1, 1, (7,)), spaces.Box(-1, 1, (7,))]
    acts = [spaces.Discrete(4), spaces.Discrete(4), spaces.Discrete(3)]
    return AgentQNetworks(obs, acts, hidden_dim=hidden, recurrent=recurrent, share_parameters=share,
                          last_action=True)


@pytest.mark.parametrize("share", [True, False])
class TestFusedUnroll:
    def test_values_equal_the_step_loop(self, share: bool) -> None:
        """Q over whole episodes equals one forward per step from a zero state, to float rounding."""
        torch.manual_seed(0)
        t = team(share)
        x = torch.randn(4, 23, 3, t.in_dim)
        fused, loop = t.unroll(x), t.unroll_loop(x)
        assert fused.shape == (4, 23, 3, 4)
        torch.testing.assert_close(fused, loop, rtol=1e-5, atol=1e-6)

    def test_gradients_equal_the_step_loop(self, share: bool) -> None:
        """The gradient of a loss through the fused unroll equals the loop's, for every parameter."""
        torch.manual_seed(1)
        t = team(share)
        x = torch.randn(3, 17, 3, t.in_dim)
        w = torch.randn(3, 17, 3, 4)
        grads = []
        for unroll in (t.unroll, t.unroll_loop):
            t.zero_grad()
            (unroll(x) * w).sum().backward()
            grads.append([p.grad.clone() for p in t.parameters()])
        for fused, loop in zip(*grads):
            torch.testing.assert_close(fused, loop, rtol=1e-5, atol=1e-5)

    def test_the_last_step_equals_acting_step_by_step(self, share: bool) -> None:
        """The unroll's Q at step k is what ``forward`` gives after k steps of acting (the state acting carries)."""
        torch.manual_seed(2)
        t = team(share)
        x = torch.randn(2, 9, 3, t.in_dim)
        h = torch.zeros(2, 3, t.hidden_dim)
        for k in range(9):
            q, h = t(x[:, k], h)
        torch.testing.assert_close(t.unroll(x)[:, -1], q, rtol=1e-5, atol=1e-6)

    def test_parameters_are_the_cells(self, share: bool) -> None:
        """The checkpoint keys are still the GRU cell's, so a checkpoint written before the fusion loads."""
        keys = set(team(share).state_dict())
        first = "nets.0.rnn."
        assert {f"{first}weight_ih", f"{first}weight_hh", f"{first}bias_ih", f"{first}bias_hh"} <= keys
        assert not any("_l0" in k for k in keys)
        other = team(share)
        other.load_state_dict(team(share).state_dict())


def test_a_feed_forward_team_is_unchanged() -> None:
    """Without a GRU every step is computed at once, equal to one forward per step."""
    torch.manual_seed(3)
    t = team(True, recurrent=False)
    x = torch.randn(2, 5, 3, t.in_dim)
    h = torch.zeros(2, 3, t.hidden_dim)
    loop = torch.stack([t(x[:, k], h)[0] for k in range(5)], 1)
    torch.testing.assert_close(t.unroll(x), loop)


@pytest.mark.parametrize("share", [True, False])
def test_episode_lengths_skip_only_the_padding(share: bool) -> None:
    """With each episode's length, the rows inside it equal the step loop's (values and gradients) and
    the padding's Q are 0."""
    torch.manual_seed(4)
    t = team(share)
    x = torch.randn(4, 12, 3, t.in_dim)
    lengths = torch.tensor([12, 3, 7, 1])  # 23 of 48 rows: packed
    inside = (torch.arange(12) < lengths.unsqueeze(1)).view(4, 12, 1, 1).float()
    w = torch.randn(4, 12, 3, 4) * inside
    grads, values = [], []
    for unroll in (lambda: t.unroll(x, lengths), lambda: t.unroll_loop(x)):
        t.zero_grad()
        q = unroll()
        (q * w).sum().backward()
        values.append(q)
        grads.append([p.grad.clone() for p in t.parameters()])
    torch.testing.assert_close(values[0] * inside, values[1] * inside, rtol=1e-5, atol=1e-6)
    assert bool((values[0] * (1 - inside) == 0).all())
    for packed, loop in zip(*grads):
        torch.testing.assert_close(packed, loop, rtol=1e-5, atol=1e-5)


def test_the_td_loss_is_the_step_loops() -> None:
    """JointTD's loss and gradient on episodes of different lengths (QMIX's mixer, double Q): the packed,
    fused unroll against EPyMARL's loop over the whole padded batch."""
    from harl.buffers.episodes import EpisodeBatch
    from harl.returns.episode_td import EpisodeTD, EpisodeTDConfig
    from harl.update.mixers import QMixer
    from harl.update.q_learning import JointTD, JointTDConfig

    torch.manual_seed(5)
    t = team(True)
    B, T, A = 5, 9, 3
    g = torch.Generator().manual_seed(6)
    lengths = torch.tensor([9, 2, 1, 3, 1])  # 21 of 50 rows: packed
    filled = torch.arange(T) < lengths.unsqueeze(1)
    avail = [torch.ones(B, T + 1, 4, dtype=torch.bool), torch.ones(B, T + 1, 4, dtype=torch.bool),
             torch.ones(B, T + 1, 3, dtype=torch.bool)]
    batch = EpisodeBatch(obs=[torch.randn(B, T + 1, d, generator=g) for d in (5, 7, 7)],
                         state=torch.randn(B, T + 1, 6, generator=g), avail=list(avail),
                         actions=torch.stack([torch.randint(0, n, (B, T), generator=g) for n in (4, 4, 3)], -1),
                         rewards=torch.randn(B, T, generator=g) * filled,
                         terminated=filled & (torch.arange(T) == (lengths - 1).unsqueeze(1))
                         & torch.tensor([[True], [False], [True], [False], [False]]),  # 1, 3, 4: cut, bootstrapped
                         filled=filled)
    objective = JointTD(JointTDConfig(), t, QMixer(A, 6, embed_dim=8), EpisodeTD(EpisodeTDConfig()))
    results = []
    for packed in (True, False):
        if not packed:
            t.unroll = lambda x, lengths=None: t.unroll_loop(x)  # type: ignore[method-assign]
            objective.target_policy.unroll = (  # type: ignore[method-assign]
                lambda x, lengths=None: objective.target_policy.unroll_loop(x))
        for p in objective.params:
            p.grad = None
        loss, stats = objective.loss(batch, update_stats=False)
        loss.backward()
        results.append((loss.detach(), stats, [p.grad.clone() for p in objective.params]))
    (l0, s0, g0), (l1, s1, g1) = results
    torch.testing.assert_close(l0, l1, rtol=1e-5, atol=1e-6)
    assert s0 == pytest.approx(s1, rel=1e-5, abs=1e-6)
    for a, b in zip(g0, g1):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_little_padding_is_not_packed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Episodes filling more than PACK_BELOW of the batch take the plain call (packing would cost more)."""
    import harl.policy.agent_q as agent_q

    t = team(True)
    x = torch.randn(2, 6, 3, t.in_dim)
    calls = []
    monkeypatch.setattr(agent_q.rnn_utils, "pack_padded_sequence",
                        lambda *a, **k: calls.append(1) or pytest.fail("packed"))
    t.unroll(x, torch.tensor([6, 4]))  # 10 of 12 rows
    assert calls == []
