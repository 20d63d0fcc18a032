"""EPyMARL's IPPO in stages (pipelines/ippo_lbf.toml): the soft target critic, the interleaved
update (a critic step, then an actor step on the advantages of the critic before it, per epoch),
EPyMARL's networks and the shared actor's agent id, each against EPyMARL's expressions."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import torch
from torch import nn

from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.errors import ConfigError
from harl.policy.on_policy import OnPolicyActors, PolicyConfig
from harl.returns.n_step_v import NStepVConfig
from harl.update.independent_v import IndependentVConfig, IndependentVCritic, IndependentVLearner
from tests.fakes import matrix

ROOT = Path(__file__).resolve().parents[2]

EPYMARL_CRITIC: dict[str, Any] = dict(
    kind="independent_v", hidden_sizes=[16, 16], input_norm=False, layer_norm=False, init="torch",
    recurrent="none", lr=3e-4, adam_eps=1e-8, epochs=4, minibatches=1, value_loss_coef=2.0,
    clip_value_loss=False, huber_delta=0.0, max_grad_norm=10.0, value_norm=False, polyak=0.01,
    interleave=True)


def epymarl_pipeline(**policy: Any) -> dict[str, Any]:
    """ippo_lbf.toml's settings, small, on the two-agent matrix game (identical spaces: one
    shared actor with the agent id)."""
    assert matrix.MatrixGameConfig  # registers the "matrix" env kind
    return {
        "run": {"seed": 3, "total_env_steps": 40},
        "env": {"kind": "matrix"},
        "collector": {"n_envs": 2, "rollout_length": 4},
        "returns": {"kind": "n_step_v", "n_step": 5, "reward_norm": True},
        "critic": dict(EPYMARL_CRITIC),
        "updater": {"kind": "simultaneous", "objective": {"kind": "ppo", "clip": 0.2, "epochs": 4, "minibatches": 1,
                                                          "entropy_coef": 0.001, "lr": 3e-4, "adam_eps": 1e-8}},
        "policy": {"hidden_sizes": [16], "input_norm": False, "layer_norm": False, "init": "torch",
                   "share_parameters": True, "agent_id": True, **policy},
        "evaluator": {"episodes": 2, "n_envs": 2},
    }


def small_critic(**config: Any) -> IndependentVCritic:
    settings = {k: (tuple(v) if isinstance(v, list) else v) for k, v in EPYMARL_CRITIC.items() if k != "kind"}
    return IndependentVCritic([(3,), (3,)], IndependentVConfig(**{**settings, **config}))


def test_the_soft_target_update_is_epymarls() -> None:
    """target <- target * (1 - tau) + critic * tau (EPyMARL's _update_targets_soft), tau 0.01."""
    torch.manual_seed(0)
    critic = small_critic()
    assert critic.target is not None
    with torch.no_grad():
        for p in critic.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p))
    before = [p.clone() for p in critic.target.parameters()]
    online = list(critic.online().parameters())
    critic.update_target(0.01)
    for old, new, param in zip(before, critic.target.parameters(), online):
        torch.testing.assert_close(new, old * (1.0 - 0.01) + param * 0.01)


def test_the_collector_gets_the_target_critics_values() -> None:
    """``value`` (what the collector stores, and the returns bootstrap from) is the target's; the
    learner's ``normalized`` is the critic's own."""
    torch.manual_seed(0)
    critic = small_critic()
    x = critic.reads([torch.randn(5, 3), torch.randn(5, 3)])
    torch.testing.assert_close(critic.value(x), critic.normalized(x).detach())  # a copy at the start
    with torch.no_grad():
        critic.outs[0].bias.add_(1.0)
    torch.testing.assert_close(critic.value(x) + 1.0, critic.normalized(x).detach())
    assert critic.step(x, None, None)[0].equal(critic.value(x))


def test_an_interleaved_critic_step_is_epymarls_mean_squared_error() -> None:
    """The advantages are returns minus the values before the step; the step's gradient is that of
    mean((returns - V)^2) (value_loss_coef 2 x 0.5 e^2), clipped at 10; the target does not step."""
    torch.manual_seed(0)
    critic = small_critic()
    learner = IndependentVLearner(critic, small_critic_config(), torch.Generator())
    x = critic.reads([torch.randn(6, 3), torch.randn(6, 3)])
    returns = torch.randn(6, 2)
    reference = copy.deepcopy(critic)
    v = reference.normalized(x)
    ((returns - v) ** 2).mean().backward()
    advantages = learner.advantage_step(x, returns)
    torch.testing.assert_close(advantages, returns - v.detach())
    for mine, theirs in zip(critic.online().parameters(), reference.online().parameters()):
        assert mine.grad is not None and theirs.grad is not None
        torch.testing.assert_close(mine.grad, theirs.grad)
    assert all(p.grad is None for p in critic.target.parameters())  # type: ignore[union-attr]
    assert sum(len(g["params"]) for g in learner.optimizer.param_groups) == len(list(critic.online().parameters()))


def small_critic_config() -> IndependentVConfig:
    return IndependentVConfig(**{k: (tuple(v) if isinstance(v, list) else v)
                                 for k, v in EPYMARL_CRITIC.items() if k != "kind"})


def test_epymarls_networks() -> None:
    """layer_norm = false and init = "torch": Linear -> ReLU stacks, a bare GRU, PyTorch's default
    initialisation (nonzero biases, where HARL's orthogonal init zeroes them)."""
    from gymnasium import spaces

    config = PolicyConfig(hidden_sizes=(16,), input_norm=False, layer_norm=False, init="torch", recurrent="naive",
                          share_parameters=True, agent_id=True)
    team = OnPolicyActors([spaces.Box(-1, 1, (3,))] * 2, [spaces.Discrete(4)] * 2, config)
    actor = team.actor(0)
    assert [type(m) for m in actor.base.body] == [nn.Linear, nn.ReLU]  # type: ignore[union-attr]
    assert actor.base.body[0].in_features == 3 + 2  # type: ignore[union-attr,index]
    assert actor.rnn is not None and isinstance(actor.rnn.norm, nn.Identity)
    assert actor.base.body[0].bias.abs().sum() > 0  # type: ignore[union-attr,index]
    critic = small_critic()
    assert [type(m) for m in critic.bases[0].body] == [nn.Linear, nn.ReLU, nn.Linear, nn.ReLU]
    assert critic.outs[0].bias.abs().sum() > 0


def test_the_shared_actor_reads_the_agents_id_when_acting_and_learning() -> None:
    """Acting appends agent i's one-hot id; the buffer's agent batches hold the same inputs."""
    stages = build_stages(structure_pipeline(epymarl_pipeline(), "p.toml"))
    with stages:
        stages.collector.collect(stages.buffer)
        for i in range(2):
            batch = stages.buffer.agent_batch(i)
            assert batch.obs.shape == (8, 1 + 2)
            torch.testing.assert_close(batch.obs[:, 1:], torch.eye(2)[i].expand(8, 2))
        same = [torch.zeros(3, 1), torch.zeros(3, 1)]
        probs = [stages.policy.actor(0).distribution(stages.policy.actor_input(i, same[i]), None)[0] for i in range(2)]
        assert not torch.allclose(probs[0], probs[1])  # the same observation, told apart by the id


def test_an_exported_agent_appends_its_own_id() -> None:
    """``harl export``'s tensor function of each agent takes its own observation and acts as the team."""
    from harl.export.deploy import deploy_team

    stages = build_stages(structure_pipeline(epymarl_pipeline(), "p.toml"))
    with stages:
        modules = deploy_team(stages.policy, stages.venv.action_spaces, masked=False, with_params=True)
        obs = [torch.randn(5, 1), torch.randn(5, 1)]
        actions, _ = stages.policy.act(obs, None, deterministic=True)
        for i, module in enumerate(modules):
            action, logits = module(obs[i])
            assert action.equal(actions[i][:, 0].long())
            expected = stages.policy.actor(i).distribution(stages.policy.actor_input(i, obs[i]), None)[0]
            torch.testing.assert_close(logits, expected)


@pytest.mark.parametrize("recurrent", ["none", "naive"])
def test_the_interleaved_update_replays_epymarls_ppo_learner(recurrent: str) -> None:
    """One update through harl equals EPyMARL's ppo_learner loop written out here, on the same
    rollout, networks and optimiser settings: per epoch, the critic's values, advantages = returns
    - V (masked, detached), one critic step on the mean squared error; then one actor step on
    -(min(r A, clip(r) A) + 0.001 H), averaged over every agent and step; the target last."""
    stages = build_stages(structure_pipeline(epymarl_pipeline(recurrent=recurrent), "p.toml"))
    with stages:
        stages.collector.collect(stages.buffer)
        stages.returns.compute(stages.buffer)
        buf = stages.buffer
        actor, critic = copy.deepcopy(stages.policy.actor(0)), copy.deepcopy(stages.critic)
        actor_opt = torch.optim.Adam(actor.parameters(), lr=3e-4, eps=1e-8)
        critic_opt = torch.optim.Adam(list(critic.online().parameters()), lr=3e-4, eps=1e-8)
        states, _, returns, _, _ = buf.critic_batch()
        batches = [buf.agent_batch(i) for i in range(2)]
        for _ in range(4):
            v = critic.normalized(states)
            advantages = (returns - v).detach()
            critic_opt.zero_grad()
            ((returns - v) ** 2).mean().backward()
            nn.utils.clip_grad_norm_(list(critic.online().parameters()), 10.0)
            critic_opt.step()
            terms = []
            for i, b in enumerate(batches):
                adv = buf.agent_rows(advantages.reshape(buf.length, buf.n_envs, 2)[..., i]).reshape(-1, 1)
                log_p, entropy = actor.evaluate(b.obs, b.actions, b.avail, b.hidden, b.starts)
                ratio = (log_p - b.old_log_probs).exp()
                surrogate = torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
                terms.append(surrogate + 0.001 * entropy.unsqueeze(-1))
            actor_opt.zero_grad()
            (-torch.cat(terms).mean()).backward()
            nn.utils.clip_grad_norm_(list(actor.parameters()), 10.0)
            actor_opt.step()
        critic.update_target(0.01)
        stages.updater.update(buf, 0.0)
        for mine, theirs in zip(stages.policy.actor(0).parameters(), actor.parameters()):
            torch.testing.assert_close(mine, theirs, atol=1e-6, rtol=1e-5)
        for mine, theirs in zip(stages.critic.parameters(), critic.parameters()):
            torch.testing.assert_close(mine, theirs, atol=1e-6, rtol=1e-5)


def test_existing_independent_critics_are_unchanged_by_the_new_keys() -> None:
    """Every new key off: no target network in the critic's state, advantages from the buffer."""
    critic = IndependentVCritic([(3,), (3,)], IndependentVConfig(hidden_sizes=(8,)))
    assert critic.target is None and not any(k.startswith("target") for k in critic.state_dict())
    assert not IndependentVLearner(critic, IndependentVConfig(), torch.Generator()).interleaved


@pytest.mark.parametrize(("change", "key", "words"), [
    ({"updater": {"kind": "sequential"}}, "updater.kind", 'set updater.kind = "simultaneous"'),
    ({"critic": {"minibatches": 2}}, "critic.minibatches", "set minibatches = 1"),
    ({"critic": {"epochs": 3}}, "critic.epochs", "set critic.epochs = 4"),
    ({"critic": {"clip_value_loss": True}}, "critic.clip_value_loss", "set clip_value_loss = false"),
    ({"critic": {"value_norm": True}}, "critic.value_norm", "set value_norm = false"),
    ({"critic": {"recurrent": "policy"}, "policy": {"recurrent": "naive"}}, "critic.polyak",
     'set critic.recurrent = "none"'),
    ({"policy": {"share_parameters": False}}, "policy.agent_id", "set share_parameters = true"),
    ({"updater": {"objective": {"kind": "trpo"}}}, "updater.objective.kind", 'use "ppo" or "a2c"'),
])
def test_what_the_epymarl_keys_need_is_refused_with_the_key_and_the_fix(change: dict[str, Any], key: str,
                                                                         words: str) -> None:
    data = epymarl_pipeline()
    for table, values in change.items():
        if table == "updater" and "objective" in values:
            data["updater"]["objective"] = values["objective"]
        else:
            data[table] = {**data[table], **values}
    if data["updater"]["kind"] == "sequential":
        data["policy"]["share_parameters"] = False
        data["policy"]["agent_id"] = False
    with pytest.raises(ConfigError) as info:
        structure_pipeline(data, "p.toml")
    assert f"p.toml: {key}:" in str(info.value) and words in str(info.value)


def test_harl_stages_lists_the_new_keys_with_their_docs() -> None:
    out = subprocess.run([sys.executable, "-m", "harl", "stages", "n_step_v"], capture_output=True, text=True,
                         cwd=ROOT, check=True, env={**os.environ, "COLUMNS": "400"}).stdout
    for field in attrs.fields(NStepVConfig):
        if field.name != "kind":
            assert field.name in out
    assert "EPyMARL's q_nstep" in out and "EPyMARL's standardise_rewards" in out
    out = subprocess.run([sys.executable, "-m", "harl", "stages", "independent_v"], capture_output=True, text=True,
                         cwd=ROOT, check=True, env={**os.environ, "COLUMNS": "400"}).stdout
    assert "EPyMARL's ppo_learner" in out and "target_update_interval_or_tau" in out


def test_ippo_lbf_checks_and_resumes_exactly(tmp_path: Path) -> None:
    """The shipped pipeline passes ``harl check``; resuming from iteration 3 repeats rows 4 and 5
    (the reward statistics, the target critic and the GRU actor are in the checkpoint)."""
    pytest.importorskip("lbforaging", reason="this run uses LBF (pip install lbforaging)")
    from tests.test_determinism import resume_from_3, rows, same_final_state, settings

    pipeline = ROOT / "pipelines" / "ippo_lbf.toml"
    check = subprocess.run([sys.executable, "-m", "harl", "check", str(pipeline)], capture_output=True, text=True,
                           cwd=ROOT)
    assert check.returncode == 0, check.stderr
    from harl.cli import main

    whole = tmp_path / "whole"
    args = settings(**{"critic.epochs": 2, "critic.hidden_sizes": "[16,16]", "policy.hidden_sizes": "[16]"})
    assert main(["train", str(pipeline), *args, "--run-dir", str(whole)]) == 0
    resume_from_3(whole, tmp_path / "resumed")
    assert rows(tmp_path / "resumed") == rows(whole)
    assert same_final_state(tmp_path / "resumed", whole)
    assert np.isfinite(float(rows(whole)[-1]["value_loss"]))
