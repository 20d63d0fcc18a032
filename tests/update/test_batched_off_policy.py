"""[policy] batch_agents in the off-policy update: the critic's next actions, the MA simultaneous
actor step and the target actors' polyak step of a group equal the per-agent loop's to float
rounding, given the same inputs and noise; whole runs repeat themselves; off changes nothing."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from harl.buffers.replay import ReplayBatch
from harl.policy.off_policy import (
    CategoricalActor,
    DeterministicActor,
    OffPolicyActors,
    SquashedGaussianActor,
)
from harl.update.batched_off_policy import BatchedOffPolicy
from harl.update.objectives import ddpg, sac, td3
from harl.update.off_policy import actor_round
from harl.update.q_critic import QCritic, QCriticConfig, agent_value, agent_values
from tests.draws import Draws, per_agent

TOL = {"rtol": 1e-5, "atol": 1e-6}
BOX, OTHER = spaces.Box(-1, 1, (2,), np.float32), spaces.Box(0, 1, (2,), np.float32)
DISC = spaces.Discrete(4)
B = 24


def actor(kind: str, obs: int, space: spaces.Space) -> nn.Module:
    if kind in ("ddpg", "td3"):
        return DeterministicActor(obs, space, (16, 16), "relu", False, 0.1)
    if isinstance(space, spaces.Box):
        return SquashedGaussianActor(obs, space, (16, 16), "relu", False)
    return CategoricalActor(obs, space, (16, 16), "relu", True, 0.5)


def config(kind: str, clip: float) -> Any:
    if kind == "ddpg":
        return ddpg.DDPGConfig(max_grad_norm=clip)
    if kind == "td3":
        return td3.TD3Config(max_grad_norm=clip)
    return sac.SACConfig(max_grad_norm=clip)


def side(kind: str, obs: list[int], acts: list[spaces.Space], state_type: str, clip: float, seed: int
         ) -> tuple[OffPolicyActors, list[Any]]:
    """One team, critic and learners, all from ``seed`` (built twice: one side loops, one batches)."""
    torch.manual_seed(seed)
    actors = [actor(kind, d, s) for d, s in zip(obs, acts)]
    with torch.no_grad():
        for a in actors:
            for p in a.parameters():
                p.add_(0.1 * torch.randn_like(p))
    team = OffPolicyActors(actors, with_targets=kind != "sac")
    if team.targets is not None:  # targets off the actors, so the polyak step moves them
        with torch.no_grad():
            for p in team.targets.parameters():
                p.add_(0.05 * torch.randn_like(p))
    critic = QCritic(5, acts, QCriticConfig(twin=True, hidden_sizes=(16,), state_type=state_type))
    cfg, shared = config(kind, clip), {}
    if kind == "sac":
        learners = [sac.make_learner(i, team, critic, cfg, s, shared) for i, s in enumerate(acts)]
    elif kind == "td3":
        learners = [td3.make_learner(i, team, critic, cfg, s) for i, s in enumerate(acts)]
    else:
        learners = [ddpg.make_learner(i, team, critic, cfg, s) for i, s in enumerate(acts)]
    critic.nets.requires_grad_(False)
    return team, learners


def replay_batch(obs: list[int], acts: list[spaces.Space], seed: int) -> ReplayBatch:
    g = torch.Generator().manual_seed(seed)
    n = len(obs)

    def masks() -> list[torch.Tensor | None]:
        out: list[torch.Tensor | None] = []
        for s in acts:
            m = None if isinstance(s, spaces.Box) else (torch.rand(B, int(s.n), generator=g) > 0.3).float()
            if m is not None:
                m[:, 0] = 1.0
            out.append(m)
        return out

    actions = [torch.rand(B, 2, generator=g) if isinstance(s, spaces.Box)
               else torch.randint(0, int(s.n), (B, 1), generator=g).float() for s in acts]
    return ReplayBatch(state=torch.randn(B, 5, generator=g), obs=[torch.randn(B, d, generator=g) for d in obs],
                       actions=actions, avail=masks(), active=(torch.rand(B, n, generator=g) > 0.2).float(),
                       returns=torch.zeros(B, n), discount=torch.zeros(B), steps=torch.ones(B, dtype=torch.long),
                       next_state=torch.randn(B, 5, generator=g), next_obs=[torch.randn(B, d, generator=g) for d in obs],
                       next_avail=masks())


def noise(kind: str, space: spaces.Space, agents: int, calls: int = 1) -> tuple[str, list[list[torch.Tensor]]]:
    """``calls`` noise draws of a group of ``agents`` (one block each), and which source they stand in for."""
    if kind == "sac" and not isinstance(space, spaces.Box):
        return "exponential", [[-torch.rand(agents, B, int(space.n)).log()] for _ in range(calls)]  # Exp(1)
    return "randn", [[torch.randn(agents, B, 2)] for _ in range(calls)]


HOMOGENEOUS = ([3, 3, 3], [BOX, BOX, BOX])
MIXED = ([3, 4, 3, 3], [BOX, BOX, BOX, OTHER])  # one stack of two agents ([0, 2]) and two loners
MIXED_DIMS = [3, 4, 3, 5]  # the same with one space for all (a loner by its observation width)


@pytest.mark.parametrize(("kind", "space"), [("ddpg", BOX), ("td3", BOX), ("sac", BOX), ("sac", DISC)],
                         ids=["ddpg", "td3", "sac-box", "sac-discrete"])
def test_next_actions_equal_the_loop(kind: str, space: spaces.Space, monkeypatch: pytest.MonkeyPatch) -> None:
    """Target actions (TD3's smoothing noise handed out alike) or SAC's samples and entropy terms."""
    obs, acts = [3, 3, 3], [space] * 3
    _, loop = side(kind, obs, acts, "EP", 0.0, 0)
    _, grouped = side(kind, obs, acts, "EP", 0.0, 0)
    batched = BatchedOffPolicy(grouped)
    assert batched.groups == [[0, 1, 2]]
    batch = replay_batch(obs, acts, 1)
    source, draws = noise(kind, space, 3)
    handed = [Draws(draws[0]), Draws(per_agent(draws[0], 3))]
    handed[0].patch(monkeypatch, source)
    got = batched.next_actions(batch)
    handed[1].patch(monkeypatch, source)
    want = [learner.next_action(batch) for learner in loop]
    assert kind == "ddpg" or handed[0].blocks == handed[1].blocks == []
    for (a, p), (a0, p0) in zip(got, want):
        torch.testing.assert_close(a, a0, **TOL)
        assert (p is None) == (p0 is None)
        if p is not None:
            torch.testing.assert_close(p, p0, **TOL)


def params(learners: list[Any]) -> list[torch.Tensor]:
    return [p.detach().clone() for learner in learners for p in learner.actor.parameters()]


@pytest.mark.parametrize("shape", ["homogeneous", "mixed"])
@pytest.mark.parametrize("others", ["replayed", "current"])
@pytest.mark.parametrize(("kind", "space", "state_type", "clip"),
                         [("td3", BOX, "EP", 0.0), ("ddpg", BOX, "FP", 0.5), ("sac", BOX, "EP", 0.0),
                          ("sac", DISC, "FP", 0.5)],
                         ids=["td3", "ddpg-fp-clip", "sac-box", "sac-discrete-fp-clip"])
def test_simultaneous_actor_step_equals_the_loop(kind: str, space: spaces.Space, state_type: str, clip: float,
                                                 others: str, shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two rounds: new parameters, Adam states, stats and (SAC) temperatures agree with the loop's,
    each agent's noise handed out alike."""
    obs = HOMOGENEOUS[0] if shape == "homogeneous" else MIXED_DIMS
    acts = [space] * len(obs)
    _, loop = side(kind, obs, acts, state_type, clip, 0)
    _, grouped = side(kind, obs, acts, state_type, clip, 0)
    batched = BatchedOffPolicy(grouped)
    assert batched.groups == ([[0, 1, 2]] if shape == "homogeneous" else [[0, 2], [1], [3]])
    for round_ in range(2):
        batch = replay_batch(obs, acts, 10 + round_)
        replayed = loop[0].critic.encode(batch.actions) if others == "replayed" else None
        if kind == "sac":  # the loop samples at the round's start (used or not) and for each loss
            stacked = [g for g in batched.groups if len(g) > 1][0]
            source, (start, fresh) = noise(kind, space, len(stacked), calls=2)
            lone = {i: noise(kind, acts[i], 1, calls=2)[1] for g in batched.groups if len(g) == 1 for i in g}
            loop_draws, group_draws = [], []
            for phase, block in ((0, start), (1, fresh)):
                for i in range(len(obs)):
                    if i in lone:
                        loop_draws.append(lone[i][phase][0][0])
                    else:
                        loop_draws.append(block[0][stacked.index(i)])
            for g in batched.groups:  # the batched round: loners' starts and the group's draws, in group order
                if len(g) == 1:
                    group_draws.append(lone[g[0]][0][0][0])
                elif others == "current":
                    group_draws += [start[0], fresh[0]]
                else:
                    group_draws.append(fresh[0])
            group_draws += [lone[i][1][0][0] for g in batched.groups if len(g) == 1 for i in g]
            handed = [Draws(group_draws), Draws(loop_draws)]
            handed[0].patch(monkeypatch, source)
        got = batched.actor_round(batch, replayed)
        if kind == "sac":
            handed[1].patch(monkeypatch, source)
        want = actor_round(loop, batch, list(range(len(obs))), False, replayed)
        if kind == "sac":
            assert handed[0].blocks == [] and handed[1].blocks == []  # every draw used, none short
        assert list(got) == list(range(len(obs)))
        for i in range(len(obs)):
            for name in loop[i].stat_names:
                torch.testing.assert_close(got[i][name], want[i][name], rtol=1e-4, atol=1e-5)
    for p, q in zip(params(grouped), params(loop)):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    for a, b in zip(grouped, loop):
        sa, sb = a.optimizer.state_dict()["state"], b.optimizer.state_dict()["state"]
        for key in sb:
            torch.testing.assert_close(sa[key]["exp_avg"], sb[key]["exp_avg"], rtol=1e-3, atol=1e-7)
            assert float(sa[key]["step"]) == float(sb[key]["step"]) == 2.0
        if kind == "sac":
            torch.testing.assert_close(a.log_alpha, b.log_alpha, **TOL)
            torch.testing.assert_close(a.critic_temp.log_alpha, b.critic_temp.log_alpha, **TOL)


def test_polyak_step_is_the_loops_bit_for_bit() -> None:
    """A group's target actors in one ``_foreach_lerp_``: the same numbers as one call per agent."""
    obs, acts = MIXED
    _, loop = side("td3", obs, acts, "EP", 0.0, 0)
    _, grouped = side("td3", obs, acts, "EP", 0.0, 0)
    for learner in loop:
        learner.soft_update()
    BatchedOffPolicy(grouped).soft_update()
    for a, b in zip(grouped, loop):
        for p, q in zip(a.target.parameters(), b.target.parameters()):
            assert torch.equal(p, q)


@pytest.mark.parametrize("state_type", ["EP", "FP"])
@pytest.mark.parametrize("reduce", ["first", "min"])
def test_agent_values_are_agent_value_per_agent(state_type: str, reduce: str) -> None:
    """One pass of the critic over every agent's joint action = ``agent_value`` agent by agent."""
    obs, acts = HOMOGENEOUS
    _, learners = side("td3", obs, acts, state_type, 0.0, 3)
    critic, batch = learners[0].critic, replay_batch(obs, acts, 4)
    joints = []
    for i in range(3):
        joint = list(batch.actions)
        joint[i] = torch.rand(B, 2)
        joints.append(joint)
    got = agent_values(critic, batch, joints, [0, 1, 2], reduce)
    for i in range(3):
        torch.testing.assert_close(got[i], agent_value(critic, batch, joints[i], i, reduce), **TOL)


PIPELINE = Path("pipelines/matd3_mpe_spread.toml")
SMALL = ["env.kind=mpe_torch", "collector.n_envs=4", "collector.rollout_length=25", "collector.warmup_steps=200",
         "collector.updates_per_round=4", "buffer.batch_size=64", "policy.hidden_sizes=[16,16]",
         "critic.hidden_sizes=[16,16]", "evaluator.every_iterations=2", "evaluator.episodes=2", "evaluator.n_envs=2",
         "run.total_env_steps=1000000"]
HA = ["updater.kind=sequential", "updater.objective.kind=sac", "updater.order=random"]


def metrics(tmp: Path, name: str, extra: list[str]) -> tuple[Any, list[dict[str, str]]]:
    from tests.train_briefly import train_briefly

    trainer_result, rows = train_briefly(PIPELINE, SMALL + extra, tmp / name, iterations=4)
    return trainer_result, [{k: v for k, v in row.items() if k not in ("wall_time", "steps_per_s")} for row in rows]


@pytest.mark.parametrize("algorithm", [[], HA], ids=["matd3", "hasac"])
def test_batched_runs_repeat_bit_for_bit(tmp_path: Path, algorithm: list[str]) -> None:
    """MATD3 (batched acting, next actions, actor step) and HASAC (batched acting and next actions,
    sequential actor round) with batch_agents on: the same seed, the same metrics.csv."""
    extra = ["policy.batch_agents=true", *algorithm]
    _, first = metrics(tmp_path, "a", extra)
    assert first == metrics(tmp_path, "b", extra)[1]
    assert len(first) == 4 and first[-1]["critic_loss"] not in ("", None)


def test_off_builds_no_groups(tmp_path: Path) -> None:
    """batch_agents = false (the default): the team acts agent by agent and the updater loops."""
    from harl.compose import build_stages
    from harl.config.loading import load_spec_and_notes

    for value, batched in (("false", False), ("true", True)):
        spec, _ = load_spec_and_notes(str(PIPELINE), [*SMALL, f"policy.batch_agents={value}", "logging.progress=false"])
        stages = build_stages(spec)
        try:
            assert (stages.policy.groups is not None) == batched
            assert (stages.updater.batched is not None) == batched
            if batched:
                assert stages.policy.groups == [[0, 1, 2]] and stages.updater.batched.groups == [[0, 1, 2]]
        finally:
            stages.close()
    copy.deepcopy(stages.policy)  # the stacks travel with a copied team


def test_batched_run_resumes_exactly(tmp_path: Path) -> None:
    """MATD3 with batch_agents on, the replay buffer checkpointed: resuming from iteration 3 repeats
    rows 4 and 5 (the stacks read the loaded parameters afresh)."""
    from harl.cli import main
    from tests.test_determinism import off_policy_settings, resume_from_3, rows, same_final_state

    whole = tmp_path / "whole"
    settings = off_policy_settings(**{"checkpoint.replay_buffer": "true", "policy.batch_agents": "true",
                                      "env.kind": "mpe_torch"})
    assert main(["train", str(PIPELINE), *settings, "--run-dir", str(whole)]) == 0
    resume_from_3(whole, tmp_path / "resumed")
    assert rows(tmp_path / "resumed") == rows(whole)
    assert rows(whole)[-1]["critic_loss"] not in ("", None)
    assert same_final_state(tmp_path / "resumed", whole)
