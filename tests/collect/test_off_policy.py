"""The off-policy collector on the heterogeneous counting env (Box, masked Discrete, MultiDiscrete)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.collect.off_policy import random_actions
from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from tests.fakes import counting


def off_policy_pipeline(warmup: int = 1000, objective: str = "sac", **collector: Any) -> dict:
    assert counting.CountingConfig  # registers the "counting" env kind
    return {
        "run": {"seed": 2, "total_env_steps": 200},
        "env": {"kind": "counting", "episode_length": 3},
        "collector": {"kind": "off_policy", "n_envs": 2, "rollout_length": 5, "warmup_steps": warmup,
                      "updates_per_round": 3, **collector},
        "buffer": {"kind": "replay", "capacity": 40, "batch_size": 16},
        "returns": {"kind": "n_step", "n_step": 3},
        "critic": {"kind": "q", "twin": True, "hidden_sizes": [8]},
        "updater": {"kind": "sequential", "objective": {"kind": objective}},
        "policy": {"hidden_sizes": [8]},
        "evaluator": {"episodes": 2, "n_envs": 2},
    }


@pytest.fixture
def stages():  # noqa: ANN201
    built = build_stages(structure_pipeline(off_policy_pipeline(), "counting"))
    yield built
    built.close()


def test_random_warm_up_actions_respect_masks_and_bounds() -> None:
    """Uniform actions: inside the Box, never a masked category, every allowed one drawn."""
    action_spaces = [spaces.Box(-1.0, 1.0, (2,), np.float32), spaces.Discrete(4), spaces.MultiDiscrete([2, 3])]
    mask = torch.tensor([1.0, 0.0, 1.0, 1.0]).expand(4000, 4)
    multi = torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0]).expand(4000, 5)
    box, disc, md = random_actions(action_spaces, [None, mask, multi], 4000, torch.device("cpu"),
                                   torch.Generator().manual_seed(0))
    assert box.shape == (4000, 2) and float(box.abs().max()) <= 1.0 and float(box.std()) > 0.5
    assert set(disc[:, 0].tolist()) == {0.0, 2.0, 3.0}
    assert set(md[:, 0].tolist()) == {0.0, 1.0} and set(md[:, 1].tolist()) == {1.0, 2.0}


def test_warm_up_fills_the_buffer_per_agent_and_never_takes_a_forbidden_action(stages) -> None:  # noqa: ANN001
    """Warm-up steps store each agent's own widths; agent 1's forbidden action never appears."""
    for _ in range(4):
        stats = stages.collector.collect(stages.buffer)
    buf = stages.buffer
    assert stats.env_steps == 10 and buf.size == 40 and stages.collector.warming_up
    assert [a.shape[-1] for a in buf.actions] == [2, 1, 2]
    assert not bool((buf.actions[1] == counting.FORBIDDEN_ACTION).any())
    assert buf.avail[0] is None and buf.avail[1][..., counting.FORBIDDEN_ACTION].eq(0).all()


def test_truncated_transitions_keep_what_the_step_reached(stages) -> None:  # noqa: ANN001
    """At the time limit the transition stores the final (pre-reset) obs and state, flagged truncated."""
    stages.collector.collect(stages.buffer)
    buf = stages.buffer
    seed = 2000
    assert buf.truncated[:5, 0].tolist() == [False, False, True, False, False]
    assert not bool(buf.terminated.any())
    torch.testing.assert_close(buf.next_state[2, 0], torch.tensor([seed, 0, 3, seed * 1000 + 3.0]))
    assert buf.next_obs[0][2, 0, 0].item() == seed * 1000 + 3  # episode 0, t = 3
    assert buf.obs[0][3, 0, 0].item() == seed * 1000 + 100  # the next row: episode 1, t = 0
    # agent 2 is inactive from the env's second step on: alive when acting at t = 0, 1 only
    assert buf.active[:5, 0, 2].tolist() == [1.0, 1.0, 0.0, 1.0, 1.0]
    torch.testing.assert_close(buf.rewards[:3, 0, 0], torch.tensor([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("updater", ["sequential", "simultaneous"])
def test_heterogeneous_team_trains_with_sac_end_to_end(updater: str) -> None:
    """Box + masked Discrete + MultiDiscrete agents: warm-up, then updates with finite stats; masks hold."""
    data = off_policy_pipeline(warmup=10)
    data["updater"]["kind"] = updater
    stages = build_stages(structure_pipeline(data, "counting"))
    try:
        rows = []
        for it in range(4):
            stages.collector.collect(stages.buffer)
            stages.returns.compute(stages.buffer)
            rows.append(stages.updater.update(stages.buffer, it / 4).row())
        assert rows[0]["updates"] == 0 and rows[-1]["updates"] == 3
        assert all(np.isfinite(rows[-1][f"agent{i}_actor_loss"]) for i in range(3))
        assert not stages.collector.warming_up
        assert not bool((stages.buffer.actions[1] == counting.FORBIDDEN_ACTION).any())
        evaluation = stages.evaluator.evaluate()
        assert evaluation.episodes == 2
        state = stages.state_dict()
        stages.load_state_dict(state)
    finally:
        stages.close()


def test_subprocess_backend_reports_final_observations() -> None:
    """Env workers send the pre-reset observations too, so truncated transitions are the same."""
    stages = build_stages(structure_pipeline(off_policy_pipeline(backend="subprocess", workers=2), "counting"))
    try:
        stages.collector.collect(stages.buffer)
        buf = stages.buffer
        assert buf.next_obs[0][2, 1, 0].item() == 2001 * 1000 + 3  # env 1 (seed 2001): episode 0, t = 3
        assert buf.obs[0][3, 1, 0].item() == 2001 * 1000 + 100
    finally:
        stages.close()
