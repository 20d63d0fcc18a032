"""The on-policy collector on the heterogeneous counting env (Box, Discrete, MultiDiscrete)."""

from __future__ import annotations

import pytest
import torch

from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from tests.fakes import counting


def counting_pipeline(**collector) -> dict:  # noqa: ANN003
    assert counting.CountingConfig  # registers the "counting" env kind
    return {
        "run": {"seed": 2, "total_env_steps": 20},
        "env": {"kind": "counting", "episode_length": 3},
        "collector": {"n_envs": 2, "rollout_length": 5, **collector},
        "policy": {"hidden_sizes": [8]},
        "critic": {"hidden_sizes": [8]},
        "evaluator": {"episodes": 2, "n_envs": 2},
    }


@pytest.fixture
def stages():  # noqa: ANN201
    built = build_stages(structure_pipeline(counting_pipeline(), "counting"))
    yield built
    built.close()


def test_buffer_is_filled_per_agent_with_its_own_shapes(stages) -> None:  # noqa: ANN001
    """Obs, actions and log-probs have each agent's own width; rewards are the env's t + i."""
    stats = stages.collector.collect(stages.buffer)
    buf = stages.buffer
    assert stats.env_steps == 10
    assert [o.shape for o in buf.obs] == [(6, 2, 3), (6, 2, 5), (6, 2, 4)]
    assert [a.shape for a in buf.actions] == [(5, 2, 2), (5, 2, 1), (5, 2, 2)]
    assert [lp.shape for lp in buf.log_probs] == [(5, 2, 2), (5, 2, 1), (5, 2, 2)]
    assert buf.avail[0] is None and buf.avail[1].shape == (6, 2, 4)
    # env step t (1-based within the episode) rewards agent i with t + i; episodes last 3 steps
    expected_t = torch.tensor([1.0, 2.0, 3.0, 1.0, 2.0])
    torch.testing.assert_close(buf.rewards[:, 0, 0], expected_t)
    torch.testing.assert_close(buf.rewards[:, 1, 2], expected_t + 2)


def test_masks_are_respected_and_discrete_actions_are_integers(stages) -> None:  # noqa: ANN001
    """Agent 1 never takes its forbidden action (the env would raise); MultiDiscrete stays in range."""
    for _ in range(4):
        stages.collector.collect(stages.buffer)
        a1, a2 = stages.buffer.actions[1], stages.buffer.actions[2]
        assert not bool((a1 == counting.FORBIDDEN_ACTION).any())
        assert bool(((a2[..., 0] >= 0) & (a2[..., 0] <= 1) & (a2[..., 1] <= 2)).all())
        assert torch.equal(a1, a1.round())


def test_truncation_keeps_the_final_state_value_and_episode_stats(stages) -> None:  # noqa: ANN001
    """At the time limit the buffer flags truncated (not terminated) and stores V(final state)."""
    stats = stages.collector.collect(stages.buffer)
    buf = stages.buffer
    assert buf.truncated[:, 0].tolist() == [False, False, True, False, False]
    assert not bool(buf.terminated.any())
    # the pre-reset state of env 0 at its time limit: (seed, episode 0, t = 3, base)
    seed = 2000
    final = torch.tensor([[seed, 0, 3, seed * 1000 + 3]], dtype=torch.float32)
    torch.testing.assert_close(buf.final_values[2, 0], stages.critic.value(final)[0])
    torch.testing.assert_close(buf.next_values[2, 0], buf.final_values[2, 0])
    torch.testing.assert_close(buf.next_values[1, 0], buf.values[2, 0])
    # obs after the reset belongs to episode 1, step 0
    assert buf.obs[0][3, 0, 0].item() == seed * 1000 + 100
    # mean-over-agents rewards of the 3-step episode: (1+1) + (2+1) + (3+1) = 9
    assert [e["return"] for e in stats.episodes] == [9.0, 9.0]
    assert [e["length"] for e in stats.episodes] == [3, 3]


def test_inactive_agents_are_masked_until_the_episode_resets(stages) -> None:  # noqa: ANN001
    """Agent 2 is inactive from the env's step 2 on; a reset makes it active again."""
    stages.collector.collect(stages.buffer)
    assert stages.buffer.active[:, 0, 2].tolist() == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]


def test_next_rollout_continues_the_open_episodes(stages) -> None:  # noqa: ANN001
    """The second rollout starts where the first stopped (slot T rolled over to slot 0)."""
    stages.collector.collect(stages.buffer)
    last = [o[-1].clone() for o in stages.buffer.obs]
    stages.collector.collect(stages.buffer)
    for i, o in enumerate(stages.buffer.obs):
        torch.testing.assert_close(o[0], last[i])
    torch.testing.assert_close(stages.buffer.rewards[:, 0, 0], torch.tensor([3.0, 1.0, 2.0, 3.0, 1.0]))


def test_heterogeneous_team_trains_end_to_end() -> None:
    """Box + Discrete(masked) + MultiDiscrete agents: two full iterations run and report stats."""
    spec = structure_pipeline(counting_pipeline(), "counting")
    stages = build_stages(spec)
    try:
        for it in range(2):
            stages.collector.collect(stages.buffer)
            stages.returns.compute(stages.buffer)
            update = stages.updater.update(stages.buffer, it / 2)
        assert len(update.agents) == 3 and sorted(update.order) == [0, 1, 2]
        assert all(torch.isfinite(torch.tensor(a.policy_loss)) for a in update.agents)
    finally:
        stages.close()


@pytest.mark.parametrize(("mode", "length"), [("naive", 6), ("chunked", 3)])
def test_recurrent_rollouts_re_evaluate_to_the_collected_log_probs(mode: str, length: int) -> None:
    """A GRU team's stored states and episode starts reproduce every collected log-prob (ratio 1), across rollouts."""
    data = counting_pipeline(rollout_length=6)
    data["env"]["episode_length"] = 4
    # input_norm off: the counting env's observations are constant vectors, which LayerNorm zeroes
    data["policy"] = {"hidden_sizes": [8], "recurrent": mode, "chunk_length": length, "input_norm": False}
    stages = build_stages(structure_pipeline(data, "counting"))
    try:
        stages.collector.collect(stages.buffer)
        carried = [h[-1].clone() for h in stages.buffer.hidden]
        stages.collector.collect(stages.buffer)  # steps 6..11: an episode continues, another starts at 8
        buf = stages.buffer
        assert buf.starts[:, 0].tolist() == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        for i, actor in enumerate(stages.policy.actors):
            torch.testing.assert_close(buf.hidden[i][0], carried[i])  # carried across rollouts
            assert bool(buf.hidden[i][1:].abs().sum(-1).gt(0).all())
            batch = buf.agent_batch(i)
            assert batch.sequence_length == length
            with torch.no_grad():
                log_probs, _ = actor.evaluate(batch.obs, batch.actions, batch.avail, batch.hidden, batch.starts)
            torch.testing.assert_close(log_probs, batch.old_log_probs, atol=1e-5, rtol=1e-5)
        for it in range(2):
            stages.returns.compute(stages.buffer)
            update = stages.updater.update(stages.buffer, it / 2)
            stages.collector.collect(stages.buffer)
        assert all(torch.isfinite(torch.tensor(a.policy_loss)) for a in update.agents)
    finally:
        stages.close()


def test_driven_one_step_at_a_time_it_fills_the_buffer_as_collect_does() -> None:
    """start / act / env_actions / observe / insert / finish (what HARL's runner facade forwards to)
    store exactly what one ``collect`` stores, and the collector writes none of the buffer's arrays."""
    with build_stages(structure_pipeline(counting_pipeline(), "counting")) as whole:
        whole.collector.collect(whole.buffer)
    with build_stages(structure_pipeline(counting_pipeline(), "counting")) as stepped:  # seeds the same again
        collector, buffer, venv = stepped.collector, stepped.buffer, stepped.venv
        collector.start(buffer)
        for t in range(buffer.length):
            acting = collector.act(buffer, t)
            assert [a.shape for a in acting.actions] == [(2, 2), (2, 1), (2, 2)] and acting.values.shape == (2,)
            record = collector.observe(acting, venv.step(collector.env_actions(acting)))
            buffer.insert(record)
        collector.finish(buffer)
        for name in ("obs", "actions", "log_probs", "rewards", "terminated", "truncated", "values", "active",
                     "starts"):
            a, b = getattr(whole.buffer, name), getattr(buffer, name)
            for x, y in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b]):
                torch.testing.assert_close(x, y)
        with pytest.raises(IndexError, match="call roll_over"):
            buffer.insert(record)
