"""[policy] batch_agents: the team acts, and the MA update steps, with agents as a batch dimension;
each call equals the per-agent loop to float rounding."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.buffers.rollout import AgentBatch
from harl.policy.on_policy import OnPolicyActors, PolicyConfig
from harl.update.batched import BatchedSimultaneous
from harl.update.objectives.a2c import A2CConfig, a2c_learner
from harl.update.objectives.ppo import PPOConfig, ppo_learner
from harl.update.simultaneous import simultaneous_update

TOL = {"rtol": 1e-5, "atol": 1e-6}
BOX, DISC = spaces.Box(0, 1, (5,), np.float32), spaces.Discrete(5)


def obs_space(n: int) -> spaces.Box:
    return spaces.Box(-1, 1, (n,), np.float32)


def team_pair(obs: list[int], act: list[spaces.Space], **cfg: object) -> tuple[OnPolicyActors, OnPolicyActors]:
    torch.manual_seed(0)
    plain = OnPolicyActors([obs_space(n) for n in obs], act, PolicyConfig(hidden_sizes=(16, 16), **cfg))  # type: ignore[arg-type]
    batched = OnPolicyActors([obs_space(n) for n in obs], act,
                           PolicyConfig(hidden_sizes=(16, 16), batch_agents=True, **cfg))  # type: ignore[arg-type]
    batched.load_state_dict(plain.state_dict())
    with torch.no_grad():
        for p, q in zip(plain.parameters(), batched.parameters()):
            noise = 0.1 * torch.randn_like(p)
            p.add_(noise)
            q.add_(noise)
    return plain, batched


@pytest.mark.parametrize("obs,act,shared", [([7, 7, 7], [BOX] * 3, False), ([7, 9, 7, 9], [BOX, BOX, DISC, BOX], False),
                                            ([7, 7, 7], [DISC] * 3, True), ([7, 7, 7], [BOX] * 3, True)],
                         ids=["homogeneous", "heterogeneous", "shared-discrete", "shared-box"])
def test_batched_act_equals_the_loop(obs: list[int], act: list[spaces.Space], shared: bool) -> None:
    """Deterministic actions and their log-probs agree agent by agent; the state dict is unchanged."""
    plain, batched = team_pair(obs, act, share_parameters=shared)
    assert batched.groups is not None and list(plain.state_dict()) == list(batched.state_dict())
    x = [torch.randn(24, n) for n in obs]
    avail = [None if isinstance(s, spaces.Box) else (torch.rand(24, 5) > 0.3).float().clamp(min=0) for s in act]
    for m in avail:
        if m is not None:
            m[:, 1] = 1.0
    a0, lp0, _ = plain.sample(x, avail, deterministic=True)
    a1, lp1, _ = batched.sample(x, avail, deterministic=True)
    for i in range(len(obs)):
        torch.testing.assert_close(a1[i], a0[i], **TOL)
        torch.testing.assert_close(lp1[i], lp0[i], **TOL)
    sampled, log_probs, _ = batched.sample(x, avail)
    assert [s.shape for s in sampled] == [a.shape for a in a0]
    assert [lp.shape for lp in log_probs] == [lp.shape for lp in lp0]


def test_same_seed_same_batched_actions() -> None:
    """The batched path is bit-identical to itself under the same seed."""
    _, batched = team_pair([7, 7, 7], [BOX] * 3)
    x = [torch.randn(16, 7) for _ in range(3)]
    torch.manual_seed(9)
    first = batched.sample(x, None).actions
    torch.manual_seed(9)
    again = batched.sample(x, None).actions
    for a, b in zip(first, again):
        assert torch.equal(a, b)


def batch(n: int, obs: int, space: spaces.Space, seed: int) -> AgentBatch:
    g = torch.Generator().manual_seed(seed)
    k = 5 if isinstance(space, spaces.Box) else 1
    actions = torch.rand(n, k, generator=g) if k == 5 else torch.randint(0, 5, (n, 1), generator=g).float()
    active = (torch.rand(n, 1, generator=g) > 0.1).float()
    return AgentBatch(obs=torch.randn(n, obs, generator=g), actions=actions,
                      old_log_probs=-1.0 - torch.rand(n, k, generator=g), avail=None, active=active,
                      advantages=torch.randn(n, 1, generator=g))


@pytest.mark.parametrize("objective", ["ppo", "a2c"])
@pytest.mark.parametrize("minibatches", [1, 3])
def test_batched_simultaneous_update_equals_the_loop(objective: str, minibatches: int) -> None:
    """Heterogeneous team (two stackable groups and a loner): parameters, Adam states, stats and the
    generator after the batched update agree with the per-agent loop's."""
    obs, act = [7, 9, 7, 9, 7], [BOX, BOX, BOX, BOX, DISC]
    plain, batched = team_pair(obs, act)
    config = (PPOConfig(epochs=3, minibatches=minibatches) if objective == "ppo"
              else A2CConfig(epochs=3, minibatches=minibatches))
    make = ppo_learner if objective == "ppo" else a2c_learner
    g0, g1 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    loop = [make(plain.actor(i), config, g0) for i in range(5)]  # type: ignore[arg-type]
    grouped = BatchedSimultaneous([make(batched.actor(i), config, g1) for i in range(5)])  # type: ignore[arg-type]
    assert grouped.groups == [[0, 2], [1, 3], [4]]
    batches = [batch(60, n, s, i) for i, (n, s) in enumerate(zip(obs, act))]
    for _ in range(2):
        want = simultaneous_update(loop, batches)
        got = grouped.update(batches)
        assert list(got) == list(range(5))
        for i in range(5):
            for field in ("policy_loss", "entropy", "ratio", "grad_norm", "factor"):
                assert getattr(got[i], field) == pytest.approx(getattr(want[i], field), rel=1e-4, abs=1e-5), (i, field)
    for p, q in zip(plain.parameters(), batched.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)
    for a, b in zip(loop, grouped.learners):
        sa, sb = a.optimizer.state_dict()["state"], b.optimizer.state_dict()["state"]
        for key in sa:
            torch.testing.assert_close(sb[key]["exp_avg_sq"], sa[key]["exp_avg_sq"], rtol=1e-3, atol=1e-9)
            assert float(sb[key]["step"]) == float(sa[key]["step"])
    assert torch.equal(g0.get_state(), g1.get_state())


def test_off_is_the_loop_bit_for_bit() -> None:
    """batch_agents = false builds no groups: act is today's loop, the same numbers as before."""
    plain, _ = team_pair([7, 7, 7], [BOX] * 3)
    assert plain.groups is None
    copy.deepcopy(plain)


PIPELINE = "pipelines/happo_mpe_torch_spread.toml"
SMALL = ["collector.n_envs=8", "collector.rollout_length=8", "policy.hidden_sizes=[16,16]", "critic.hidden_sizes=[16,16]",
         "evaluator.every_iterations=2", "evaluator.episodes=2", "evaluator.n_envs=2", "run.total_env_steps=1000000"]


def metrics(tmp: Path, name: str, extra: list[str]) -> list[dict[str, str]]:
    from tests.train_briefly import train_briefly

    _, rows = train_briefly(Path(PIPELINE), SMALL + extra, tmp / name, iterations=2)
    return [{k: v for k, v in row.items() if "time" not in k and not k.endswith("_s") and "per_s" not in k}
            for row in rows]


@pytest.mark.parametrize("updater", ["sequential", "simultaneous"])
def test_batched_runs_repeat_bit_for_bit(tmp_path: Path, updater: str) -> None:
    """A whole run with batch_agents = true (HA and MA) is bit-identical to itself under one seed."""
    extra = ["policy.batch_agents=true", f"updater.kind={updater}"]
    first = metrics(tmp_path, "a", extra)
    assert first == metrics(tmp_path, "b", extra)
    assert len(first) == 2
