"""Off-policy pipelines: the family's slots go together (exact messages), and a small HA learning check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from harl import registry
from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.errors import ConfigError
from harl.run.lifecycle import resume_run, start_run
from tests.fakes import counting, matrix
from tests.fakes.matrix import PAYOFF

OFF = {"collector": {"kind": "off_policy"}, "buffer": {"kind": "replay"}, "returns": {"kind": "n_step"}}


def message(data: dict[str, Any]) -> str:
    assert counting.CountingConfig  # registers the "counting" env kind
    with pytest.raises(ConfigError) as info:
        structure_pipeline({"env": {"kind": "counting"}, **data}, "x.toml")
    return str(info.value)


def test_an_off_policy_collector_alone_gets_its_familys_tables() -> None:
    """Tables without kind take the off-policy family's defaults: replay, n_step, q, sac (HASAC)."""
    spec = structure_pipeline({"collector": {"kind": "off_policy"}, "critic": {"twin": True}}, "x.toml")
    assert [registry.kind_name(c) for c in (spec.buffer, spec.returns, spec.critic, spec.updater.objective)] == [
        "replay", "n_step", "q", "sac"]


def test_off_policy_collector_with_on_policy_slots_names_each_fix() -> None:
    """Each on-policy slot written under an off-policy collector gets its own line and fix."""
    on_policy = {"buffer": {"kind": "rollout"}, "returns": {"kind": "gae"}, "critic": {"kind": "v"},
                 "updater": {"objective": {"kind": "ppo"}}}
    assert message({"collector": {"kind": "off_policy"}, **on_policy}) == "\n".join([
        'x.toml: buffer.kind: "rollout" belongs to the on-policy family, but collector.kind = "off_policy"; '
        'set buffer.kind = "replay" (or collector.kind = "on_policy")',
        'x.toml: returns.kind: "gae" belongs to the on-policy family, but collector.kind = "off_policy"; '
        'set returns.kind = "n_step" (or collector.kind = "on_policy")',
        'x.toml: critic.kind: "v" belongs to the on-policy family, but collector.kind = "off_policy"; '
        'set critic.kind = one of independent_q, joint_q, q (or collector.kind = "on_policy")',
        'x.toml: updater.objective.kind: "ppo" belongs to the on-policy family, but collector.kind = '
        '"off_policy"; set updater.objective.kind = one of d3qn, ddpg, sac, td3 (or collector.kind = "on_policy")',
    ])


def test_off_policy_slot_under_the_on_policy_collector() -> None:
    """A replay buffer with the on-policy collector is refused with the collector fix."""
    assert message({"buffer": {"kind": "replay"}}) == (
        'x.toml: buffer.kind: "replay" belongs to the off-policy family, but collector.kind = "on_policy"; '
        'set buffer.kind = "rollout" (or collector.kind = "off_policy")')


def test_td3_needs_twin_critics() -> None:
    assert message({**OFF, "critic": {"kind": "q"}, "updater": {"objective": {"kind": "td3"}}}) == (
        "x.toml: critic.twin: td3 takes the minimum of twin critics in its targets; set critic.twin = true "
        '(or updater.objective.kind = "ddpg")')


def test_d3qn_and_joint_q_go_together() -> None:
    assert message({**OFF, "critic": {"kind": "q"}, "updater": {"objective": {"kind": "d3qn"}}}) == (
        'x.toml: critic.kind: "q" does not provide joint_q_values, which updater.objective.kind = "d3qn" needs; '
        'set critic.kind = "joint_q"')
    assert message({**OFF, "critic": {"kind": "joint_q"}, "updater": {"objective": {"kind": "sac"}}}) == (
        'x.toml: critic.kind: "joint_q" does not provide q_values, which updater.objective.kind = "sac" needs; '
        'set critic.kind = one of independent_q, q')


def test_shared_actors_are_refused_off_policy() -> None:
    data = {**OFF, "critic": {"kind": "q"}, "updater": {"kind": "simultaneous", "objective": {"kind": "sac"}},
            "policy": {"share_parameters": True}}
    assert message(data) == ("x.toml: policy.share_parameters: off-policy objectives keep one actor per agent; "
                             "set policy.share_parameters = false")


def test_objective_refuses_action_spaces_it_cannot_drive() -> None:
    """td3 on the counting env (Discrete agent 1) fails at build time with the alternatives."""
    data = {"env": {"kind": "counting"}, **OFF, "critic": {"kind": "q", "twin": True},
            "updater": {"objective": {"kind": "td3"}}, "evaluator": {"n_envs": 1}, "collector": {
                "kind": "off_policy", "n_envs": 1}}
    with pytest.raises(ConfigError) as info:
        build_stages(structure_pipeline(data, "x.toml"), "x.toml")
    assert str(info.value) == ('x.toml: updater.objective.kind: "td3" needs Box actions, but agent 1 has '
                               'Discrete(4); use kind = "sac" (any space) or "d3qn" (Discrete)')


def train_sac_on_matrix_game(seed: int) -> float:
    """HASAC on the one-step matrix game (tests/fakes/matrix.py); the greedy joint payoff."""
    assert matrix.MatrixGameConfig  # registers the "matrix" env kind
    data = {
        "run": {"seed": seed},
        "env": {"kind": "matrix"},
        "collector": {"kind": "off_policy", "n_envs": 32, "rollout_length": 1, "warmup_steps": 128,
                      "updates_per_round": 8},
        "buffer": {"kind": "replay", "capacity": 1024, "batch_size": 64},
        "returns": {"kind": "n_step"},
        "critic": {"kind": "q", "hidden_sizes": [32], "lr": 0.01, "polyak": 0.5},
        "updater": {"kind": "sequential", "objective": {"kind": "sac", "lr": 0.01, "alpha": 0.1,
                                                         "auto_alpha": False}},
        "policy": {"hidden_sizes": [16], "input_norm": False},
        "evaluator": {"episodes": 1, "n_envs": 1},
    }
    stages = build_stages(structure_pipeline(data, "matrix-game"))
    try:
        for it in range(15):
            stages.collector.collect(stages.buffer)
            stages.updater.update(stages.buffer, it / 15)
        return stages.evaluator.evaluate().mean_return
    finally:
        stages.close()


def test_hasac_learns_a_coordinated_optimum_of_the_matrix_game() -> None:
    """Discrete HASAC (Gumbel-softmax actors, centralised Q) reaches an optimal joint action on 3/3 seeds.

    (Measured: 8/8 seeds; the simultaneous variant does too here, so this is a learning check,
    not an HA-versus-MA one.)
    """
    assert [train_sac_on_matrix_game(seed) for seed in range(3)] == [PAYOFF.max()] * 3


def test_resume_restores_networks_optimisers_and_counters(tmp_path: Path) -> None:
    """A checkpointed off-policy run resumes with the same networks, update counter and warm-up state."""
    assert counting.CountingConfig
    text = "\n".join([
        '[run]\ntotal_env_steps = 40', '[env]\nkind = "counting"',
        '[collector]\nkind = "off_policy"\nn_envs = 2\nrollout_length = 5\nwarmup_steps = 10\nupdates_per_round = 2',
        '[buffer]\nkind = "replay"\ncapacity = 40\nbatch_size = 8', '[returns]\nkind = "n_step"\nn_step = 2',
        '[critic]\nkind = "q"\ntwin = true\nhidden_sizes = [8]', '[updater.objective]\nkind = "sac"',
        '[policy]\nhidden_sizes = [8]', '[evaluator]\nepisodes = 2\nn_envs = 2', '[logging]\nprogress = false',
    ])
    path = tmp_path / "p.toml"
    path.write_text(text)
    trainer, _ = start_run(path, [], run_dir=tmp_path / "run")
    try:
        trainer.train()
        steps = trainer.stages.updater.steps
        actor = [p.clone() for p in trainer.stages.policy.parameters()]
    finally:
        trainer.stages.close()
    assert trainer.counters.iteration == 4 and steps == 6  # iterations 2-4 update (buffer past warm-up)
    resumed = resume_run(tmp_path / "run", overrides=["run.total_env_steps=50"])  # one iteration more
    try:
        assert resumed.counters.iteration == 4 and resumed.stages.updater.steps == steps
        assert resumed.stages.collector.env_steps == 40 and not resumed.stages.collector.warming_up
        for a, b in zip(actor, resumed.stages.policy.parameters()):
            assert torch.equal(a, b)
        resumed.train()
        # the buffer is not checkpointed: it refills past warmup_steps before updates resume
        assert resumed.stages.updater.steps == steps
    finally:
        resumed.stages.close()


def first_critic_loss(precision: str) -> float:
    """The TD loss of the first gradient step of HASAC on the matrix game (before any weight moves)."""
    assert matrix.MatrixGameConfig
    data = {
        "run": {"precision": precision},
        "env": {"kind": "matrix"},
        "collector": {"kind": "off_policy", "n_envs": 32, "rollout_length": 4, "warmup_steps": 64,
                      "updates_per_round": 1},
        "buffer": {"kind": "replay", "capacity": 1024, "batch_size": 128},
        "returns": {"kind": "n_step"},
        "critic": {"kind": "q", "twin": True, "hidden_sizes": [64, 64]},
        "updater": {"objective": {"kind": "sac"}},
        "policy": {"hidden_sizes": [32, 32], "input_norm": False},
        "evaluator": {"episodes": 1, "n_envs": 1},
    }
    stages = build_stages(structure_pipeline(data, "bf16-check"))
    try:
        assert stages.updater.precision == precision
        while stages.collector.warming_up:
            stages.collector.collect(stages.buffer)
        stages.collector.collect(stages.buffer)
        stats = stages.updater.update(stages.buffer, 0.0)
        assert stats.updates == 1
        return stats.critic["critic_loss"]  # type: ignore[return-value]
    finally:
        stages.close()


def test_bf16_precision_runs_the_gradient_step_in_bfloat16_close_to_fp32() -> None:
    """[run] precision = "bf16": the same step's loss moves by bf16 rounding only (not bitwise equal, within 1%)."""
    fp32, bf16 = first_critic_loss("fp32"), first_critic_loss("bf16")
    assert bf16 != fp32
    assert bf16 == pytest.approx(fp32, rel=0.01)


def test_unknown_precision_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        structure_pipeline({"run": {"precision": "fp16"}, "env": {"kind": "counting"}}, "x.toml")
    assert str(info.value) == 'x.toml: run.precision: expected one of: fp32, bf16; got "fp16"; for example precision = "fp32" (the default)'
