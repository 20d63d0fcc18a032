"""[policy] batch_agents for the off-policy actors: a stack's outputs, acting and exploring equal
each actor's own calls to float rounding, given the same noise."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from harl.policy.off_policy import (
    CategoricalActor,
    DeterministicActor,
    DuelingQActor,
    OffPolicyActors,
    SquashedGaussianActor,
)
from harl.policy.off_policy_stack import OffPolicyStack, group_off_policy, off_policy_signature
from tests.draws import Draws, per_agent

TOL = {"rtol": 1e-5, "atol": 1e-6}
BOX = spaces.Box(-1, 1, (2,), np.float32)
WIDE = spaces.Box(0, 2, (2,), np.float32)
DISC, MULTI = spaces.Discrete(5), spaces.MultiDiscrete([3, 4])


def make(kind: str, obs: int, space: spaces.Space, input_norm: bool = False) -> nn.Module:
    if kind == "deterministic":
        return DeterministicActor(obs, space, (16, 16), "relu", input_norm, 0.3)
    if kind == "squashed":
        return SquashedGaussianActor(obs, space, (16, 16), "relu", input_norm)
    return CategoricalActor(obs, space, (16, 16), "relu", input_norm, 0.5)


def perturbed(actors: list[nn.Module]) -> list[nn.Module]:
    """Every parameter moved off its initial value (LayerNorms' affine parts count)."""
    with torch.no_grad():
        for actor in actors:
            for p in actor.parameters():
                p.add_(0.1 * torch.randn_like(p))
    return actors


def masks(space: spaces.Space, agents: int, rows: int) -> torch.Tensor | None:
    if isinstance(space, spaces.Box):
        return None
    width = int(space.n) if isinstance(space, spaces.Discrete) else int(np.sum(space.nvec))
    mask = (torch.rand(agents, rows, width) > 0.3).float()
    mask[..., 0] = 1.0
    if isinstance(space, spaces.MultiDiscrete):
        mask[..., 3] = 1.0
    return mask


CASES = [("deterministic", BOX), ("squashed", BOX), ("categorical", DISC), ("categorical", MULTI)]
IDS = ["deterministic", "squashed", "categorical", "multidiscrete"]


def noise_blocks(kind: str, space: spaces.Space, agents: int, rows: int) -> tuple[str, list[torch.Tensor]]:
    """The noise one explore call draws: Gaussian ``(A, N, k)``, or Gumbel's exponentials per sub-action."""
    if kind != "categorical":
        return "randn", [torch.randn(agents, rows, 2)]
    sizes = [int(space.n)] if isinstance(space, spaces.Discrete) else [int(n) for n in space.nvec]
    return "exponential", [torch.empty(agents, rows, n).exponential_() for n in sizes]


@pytest.mark.parametrize("input_norm", [False, True], ids=["plain", "input-norm"])
@pytest.mark.parametrize(("kind", "space"), CASES, ids=IDS)
def test_stack_equals_each_actor(kind: str, space: spaces.Space, input_norm: bool,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs, deterministic actions and, with the same noise, exploring actions agree agent by agent."""
    torch.manual_seed(0)
    actors = perturbed([make(kind, 7, space, input_norm) for _ in range(3)])
    stack = OffPolicyStack(actors)
    obs, avail = torch.randn(3, 40, 7), masks(space, 3, 40)
    mask = [None if avail is None else avail[i] for i in range(3)]
    with torch.no_grad():
        out = stack.outputs(stack.params(), obs, avail)
        for i, actor in enumerate(actors):
            own = actor(obs[i]) if kind == "deterministic" else actor.distribution(obs[i], mask[i])
            for a, b in zip([out] if kind == "deterministic" else out, [own] if kind == "deterministic" else own):
                torch.testing.assert_close(a[i], b, **TOL)
        stacked = stack.act(obs, avail, deterministic=True)
        for i, actor in enumerate(actors):
            torch.testing.assert_close(stacked[i], actor.act(obs[i], mask[i], True), **TOL)
        source, blocks = noise_blocks(kind, space, 3, 40)
        Draws(blocks).patch(monkeypatch, source)
        explored = stack.explore(obs, avail, 0)
        Draws(per_agent(blocks, 3)).patch(monkeypatch, source)
        for i, actor in enumerate(actors):
            torch.testing.assert_close(explored[i], actor.explore(obs[i], mask[i], 0), **TOL)


def test_what_stacks() -> None:
    """Same class, shapes and constants stack; other bounds, widths, noise or D3QN's network do not."""
    torch.manual_seed(0)
    a, b = make("deterministic", 7, BOX), make("deterministic", 7, BOX)
    assert off_policy_signature(a) is not None and off_policy_signature(a) == off_policy_signature(b)
    others = [make("deterministic", 7, WIDE), make("deterministic", 9, BOX), make("squashed", 7, BOX),
              DeterministicActor(7, BOX, (16, 16), "relu", False, 0.1)]
    assert all(off_policy_signature(o) != off_policy_signature(a) for o in others)
    dueling = DuelingQActor(7, DISC, (16,), "relu", False, (16,), "relu", (1.0, 0.05, 100, 0))
    assert off_policy_signature(dueling) is None
    assert group_off_policy([a, others[0], b, dueling, others[0]]) == [[0, 2], [1, 4], [3]]
    with pytest.raises(ValueError):
        OffPolicyStack([a, others[1]])


def teams(actors: list[nn.Module]) -> tuple[OffPolicyActors, OffPolicyActors]:
    """The same actors' weights in a per-agent team and a batched one."""
    loop = OffPolicyActors(actors, with_targets=True)
    return loop, OffPolicyActors([copy.deepcopy(a) for a in actors], with_targets=True, batch_agents=True)


@pytest.mark.parametrize("method", ["act", "explore"])
def test_batched_team_equals_the_loop(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A heterogeneous team (two stacks and a loner): every agent's action as the per-agent team's,
    exploration noise handed out alike; the state dict is the same."""
    torch.manual_seed(1)
    spaces_ = [BOX, WIDE, BOX, WIDE, BOX]
    dims = [7, 7, 7, 7, 5]
    loop, batched = teams(perturbed([make("deterministic", d, s) for d, s in zip(dims, spaces_)]))
    assert loop.groups is None and batched.groups == [[0, 2], [1, 3], [4]]
    assert list(batched.state_dict()) == list(loop.state_dict())
    obs = [torch.randn(6, d) for d in dims]
    noise = [torch.randn(6, 2) for _ in dims]
    blocks = [torch.stack([noise[0], noise[2]]), torch.stack([noise[1], noise[3]]), noise[4]]
    loop_draws = Draws([torch.stack(noise)])

    def call(team: OffPolicyActors) -> list[torch.Tensor]:
        if method == "act":
            return team.act(obs, None, deterministic=False)[0]
        return team.explore(obs, None, 0)

    Draws(blocks).patch(monkeypatch, "randn")
    got = call(batched)
    loop_draws.patch(monkeypatch, "randn")
    want = call(loop)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **TOL)
    deterministic = batched.act(obs, None, deterministic=True)[0]
    for a, b in zip(deterministic, loop.act(obs, None, deterministic=True)[0]):
        torch.testing.assert_close(a, b, **TOL)


def test_same_seed_same_batched_actions() -> None:
    """The batched team's exploring actions are bit-identical to themselves under one seed."""
    torch.manual_seed(2)
    _, batched = teams(perturbed([make("squashed", 7, BOX) for _ in range(3)]))
    obs = [torch.randn(8, 7) for _ in range(3)]
    torch.manual_seed(9)
    first = batched.explore(obs, None, 0)
    torch.manual_seed(9)
    again = batched.explore(obs, None, 0)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
