"""harl.policy.on_policy: the on-policy team (one actor per agent, or one shared) acting in every env."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.errors import ConfigError
from harl.policy.on_policy import OnPolicyActors, PolicyConfig

OBS = [spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (5,), np.float32)]
ACT = [spaces.Box(-2, 2, (2,), np.float32), spaces.Discrete(4)]


def test_act_gives_each_agent_its_actions_and_per_dimension_log_probs() -> None:
    """Agents with different spaces: (E, k_i) actions and log-probs; a masked category is never drawn."""
    torch.manual_seed(0)
    team = OnPolicyActors(OBS, ACT, PolicyConfig(hidden_sizes=(8, 8)))
    obs = [torch.randn(64, 3), torch.randn(64, 5)]
    avail = [None, torch.tensor([[1.0, 0.0, 1.0, 0.0]]).repeat(64, 1)]
    actions, log_probs, hidden = team.sample(obs, avail)
    assert [a.shape for a in actions] == [(64, 2), (64, 1)]
    assert [lp.shape for lp in log_probs] == [(64, 2), (64, 1)]
    assert set(actions[1].squeeze(-1).long().tolist()) <= {0, 2}
    assert bool((log_probs[1] <= 0).all()) and hidden is None


def test_act_returns_the_next_gru_state_and_changes_nothing_in_place() -> None:
    """The acting contract (harl.evaluator.ActingPolicy): ``actions, hidden = act(..., hidden=, starts=)``;
    the states given are untouched, those returned are ``sample``'s, and ``starts`` restarts a row."""
    torch.manual_seed(0)
    team = OnPolicyActors(OBS, ACT, PolicyConfig(hidden_sizes=(8, 8), recurrent="naive"))
    obs = [torch.randn(4, 3), torch.randn(4, 5)]
    hidden = team.initial_hidden(4)
    assert hidden is not None
    given = [h.clone() for h in hidden]
    actions, after = team.act(obs, None, True, hidden=hidden, starts=torch.ones(4))
    assert all(torch.equal(h, g) for h, g in zip(hidden, given)) and after is not hidden
    assert after is not None and all(bool(h.abs().sum() > 0) for h in after)
    _, _, sampled = team.sample(obs, None, True, hidden, torch.ones(4))
    assert sampled is not None and all(torch.equal(a, b) for a, b in zip(after, sampled))
    restarted, _ = team.act(obs, None, True, hidden=after, starts=torch.ones(4))
    assert all(torch.equal(a, b) for a, b in zip(actions, restarted))  # starts = 1: as from zeros


def test_deterministic_actions_repeat_and_sampled_ones_vary() -> None:
    """deterministic=True is the mode (the same each call); sampling draws different actions."""
    torch.manual_seed(0)
    team = OnPolicyActors(OBS, ACT, PolicyConfig(hidden_sizes=(8, 8)))
    obs = [torch.randn(32, 3), torch.randn(32, 5)]
    first, _ = team.act(obs, None, deterministic=True)
    again, _ = team.act(obs, None, deterministic=True)
    sampled, _ = team.act(obs, None, deterministic=False)
    torch.testing.assert_close(first[0], again[0])
    assert not torch.equal(first[0], sampled[0])


def test_shared_parameters_refused_when_spaces_differ() -> None:
    """One actor cannot serve agents with different spaces: a clear ConfigError says so."""
    obs = [spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (11,), np.float32)]
    act = [spaces.Discrete(3), spaces.Discrete(5)]
    with pytest.raises(ConfigError) as err:
        OnPolicyActors(obs, act, PolicyConfig(share_parameters=True))
    assert str(err.value) == (
        "policy.share_parameters: the agents' spaces differ (agent 0: obs (3,), Discrete(3); "
        "agent 1: obs (11,), Discrete(5)), so one actor cannot serve them all; set "
        "share_parameters = false"
    )
    shared = OnPolicyActors(obs[:1] * 2, act[:1] * 2, PolicyConfig(share_parameters=True))
    assert shared.actor(0) is shared.actor(1)
