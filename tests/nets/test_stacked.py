"""harl.nets.stacked: actors of one shape as one batched network, per call equal to each actor's own."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.nets.stacked import StackedActors, group_agents, signature
from harl.policy.on_policy import Actor, PolicyConfig

TOL = {"rtol": 1e-5, "atol": 1e-6}
SPACES = [spaces.Box(0, 1, (5,), np.float32), spaces.Discrete(5), spaces.MultiDiscrete([3, 4])]


def actors(space: spaces.Space, n: int = 3, **cfg: object) -> list[Actor]:
    config = PolicyConfig(hidden_sizes=(16, 16), **cfg)  # type: ignore[arg-type]
    return [Actor(7, space, config) for _ in range(n)]


def perturbed(team: list[Actor]) -> list[Actor]:
    """Every parameter moved off its initial value, so the LayerNorms' affine parts and std count."""
    with torch.no_grad():
        for actor in team:
            for p in actor.parameters():
                p.add_(0.1 * torch.randn_like(p))
    return team


def avail_of(space: spaces.Space, n: int, k: int) -> torch.Tensor | None:
    if isinstance(space, spaces.Box):
        return None
    width = int(space.n) if isinstance(space, spaces.Discrete) else int(np.sum(space.nvec))
    mask = (torch.rand(k, n, width) > 0.3).float()
    mask[..., 0] = 1.0
    if isinstance(space, spaces.MultiDiscrete):
        mask[..., 3] = 1.0
    return mask


@pytest.mark.parametrize("space", SPACES, ids=["box", "discrete", "multidiscrete"])
def test_evaluate_equals_each_actor(space: spaces.Space) -> None:
    """Log-probs and entropies of given actions: each agent's slice is its own actor's evaluate."""
    torch.manual_seed(0)
    team = perturbed(actors(space))
    stack = StackedActors(team)
    obs = torch.randn(3, 50, 7)
    avail = avail_of(space, 50, 3)
    acts = torch.stack([a.act(obs[i], None if avail is None else avail[i])[0] for i, a in enumerate(team)])
    lp, ent = stack.evaluate(stack.params(), obs, acts, avail)
    for i, actor in enumerate(team):
        lp_i, ent_i = actor.evaluate(obs[i], acts[i], None if avail is None else avail[i])
        torch.testing.assert_close(lp[i], lp_i, **TOL)
        torch.testing.assert_close(ent[i], ent_i, **TOL)


@pytest.mark.parametrize("space", SPACES, ids=["box", "discrete", "multidiscrete"])
def test_deterministic_act_equals_each_actor(space: spaces.Space) -> None:
    torch.manual_seed(1)
    team = perturbed(actors(space))
    stack = StackedActors(team)
    obs = torch.randn(3, 40, 7)
    avail = avail_of(space, 40, 3)
    a, lp = stack.act(obs, avail, deterministic=True)
    for i, actor in enumerate(team):
        a_i, lp_i, _ = actor.act(obs[i], None if avail is None else avail[i], True)
        torch.testing.assert_close(a[i], a_i, **TOL)
        torch.testing.assert_close(lp[i], lp_i, **TOL)


def test_sampled_act_with_the_loops_noise_equals_each_actor() -> None:
    """The Gaussian head given the noise the per-agent loop drew: the loop's actions and log-probs."""
    torch.manual_seed(2)
    team = perturbed(actors(SPACES[0]))
    stack = StackedActors(team)
    obs = torch.randn(3, 30, 7)
    torch.manual_seed(5)
    loop = [actor.act(obs[i], None) for i, actor in enumerate(team)]
    torch.manual_seed(5)
    noise = torch.stack([torch.randn(30, 5) for _ in team])
    a, lp = stack.act(obs, None, noise=noise)
    for i, (a_i, lp_i, _) in enumerate(loop):
        torch.testing.assert_close(a[i], a_i, **TOL)
        torch.testing.assert_close(lp[i], lp_i, **TOL)


def test_sampled_categorical_log_probs_match_evaluate() -> None:
    """Sampled categories are allowed ones, and their log-probs are what evaluate gives them."""
    torch.manual_seed(3)
    team = perturbed(actors(SPACES[2]))
    stack = StackedActors(team)
    obs = torch.randn(3, 64, 7)
    avail = avail_of(SPACES[2], 64, 3)
    assert avail is not None
    a, lp = stack.act(obs, avail)
    picked = torch.cat([avail[..., :3].gather(-1, a[..., :1].long()), avail[..., 3:].gather(-1, a[..., 1:].long())], -1)
    assert bool((picked == 1).all())
    torch.testing.assert_close(stack.evaluate(stack.params(), obs, a, avail)[0], lp, **TOL)


def test_gradients_reach_each_actor_as_its_own_loss_gives_them() -> None:
    """Backward through the stack: each actor's gradient equals the gradient of its own loss alone."""
    torch.manual_seed(4)
    team = perturbed(actors(SPACES[0]))
    twin = [Actor(7, SPACES[0], PolicyConfig(hidden_sizes=(16, 16))) for _ in team]
    for a, b in zip(team, twin):
        b.load_state_dict(a.state_dict())
    stack = StackedActors(team)
    obs, acts = torch.randn(3, 20, 7), torch.rand(3, 20, 5)
    lp, ent = stack.evaluate(stack.params(grad=True), obs, acts, None)
    ((lp.sum(-1) * torch.arange(1.0, 4.0).unsqueeze(-1)).sum() + ent.sum()).backward()
    for i, b in enumerate(twin):
        lp_i, ent_i = b.evaluate(obs[i], acts[i], None)
        ((i + 1) * lp_i.sum() + ent_i.sum()).backward()
        for (name, p), q in zip(team[i].named_parameters(), b.parameters()):
            assert p.grad is not None and q.grad is not None, name
            scale = float(q.grad.abs().max())  # float rounding of sums of O(100) terms of this size
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5 * max(scale, 1.0))


def test_acting_stack_follows_parameter_changes() -> None:
    """The cached stacked copy is refreshed after an actor's parameters change in place."""
    torch.manual_seed(5)
    team = actors(SPACES[0])
    stack = StackedActors(team)
    obs = torch.randn(3, 8, 7)
    before = stack.act(obs, None, deterministic=True)[0]
    with torch.no_grad():
        team[1].head.mean.bias.add_(1.0)
    after = stack.act(obs, None, deterministic=True)[0]
    torch.testing.assert_close(after[1], before[1] + 1.0, **TOL)
    torch.testing.assert_close(after[0], before[0])


def test_grouping_by_shape() -> None:
    """Heterogeneous teams group by shape; a recurrent actor does not stack."""
    box, disc = SPACES[0], SPACES[1]
    config = PolicyConfig(hidden_sizes=(16, 16))
    team = [Actor(7, box, config), Actor(9, box, config), Actor(7, disc, config), Actor(7, box, config),
            Actor(9, box, config)]
    assert group_agents(team) == [[0, 3], [1, 4], [2]]
    assert signature(Actor(7, box, PolicyConfig(hidden_sizes=(16, 16), recurrent="naive"))) is None
    with pytest.raises(ValueError):
        StackedActors([team[0], team[1]])
