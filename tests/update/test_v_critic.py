"""Value loss (clipped, Huber) and the critic's EP/FP inputs."""

from __future__ import annotations

import pytest
import torch

from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.update.v_critic import VCritic, VCriticConfig, huber, value_loss
from tests.collect.test_on_policy import counting_pipeline


def test_huber_is_quadratic_then_linear() -> None:
    """0.5 e^2 up to delta, delta (|e| - delta/2) beyond; delta 0 means squared error."""
    e = torch.tensor([0.5, -2.0, 12.0])
    torch.testing.assert_close(huber(e, 10.0), torch.tensor([0.125, 2.0, 10 * (12 - 5.0)]))
    torch.testing.assert_close(huber(e, 0.0), 0.5 * e**2)


def test_huber_one_sided_is_harls_and_mats_huber_loss() -> None:
    """HARL's/MAT's huber_loss(e, d) = a e^2/2 + b d (|e| - d/2), a = |e| <= d, b = e > d, by hand at d = 10:
    e = -12: a = b = 0, so 0 (symmetric: 10 (12 - 5) = 70); e = 12: 70; e = -3: 4.5; e = 3: 4.5."""
    e = torch.tensor([-12.0, 12.0, -3.0, 3.0])
    torch.testing.assert_close(huber(e, 10.0, one_sided=True), torch.tensor([0.0, 70.0, 4.5, 4.5]))
    torch.testing.assert_close(huber(e, 10.0), torch.tensor([70.0, 70.0, 4.5, 4.5]))
    target, old = torch.tensor([-12.0]), torch.tensor([0.0])  # through the value loss and its clipping
    assert value_loss(torch.tensor([0.0]), old, target, 0.2, 10.0, one_sided=True).item() == 0.0
    assert value_loss(torch.tensor([0.0]), old, target, 0.2, 10.0).item() == 70.0


def test_value_clipping_takes_the_pessimistic_loss() -> None:
    """Old 0, new 1, target 2, clip 0.2: the clipped prediction 0.2 has the larger loss and wins."""
    new, old, target = torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([2.0])
    plain = value_loss(new, old, target, None, 0.0)
    clipped = value_loss(new, old, target, 0.2, 0.0)
    assert plain.item() == 0.5 * 1.0**2
    assert abs(clipped.item() - 0.5 * 1.8**2) < 1e-6
    # When the clipped prediction is closer to the target, the plain loss is kept.
    assert abs(value_loss(torch.tensor([1.0]), old, torch.tensor([0.1]), 0.2, 0.0).item() - 0.5 * 0.9**2) < 1e-6


def test_fp_state_gives_one_value_per_agent() -> None:
    """FP: the critic sees the state plus each agent's one-hot id and returns (batch, agents)."""
    critic = VCritic(5, 3, VCriticConfig(state_type="FP", value_norm=False))
    state = torch.randn(7, 5)
    assert critic.inputs(state).shape == (7, 3, 8)
    assert critic.value(state).shape == (7, 3)
    ep = VCritic(5, 3, VCriticConfig(state_type="EP"))
    assert ep.value(state).shape == (7,)


@pytest.mark.parametrize("state_type", ["EP", "FP"])
def test_recurrent_critic_resets_its_state_where_an_episode_starts(state_type: str) -> None:
    """After a start flag the values are those of a fresh sequence from a zero state; before it they depend on the carried state."""
    torch.manual_seed(0)
    critic = VCritic(5, 3, VCriticConfig(state_type=state_type, hidden_sizes=(8,), value_norm=False), recurrent=True)
    assert critic.hidden_size == 8
    tail = (3,) if state_type == "FP" else ()
    states = torch.randn(6, 5)
    starts = torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0, 0.0])
    h0 = torch.randn(1, *tail, 8)
    values, last = critic.step(states, h0, starts)
    assert values.shape == (6, *tail) and last.shape == (1, *tail, 8)
    fresh, fresh_last = critic.step(states[3:], torch.zeros(1, *tail, 8), torch.tensor([1.0, 0.0, 0.0]))
    torch.testing.assert_close(values[3:], fresh)
    torch.testing.assert_close(last, fresh_last)
    from_zero, _ = critic.step(states, torch.zeros(1, *tail, 8), starts)
    assert not torch.allclose(values[:3], from_zero[:3])  # the carried state mattered before the reset
    # two sequences side by side give what each gives alone
    both, _ = critic.step(torch.cat([states, states.flip(0)]), torch.cat([h0, -h0]),
                          torch.cat([starts, starts.flip(0)]))
    torch.testing.assert_close(both[:6], values)
    torch.testing.assert_close(both[6:], critic.step(states.flip(0), -h0, starts.flip(0))[0])


@pytest.mark.parametrize("state_type", ["EP", "FP"])
def test_chunked_critic_re_evaluates_the_collected_values(state_type: str) -> None:
    """The stored critic states and starts reproduce every collected value (first epoch: old = new), across rollouts;
    the value of a truncated episode's final state continues that episode's critic state."""
    data = counting_pipeline(rollout_length=6)
    data["env"]["episode_length"] = 4
    data["policy"] = {"hidden_sizes": [8], "recurrent": "chunked", "chunk_length": 3, "input_norm": False}
    data["critic"] = {"hidden_sizes": [8], "state_type": state_type, "minibatches": 2}
    stages = build_stages(structure_pipeline(data, "counting"))
    finals: list = []
    venv_step = stages.collector.venv.step

    def recording_step(actions):  # noqa: ANN001, ANN202
        result = venv_step(actions)
        finals.append(result.final_state)
        return result

    stages.collector.venv.step = recording_step
    try:
        stages.collector.collect(stages.buffer)
        buf = stages.buffer
        tail = (3,) if state_type == "FP" else ()
        assert buf.critic_hidden.shape == (7, 2, *tail, 8)
        assert bool(buf.critic_hidden[0].eq(0).all())
        carried = buf.critic_hidden[-1].clone()
        finals.clear()
        stages.collector.collect(buf)  # steps 6..11: an episode continues, another starts at 8
        assert buf.starts[:, 0].tolist() == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        torch.testing.assert_close(buf.critic_hidden[0], carried)
        critic = stages.critic
        assert [t for t in range(6) if bool(buf.truncated[t].any())] == [1, 5]
        for t in range(6):
            if bool(buf.truncated[t].any()):
                final = torch.as_tensor(finals[t], dtype=torch.float32)
                expected = critic.value(final, buf.critic_hidden[t + 1], torch.zeros(2))
                ended = buf.truncated[t]
                torch.testing.assert_close(buf.final_values[t][ended], expected[ended])
                reset = critic.value(final, buf.critic_hidden[t + 1], torch.ones(2))
                assert not torch.allclose(buf.final_values[t][ended], reset[ended])
        states, old, returns, hidden, starts = buf.critic_batch()
        assert hidden.shape == (4, *tail, 8) and starts.shape == (12,)
        torch.testing.assert_close(critic.value(states, hidden, starts), old, atol=1e-5, rtol=1e-5)
        for chosen in ([0, 3], [2, 1]):  # minibatches of whole sequences, in any order
            rows = (torch.tensor(chosen).unsqueeze(-1) * 3 + torch.arange(3)).reshape(-1)
            torch.testing.assert_close(critic.value(states[rows], hidden[chosen], starts[rows]), old[rows],
                                       atol=1e-5, rtol=1e-5)
        for it in range(2):
            stages.returns.compute(buf)
            update = stages.updater.update(buf, it / 2)
            stages.collector.collect(buf)
        assert torch.isfinite(torch.tensor(update.critic.value_loss))
    finally:
        stages.close()
