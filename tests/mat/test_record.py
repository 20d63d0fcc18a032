"""MAT's step record: the policy's one encoder pass gives the values the buffer stores, its decoding orders
are a record field the rollout buffer stores, carries and hands back, and the compiled collection step's
Python writes the same records as the eager collector."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from gymnasium import spaces

from harl.buffers.records import StartRecord, StepRecord
from harl.buffers.rollout import RolloutBuffer
from harl.collect.compiled import CompiledCollection
from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.policy import mat_orders


def pipeline(order: str, continuous: bool = False) -> dict[str, Any]:
    """MAT on the torch MPE: 4 envs x 10 steps, episodes of 7 (rollouts end mid-episode)."""
    return {
        "run": {"seed": 3, "total_env_steps": 10_000, "device": "cpu"},
        "env": {"kind": "mpe_torch", "scenario": "simple_spread", "continuous_actions": continuous, "max_episode_steps": 7},
        "collector": {"n_envs": 4, "rollout_length": 10},
        "critic": {"kind": "mat_v"},
        "updater": {"kind": "joint", "objective": {"kind": "mat", "n_embd": 16, "order": order}},
        "evaluator": {"episodes": 2, "n_envs": 2},
    }


def no_compile(fn: Any, **_: Any) -> Any:
    return fn


def rollouts(raw: dict[str, Any], count: int, compiled: bool) -> dict[str, Any]:
    """``count`` rollouts from a fresh build, eager or through the compiled step's Python; the buffer's slots."""
    torch.manual_seed(0)
    stages = build_stages(structure_pipeline(raw, "test"))
    try:
        collector, buffer = stages.collector, stages.buffer
        collector.start(buffer)
        torch.manual_seed(1)
        orders = []
        for k in range(count):
            if k:
                buffer.roll_over()
            if compiled:
                CompiledCollection(collector.venv, collector.policy, collector.critic, buffer, no_compile).rollout()
            else:
                for t in range(buffer.length):
                    acting = collector.act(buffer, t)
                    if not k and not t:  # the policy's values are the critic's, from its one encoder pass
                        critic = stages.critic.value(stages.critic.reads(buffer.inputs(0).obs, None))
                        if stages.policy.order_kind == "fixed":  # the critic's own input: the same floats
                            assert torch.equal(acting.values, critic)
                        torch.testing.assert_close(acting.values, critic, rtol=1e-6, atol=1e-6)
                    buffer.insert(collector.observe(acting, collector.venv.step(collector.env_actions(acting))))
            orders.append({name: x.clone() for name, x in buffer.extras.items()})
        return {"actions": [a.clone() for a in buffer.actions], "log_probs": [p.clone() for p in buffer.log_probs],
                "values": buffer.values.clone(), "starts": buffer.starts.clone(), "extras": orders,
                "fields": dict(stages.policy.record_fields)}
    finally:
        stages.close()


@pytest.mark.parametrize("order", ["fixed", "random", "episode"])
def test_records_of_the_eager_collector_and_the_compiled_steps_python_agree(order: str) -> None:
    eager = rollouts(pipeline(order), 2, compiled=False)
    steps = rollouts(pipeline(order), 2, compiled=True)
    assert eager["fields"] == steps["fields"]
    for name in ("actions", "log_probs"):
        assert all(torch.equal(a, b) for a, b in zip(eager[name], steps[name])), name
    assert torch.equal(eager["values"][:-1], steps["values"][:-1])
    assert len(eager["extras"]) == 2
    for a, b in zip(eager["extras"], steps["extras"]):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    if order == "fixed":
        assert eager["fields"] == {} and eager["extras"][0] == {}
        return
    recorded = torch.stack([x[mat_orders.FIELD][1:] for x in eager["extras"]])  # (rollout, T, E, A)
    assert torch.equal(recorded.sort(-1).values, torch.arange(3).expand_as(recorded))
    if order == "random":  # one order per rollout, every env alike
        assert all(torch.equal(r, r[0, 0].expand_as(r)) for r in recorded)
    else:  # an env keeps its order until its episode ends (steps 7 and 14 begin new ones)
        steps_of = recorded.reshape(-1, *recorded.shape[2:])  # (2T, E, A)
        assert all(torch.equal(steps_of[t], steps_of[0]) for t in range(7))
        assert all(torch.equal(steps_of[t], steps_of[7]) for t in range(7, 14))
        assert not torch.equal(steps_of[7], steps_of[0])


def test_the_buffer_stores_carries_and_hands_back_a_policys_field() -> None:
    """``record_fields``: slot 0 unwritten after ``start``; step t's value at slot t + 1, handed to step
    t + 1 (``StepInputs.extras``) and to the update (``recorded``); ``roll_over`` and ``carried`` /
    ``carry_in`` carry the last; a checkpoint's start without the field (older harl) leaves it unwritten;
    a record field the buffer was not built for is refused."""
    T, E, A = 3, 2, 2
    obs_spaces, act_spaces = [spaces.Box(-1, 1, (2,))] * A, [spaces.Discrete(3)] * A
    fields = {"tag": ((A,), torch.long, -1)}
    buffer = RolloutBuffer(obs_spaces, act_spaces, state_dim=1, n_envs=E, length=T, fp_state=True,
                           record_fields=fields)
    buffer.start(StartRecord([torch.zeros(E, 2)] * A, torch.zeros(E, 1), None))
    assert torch.equal(buffer.inputs(0).extras["tag"], torch.full((E, A), -1))

    def record(t: int, **extras: Any) -> StepRecord:
        return StepRecord(actions=[torch.zeros(E, 1)] * A, log_probs=[torch.zeros(E, 1)] * A, values=torch.zeros(E, A),
                          obs=[torch.zeros(E, 2)] * A, avail=None, state=torch.zeros(E, 1), rewards=torch.zeros(E, A),
                          terminated=torch.zeros(E, dtype=torch.bool), truncated=torch.zeros(E, dtype=torch.bool),
                          active=torch.ones(E, A), starts=torch.zeros(E), extras=extras)

    for t in range(T):
        buffer.insert(record(t, tag=torch.full((E, A), 10 * t)))
        assert torch.equal(buffer.inputs(t + 1).extras["tag"], torch.full((E, A), 10 * t))
    assert torch.equal(buffer.recorded("tag"), torch.tensor([0, 0, 10, 10, 20, 20]).unsqueeze(-1).expand(T * E, A))
    carried = buffer.carried()
    assert torch.equal(carried["extra_tag"], torch.full((E, A), 20))
    buffer.roll_over()
    assert torch.equal(buffer.inputs(0).extras["tag"], torch.full((E, A), 20))
    buffer.extras["tag"][0].fill_(7)
    buffer.carry_in(carried)
    assert torch.equal(buffer.inputs(0).extras["tag"], torch.full((E, A), 20))
    buffer.carry_in({k: v for k, v in carried.items() if k != "extra_tag"})  # saved before the field existed
    assert torch.equal(buffer.inputs(0).extras["tag"], torch.full((E, A), -1))
    with pytest.raises(ValueError, match="carry_in"):
        buffer.carry_in({k: v for k, v in carried.items() if k != "state"})
    with pytest.raises(KeyError, match="other"):
        buffer.insert(record(0, other=torch.zeros(E)))
    plain = RolloutBuffer(obs_spaces, act_spaces, state_dim=1, n_envs=E, length=T, fp_state=True)
    assert plain.extras == {} and plain.inputs(0).extras == {} and "extra_tag" not in plain.carried()
