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
