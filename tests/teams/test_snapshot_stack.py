"""A self-play pool's snapshots act in one stacked call (harl.teams.snapshot_stack): each env's actions
are its own snapshot's, as snapshot-by-snapshot acting gives them."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.policy.on_policy import OnPolicyActors, PolicyConfig
from harl.teams.players import PoolPlayer
from harl.teams.pool import SnapshotPool
from harl.teams.snapshot_stack import SnapshotStack

TOL = {"rtol": 1e-5, "atol": 1e-6}
OBS = [spaces.Box(-1, 1, (6,), np.float32)] * 3


def player(act: spaces.Space, shared: bool, recurrent: bool = False) -> PoolPlayer:
    torch.manual_seed(0)
    template = OnPolicyActors(OBS, [act] * 3, PolicyConfig(hidden_sizes=(16, 16), share_parameters=shared,
                                                           recurrent="naive" if recurrent else "none"))
    pool = SnapshotPool(4, "uniform", seed=3)
    out = PoolPlayer(template, pool, None, "red", deterministic=True)
    for k in range(4):  # four different snapshots
        state = {n: v + 0.3 * k * torch.randn_like(v) for n, v in template.state_dict().items()}
        out.add(state, k)
    return out


@pytest.mark.parametrize("act,shared", [(spaces.Discrete(5), True), (spaces.Discrete(5), False),
                                        (spaces.Box(-1, 1, (2,), np.float32), True),
                                        (spaces.Box(-1, 1, (2,), np.float32), False)],
                         ids=["shared-discrete", "distinct-discrete", "shared-box", "distinct-box"])
def test_stacked_snapshots_act_as_each_snapshot_alone(act: spaces.Space, shared: bool) -> None:
    stacked = player(act, shared)
    assert stacked.batched
    alone = copy.copy(stacked)
    alone.batched = False
    n = 13
    obs = [torch.randn(n, 6) for _ in range(3)]
    avail = None
    if isinstance(act, spaces.Discrete):
        avail = [(torch.rand(n, 5) > 0.4).float() for _ in range(3)]
        for m in avail:
            m[:, 2] = 1.0
    one = stacked.play(obs, avail, True, None, None)
    stacked.pool._rng = np.random.default_rng(3)  # the same draws of snapshots for the loop
    each = alone.play(obs, avail, True, None, None)
    assert each.snapshots is not None and one.snapshots is not None
    assert (each.snapshots == one.snapshots).all() and len(set(one.snapshots.tolist())) > 1  # several in play
    for i in range(3):
        torch.testing.assert_close(one.actions[i], each.actions[i], **TOL)
    if avail is not None:  # never an unavailable action
        for i in range(3):
            assert avail[i].gather(1, one.actions[i].long()).eq(1).all()


def test_each_env_keeps_its_snapshot_and_a_changed_pool_restacks() -> None:
    p = player(spaces.Discrete(5), True)
    obs = [torch.randn(8, 6) for _ in range(3)]
    first_step = p.play(obs, None, True, None, None)
    again = p.play(obs, None, True, first_step, torch.zeros(8))
    assert first_step.snapshots is not None and again.snapshots is not None
    assert (again.snapshots == first_step.snapshots).all()
    first = p.stack()[1]
    p.add(p.template[0].state_dict(), 9)  # evicts snapshot 0; its episodes play on (retired)
    ids_now, stack = p.stack()
    assert stack is not first and set(ids_now) == {*p.pool.ids(), *([0] if 0 in p._retired else [])}
    p.play(obs, None, True, first_step, torch.zeros(8))  # an env still on a retired snapshot acts


def test_recurrent_snapshots_act_one_by_one() -> None:
    assert not player(spaces.Discrete(5), True, recurrent=True).batched


@pytest.mark.parametrize("act", [spaces.Discrete(5), spaces.MultiDiscrete([3, 4]), spaces.Box(-1, 1, (2,), np.float32)],
                         ids=["discrete", "multidiscrete", "box"])
def test_sampling_does_not_depend_on_what_else_is_stacked(act: spaces.Space) -> None:
    """The same envs on the same snapshots sample the same actions whether or not other snapshots
    (a retired one, before a resume; none after it) sit in the stack: resume stays exact."""
    p = player(act, shared=True)
    nets = [p.net(k) for k in p.pool.ids()]
    obs = [torch.randn(9, 6) for _ in range(3)]
    which = torch.tensor([0, 1, 1, 0, 1, 0, 0, 1, 1])
    few = SnapshotStack(nets[:2])
    more = SnapshotStack(nets)  # the same two first, then two more nobody plays
    torch.manual_seed(5)
    a = few.act(obs, None, which, deterministic=False)
    torch.manual_seed(5)
    b = more.act(obs, None, which, deterministic=False)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y)
    torch.manual_seed(6)
    c = more.act(obs, None, which, deterministic=False)
    assert any(not torch.equal(x, y) for x, y in zip(b, c))  # it does sample
