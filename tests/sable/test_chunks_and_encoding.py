"""Sable's agent chunks (the feed-forward variant's ``agents_chunk_size``) compute what one pass over
all agents computes, without a (N, N) product; the timestep encoding (``timestep_positional_encoding``)
is a pipeline key whose step counts collection records and the update reads back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

import harl
from harl.cli import main
from harl.nets.sable.network import SableHidden, SableNetwork
from harl.policy.sable_policy import STEP_FIELD, SableCarry
from harl.update.objectives.sable import sable_batch

PIPELINES = Path(__file__).parents[2] / "pipelines"
REC, FF = PIPELINES / "sable_mpe_torch_spread.toml", PIPELINES / "sable-ff_mpe_torch_spread.toml"
SMALL = ["collector.n_envs=4", "collector.rollout_length=40", "updater.objective.embed_dim=16",
         "run.device=\"cpu\"", "updater.objective.minibatches=2"]
B, N, OBS, ACT = 5, 8, 6, 4


def _network(chunk: int | None, n_head: int = 2, n_block: int = 2, discrete: bool = True) -> SableNetwork:
    """A float64 network with every weight random (Mava's SwiGLU starts at zero, which would hide the
    feed-forward parts), the same weights for every ``chunk``."""
    torch.manual_seed(0)
    net = SableNetwork(OBS, ACT, N, discrete=discrete, n_block=n_block, embed_dim=16, n_head=n_head,
                       chunk_agents=chunk).double()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return net


def _inputs(discrete: bool = True) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(2)
    obs = torch.randn(B, 1, N, OBS, generator=g, dtype=torch.float64)
    actions = torch.randint(0, ACT, (B, 1, N), generator=g) if discrete else \
        torch.randn(B, 1, N, ACT, generator=g, dtype=torch.float64)
    starts = torch.tensor([[True], [False], [True], [False], [False]])
    legal = torch.rand(B, 1, N, ACT, generator=g) > 0.3
    legal[..., 0] = True
    if discrete:
        actions = torch.where(legal.gather(-1, actions[..., None])[..., 0], actions, 0)
    return obs, actions, starts, legal


def _hidden(net: SableNetwork) -> SableHidden:
    g = torch.Generator().manual_seed(3)
    return SableHidden(*(0.3 * torch.randn(h.shape, generator=g, dtype=torch.float64) for h in net.initial_hidden(B)))


class TestAgentChunks:
    @pytest.mark.parametrize("chunk", [1, 2, 4, 8])
    @pytest.mark.parametrize("discrete", [True, False], ids=["discrete", "box"])
    def test_chunked_training_call_equals_one_pass(self, chunk: int, discrete: bool) -> None:
        """Values, log-probs, entropy and the states after the step, for carried states and episode starts."""
        whole, chunked = _network(None, discrete=discrete), _network(chunk, discrete=discrete)
        obs, actions, starts, legal = _inputs(discrete)
        mask = legal if discrete else None
        want = whole.evaluate(obs, actions, _hidden(whole), starts, mask)
        got = chunked.evaluate(obs, actions, _hidden(chunked), starts, mask)
        for name in ("values", "log_probs", "entropy"):
            torch.testing.assert_close(getattr(got, name), getattr(want, name), rtol=1e-10, atol=1e-10)
        for a, b in zip(got.hidden, want.hidden, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)

    def test_chunked_gradients_equal_one_pass(self) -> None:
        whole, chunked = _network(None), _network(2)
        obs, actions, starts, legal = _inputs()
        for net in (whole, chunked):
            out = net.evaluate(obs, actions, _hidden(net), starts, legal)
            (out.log_probs.sum() + out.values.square().sum() + out.entropy.sum()).backward()
        for (name, a), b in zip(chunked.named_parameters(), whole.parameters(), strict=True):
            assert a.grad is not None and b.grad is not None
            torch.testing.assert_close(a.grad, b.grad, rtol=1e-9, atol=1e-10, msg=name)

    def test_float32_tolerance(self) -> None:
        whole, chunked = _network(None).float(), _network(4).float()
        obs, actions, starts, legal = _inputs()
        hidden = SableHidden(*(h.float() for h in _hidden(whole)))
        want = whole.evaluate(obs.float(), actions, hidden, starts, legal)
        got = chunked.evaluate(obs.float(), actions, hidden, starts, legal)
        torch.testing.assert_close(got.log_probs, want.log_probs, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got.values, want.values, rtol=1e-5, atol=1e-5)

    def test_no_tensor_saved_for_backward_grows_with_agents_squared(self) -> None:
        """64 agents of width 8, 2 rows: unchunked, (B, H, N, N) = 8,192-entry products are saved for the
        backward pass; in chunks of 4 the largest saved tensor is a (B, N, E) = 1,024-entry activation."""
        largest = {}
        for chunk in (None, 4):
            torch.manual_seed(0)
            net = SableNetwork(OBS, ACT, 64, n_block=1, embed_dim=8, n_head=1, chunk_agents=chunk)
            g = torch.Generator().manual_seed(5)
            obs = torch.randn(2, 1, 64, OBS, generator=g)
            actions = torch.randint(0, ACT, (2, 1, 64), generator=g)
            sizes: list[int] = []

            def pack(x: torch.Tensor, sizes: list[int] = sizes) -> torch.Tensor:
                sizes.append(x.numel())
                return x

            with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
                out = net.evaluate(obs, actions, net.initial_hidden(2), torch.ones(2, 1, dtype=torch.bool))
                out.log_probs.sum().backward()
            largest[chunk] = max(sizes)
        assert largest[None] == 2 * 64 * 64
        assert largest[4] == 2 * 64 * 8

    def test_over_timesteps_equals_the_parallel_form(self) -> None:
        """The recurrent variant's rollouts of 4 timesteps with starts mid-rollout, agents in chunks of 2."""
        whole, chunked = _network(None), _network(2)
        g = torch.Generator().manual_seed(6)
        obs = torch.randn(B, 4, N, OBS, generator=g, dtype=torch.float64)
        actions = torch.randint(0, ACT, (B, 4, N), generator=g)
        starts = torch.rand(B, 4, generator=g) < 0.3
        want = whole.evaluate(obs, actions, _hidden(whole), starts)
        got = chunked.evaluate(obs, actions, _hidden(chunked), starts)
        for a, b in zip((*got[:3], *got.hidden), (*want[:3], *want.hidden), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)

    def test_causal_chunks_are_mavas_chunked_encoder(self) -> None:
        """``causal_chunks`` (Mava 73c4611's train_encoder_chunkwise): with chunks of 2, the values of chunk k
        (agents 2k, 2k + 1) are what an unchunked network of the first 2k + 2 agents gives its last two (each
        agent reads its own chunk and the ones before it); the whole-step default reads all 8 agents, which
        differs for agents 0-5 and agrees for the last chunk.  One block: with two, a prefix network's first
        block would let its early agents read the whole prefix."""
        mava = _network(2, n_block=1)
        mava.causal_chunks = True
        obs, actions, starts, legal = _inputs()
        zero = SableHidden(*(torch.zeros_like(h) for h in _hidden(mava)))
        ones = torch.ones_like(starts)
        got = mava.evaluate(obs, actions, zero, ones, legal)
        for k in range(4):
            n = 2 * k + 2
            torch.manual_seed(0)
            prefix = SableNetwork(OBS, ACT, n, n_block=1, embed_dim=16, n_head=2).double()
            prefix.load_state_dict(mava.state_dict())
            want = prefix.evaluate(obs[:, :, :n], actions[:, :, :n], zero, ones, legal[:, :, :n])
            torch.testing.assert_close(got.values[..., n - 2:n], want.values[..., n - 2:], rtol=1e-10, atol=1e-10)
        whole = _network(2, n_block=1).evaluate(obs, actions, zero, ones, legal)
        assert (whole.values[..., :6] - got.values[..., :6]).abs().min() > 1e-6
        torch.testing.assert_close(whole.values[..., 6:], got.values[..., 6:], rtol=1e-10, atol=1e-10)

    def test_bad_chunks_are_refused(self) -> None:
        with pytest.raises(ValueError, match="chunk_agents must be a positive divisor of the 8 agents, got 3"):
            SableNetwork(OBS, ACT, N, chunk_agents=3)


class TestAgentChunksInThePipeline:
    def test_ff_pipeline_trains_with_chunks_and_recomputes_its_log_probs(self) -> None:
        """simple_spread with 4 agents in chunks of 2: the update's call gives collection's log-probs."""
        with harl.build(FF, [*SMALL, "env.n_agents=4", "updater.objective.agents_chunk_size=2"]) as built:
            assert built.policy.chunk_agents == 2
            built.collector.collect(built.buffer)
            built.returns.compute(built.buffer)
            batch = sable_batch(built.buffer, built.policy)
            torch.testing.assert_close(built.updater.learner.ratio(batch), torch.ones_like(batch.old_log_probs),
                                       atol=2e-6, rtol=0)
            built.updater.update(built.buffer, 0.0)

    def test_a_chunk_that_does_not_divide_the_agents_exits_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["check", str(FF), "--set", "updater.objective.agents_chunk_size=2"]) == 2
        err = capsys.readouterr().err
        assert ("updater.objective.agents_chunk_size: expected a divisor of the env's 3 agents, got 2: every chunk "
                "holds as many agents (Mava asserts it too); for example agents_chunk_size = 1, or 0 for no chunks"
                in " ".join(err.split()))
        assert "Traceback" not in err

    def test_agent_and_timestep_chunks_together_exit_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["check", str(REC), "--set", "updater.objective.agents_chunk_size=3",
                     "--set", "updater.objective.chunk_timesteps=32"]) == 2
        assert "agent chunks already train one timestep after another" in " ".join(capsys.readouterr().err.split())

    def test_recurrent_pipeline_with_agent_chunks_recomputes_its_log_probs(self) -> None:
        """harl's extension: the recurrent Sable, 4 agents in chunks of 2, timestep by timestep from the
        carried states, gives collection's log-probs (Mava chunks the recurrent one over timesteps only)."""
        with harl.build(REC, [*SMALL, "env.n_agents=4", "updater.objective.agents_chunk_size=2"]) as built:
            for _ in range(2):
                built.collector.collect(built.buffer)
                built.returns.compute(built.buffer)
                batch = sable_batch(built.buffer, built.policy)
                torch.testing.assert_close(built.updater.learner.ratio(batch),
                                           torch.ones_like(batch.old_log_probs), atol=2e-6, rtol=0)
                built.updater.update(built.buffer, 0.0)

    def test_mavas_causal_chunks_act_as_they_train(self) -> None:
        """agents_chunk_encoder = "causal": acting reads the chunks as training does (ratio 1)."""
        with harl.build(FF, [*SMALL, "env.n_agents=4", "updater.objective.agents_chunk_size=2",
                             'updater.objective.agents_chunk_encoder="causal"']) as built:
            assert built.policy.causal_chunks
            built.collector.collect(built.buffer)
            built.returns.compute(built.buffer)
            batch = sable_batch(built.buffer, built.policy)
            torch.testing.assert_close(built.updater.learner.ratio(batch), torch.ones_like(batch.old_log_probs),
                                       atol=2e-6, rtol=0)

    def test_a_chunk_encoder_without_chunks_exits_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["check", str(FF), "--set", 'updater.objective.agents_chunk_encoder="causal"']) == 2
        assert "agents_chunk_size = 0 trains no chunks" in " ".join(capsys.readouterr().err.split())

    def test_a_dividing_chunk_passes_check(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["check", str(FF), "--set", "updater.objective.agents_chunk_size=3"]) == 0


@contextmanager
def encoded(*extra: str) -> Iterator[Any]:
    with harl.build(REC, [*SMALL, "updater.objective.timestep_positional_encoding=true", *extra]) as built:
        yield built


class TestTimestepEncoding:
    def test_encoding_changes_the_networks_outputs(self) -> None:
        """The same weights, the same inputs: with step counts 0..5 the outputs move; at step 0 the sinusoid
        is (0, 1, 0, 1, ...), which moves them too (Mava adds it wherever the key is on)."""
        torch.manual_seed(0)
        off = SableNetwork(OBS, ACT, 3, embed_dim=16)
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():  # every weight random: Mava's zero SwiGLU and 0.01 heads would hide the change
            for p in off.parameters():
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
        on = SableNetwork(OBS, ACT, 3, embed_dim=16, positional_encoding=True)
        on.load_state_dict(off.state_dict())
        g = torch.Generator().manual_seed(4)
        obs = torch.randn(2, 6, 3, OBS, generator=g)
        actions = torch.randint(0, ACT, (2, 6, 3), generator=g)
        starts = torch.zeros(2, 6, dtype=torch.bool)
        starts[:, 0] = True
        steps = torch.arange(6)[None, :, None].expand(2, 6, 3)
        a = off.evaluate(obs, actions, off.initial_hidden(2), starts)
        b = on.evaluate(obs, actions, on.initial_hidden(2), starts, step_count=steps)
        assert (a.values - b.values).abs().max() > 0.1 * a.values.abs().max()
        assert (a.log_probs - b.log_probs).abs().max() > 0.1 * a.log_probs.abs().max()
        assert (a.hidden.encoder - b.hidden.encoder).abs().max() > 0.1 * a.hidden.encoder.abs().max()

    def test_step_counts_ride_the_step_record_and_training_recomputes_collection(self) -> None:
        """Over two rollouts of 40 steps with 25-step episodes: each recorded count is 0 at an episode's
        first step and one more than the step before otherwise, across the rollouts too; the update's call
        with those counts gives collection's log-probs and values."""
        with encoded() as built:
            assert STEP_FIELD in built.policy.record_fields
            for _ in range(2):
                built.collector.collect(built.buffer)
                built.returns.compute(built.buffer)
                counts = built.buffer.extras[STEP_FIELD]  # slot t + 1: step t's count
                starts = built.buffer.starts[:-1].bool()
                for t in range(40):
                    before = counts[t]
                    want = torch.where(starts[t], torch.zeros_like(before), before + 1)
                    assert torch.equal(counts[t + 1], want), t
                assert counts.max() == 24  # a whole episode of 25 steps is seen: counts 0..24
                batch = sable_batch(built.buffer, built.policy)
                assert batch.step_count is not None
                torch.testing.assert_close(built.updater.learner.ratio(batch),
                                           torch.ones_like(batch.old_log_probs), atol=2e-6, rtol=0)
                out = built.policy.evaluate(batch.obs, batch.actions, batch.hidden, batch.starts, batch.legal,
                                            batch.step_count)
                torch.testing.assert_close(out.values, batch.old_values, atol=2e-5, rtol=1e-5)
                built.updater.update(built.buffer, 0.0)

    def test_acting_outside_collection_carries_the_step_count(self) -> None:
        with encoded() as built:
            policy = built.policy
            hidden = policy.initial_hidden(4)
            assert isinstance(hidden, SableCarry)
            obs = [o[0] for o in built.buffer.obs]
            _, hidden = policy.act(obs, None, starts=torch.ones(4))
            assert isinstance(hidden, SableCarry) and hidden.steps.tolist() == [0, 0, 0, 0]
            for want in (1, 2):
                _, hidden = policy.act(obs, None, hidden=hidden, starts=torch.tensor([0.0, 0, 1, 0]))
                assert isinstance(hidden, SableCarry)
                assert hidden.steps.tolist() == [want, want, 0, want]

    def test_the_feed_forward_variant_refuses_it(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["check", str(FF), "--set", "updater.objective.timestep_positional_encoding=true"]) == 2
        assert "the timestep encoding is the recurrent Sable's" in " ".join(capsys.readouterr().err.split())

    def test_the_encoded_pipeline_passes_check(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["check", str(REC), "--set", "updater.objective.timestep_positional_encoding=true"]) == 0
