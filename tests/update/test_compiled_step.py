"""``[policy] compile``: the whole on-policy minibatch step compiled (loss, backward, clip, optimiser step)
leaves the same weights as the eager step, to float rounding; the switch's values."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.buffers.rollout import AgentBatch
from harl.policy.config import PolicyConfig as PolicyTable
from harl.policy.on_policy import Actor, PolicyConfig
from harl.update import compiled as compiled_module
from harl.update.common import set_lr
from harl.update.compiled import compile_mode, worth_compiling
from harl.update.independent_v import IndependentVConfig, IndependentVCritic, IndependentVLearner
from harl.update.objectives.a2c import A2CConfig, a2c_learner
from harl.update.objectives.ppo import PPOConfig, ppo_learner
from harl.update.v_critic import VCritic, VCriticConfig, VCriticLearner


class TestTheSwitch:
    def test_old_booleans_mean_on_and_off(self) -> None:
        """``compile = true / false`` (before issue 49) read as "on" / "off", in the table and in the learners."""
        assert PolicyTable(compile=True).compile == "on"  # type: ignore[arg-type]
        assert PolicyTable(compile=False).compile == "off"  # type: ignore[arg-type]
        assert PolicyTable().compile == "off"
        assert [compile_mode(v) for v in (True, False, "auto")] == ["on", "off", "auto"]

    def test_an_unknown_value_is_refused(self) -> None:
        """Anything but off, on, auto (or a boolean) is refused, naming the choices."""
        with pytest.raises(ValueError, match="expected one of: off, on, auto"):
            PolicyTable(compile="maybe")

    def test_auto_compiles_only_long_runs(self) -> None:
        """auto: compile when the minibatch steps saved pay for the compile (the rule's arithmetic)."""
        assert worth_compiling(steps=1_000, compile_s=60.0, saved_per_step_s=0.001) is False
        assert worth_compiling(steps=100_000, compile_s=60.0, saved_per_step_s=0.001) is True
        assert worth_compiling(steps=10**9, compile_s=60.0, saved_per_step_s=0.0) is False

    @pytest.mark.parametrize(("updates", "compiles"), [(10, False), (1_000, True)])
    def test_auto_decides_at_the_second_update(self, monkeypatch: pytest.MonkeyPatch, updates: int,
                                               compiles: bool) -> None:
        """The first update is timed eager; at the second (progress 1/n) the n - 1 updates left decide, for
        the "auto" learners only: a run of 10 updates does not earn two learners' 1 s compiles back at 5 % of 0.2 s saved per
        update (0.09 s), one of 1,000 does (9.99 s)."""
        monkeypatch.setattr(compiled_module, "COMPILE_SECONDS", 1.0)
        monkeypatch.setattr(compiled_module, "SAVED_FRACTION", 0.05)
        learners = [Stub("auto"), Stub("off"), Stub("auto")]
        auto = compiled_module.AutoCompile(learners)
        auto.finish(auto.start() - 0.2, 0.0)
        assert [s.enabled for s in learners] == [False] * 3
        auto.finish(auto.start(), 1 / updates)
        assert [s.enabled for s in learners] == [compiles, False, compiles]
        auto.finish(auto.start(), 2 / updates)  # decided once
        assert sum(s.calls for s in learners) == (2 if compiles else 0)


class Stub:
    """A learner that records ``enable_compile``."""

    def __init__(self, compile: str) -> None:
        self.compile, self.enabled, self.calls = compile, False, 0

    def enable_compile(self) -> None:
        self.enabled, self.calls = True, self.calls + 1


# inductor compiles each graph once per process: a minute or more on two shared cores
@pytest.mark.slow
@pytest.mark.parametrize("objective", ["ppo", "a2c"])
def test_compiled_actor_steps_equal_eager(objective: str) -> None:
    """Three updates (two epochs of two minibatches each), the rate changed between them (lr_decay): the
    compiled step's weights, losses and gradient norms are the eager step's."""
    torch.manual_seed(0)
    eager = Actor(6, spaces.Box(-1, 1, (2,), np.float32), PolicyConfig(hidden_sizes=(16, 16)))
    fast = copy.deepcopy(eager)
    fast.compile_update = "on"  # type: ignore[assignment]
    start = [p.detach().clone() for p in eager.parameters()]
    make, config = (ppo_learner, PPOConfig(epochs=2, minibatches=2)) if objective == "ppo" else \
        (a2c_learner, A2CConfig(epochs=2, minibatches=2))
    a = make(eager, config, torch.Generator().manual_seed(1))  # type: ignore[operator]
    b = make(fast, config, torch.Generator().manual_seed(1))  # type: ignore[operator]
    assert a.compiled_step is None and b.compiled_step is not None
    g = torch.Generator().manual_seed(2)
    batch = AgentBatch(obs=torch.randn(64, 6, generator=g), actions=torch.rand(64, 2, generator=g) * 2 - 1,
                       old_log_probs=-1.0 - 0.1 * torch.rand(64, 2, generator=g), avail=None,
                       active=torch.ones(64, 1), advantages=torch.randn(64, 1, generator=g))
    factor = 0.5 + torch.rand(64, 1, generator=g)
    for scale in (1.0, 0.5, 0.25):
        set_lr([a, b], scale)
        sa, sb = a.update(batch, factor), b.update(batch, factor)
        for field in ("policy_loss", "entropy", "ratio", "grad_norm"):
            assert getattr(sb, field) == pytest.approx(getattr(sa, field), rel=1e-4, abs=1e-6)
    assert a.optimizer.param_groups[0]["lr"] == b.optimizer.param_groups[0]["lr"] == config.lr * 0.25
    for p, q in zip(eager.parameters(), fast.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6)
    assert not all(torch.equal(p, s) for p, s in zip(eager.parameters(), start))  # the steps moved the weights


@pytest.mark.slow
def test_compiled_v_critic_steps_equal_eager() -> None:
    """The V critic (value clip, Huber, value normaliser): weights after two updates of two epochs x two
    minibatches equal the eager learner's."""
    torch.manual_seed(0)
    config = VCriticConfig(hidden_sizes=(16, 16), epochs=2, minibatches=2)
    eager = VCritic(5, 2, config, state_space=spaces.Box(-1, 1, (5,), np.float32))
    fast = copy.deepcopy(eager)
    a = VCriticLearner(eager, config, torch.Generator().manual_seed(1))
    b = VCriticLearner(fast, config, torch.Generator().manual_seed(1), compile="on")
    assert b.compiled_step is not None
    g = torch.Generator().manual_seed(2)
    for _ in range(2):
        states, old, returns = torch.randn(48, 5, generator=g), torch.randn(48, generator=g), torch.randn(48, generator=g)
        sa, sb = a.update(states, old, returns), b.update(states, old, returns)
        assert sb.value_loss == pytest.approx(sa.value_loss, rel=1e-4)
        assert sb.grad_norm == pytest.approx(sa.grad_norm, rel=1e-4)
    for p, q in zip(eager.parameters(), fast.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("interleave", [False, True])
def test_compiled_independent_v_steps_equal_eager(interleave: bool) -> None:
    """EPyMARL's independent critic with a soft target (whose parameters never step): the compiled step
    moves only the trainable ones, as the eager step; whole updates and interleaved rounds alike."""
    torch.manual_seed(0)
    config = IndependentVConfig(hidden_sizes=(16, 16), recurrent="none", epochs=2, minibatches=1, polyak=0.01,
                                interleave=interleave, value_norm=False)
    eager = IndependentVCritic([(3,), (3,)], config)
    fast = copy.deepcopy(eager)
    a = IndependentVLearner(eager, config, torch.Generator().manual_seed(1))
    b = IndependentVLearner(fast, config, torch.Generator().manual_seed(1), compile="on")
    assert b.compiled_step is not None and b.compiled_step.optimizer is b.optimizer
    g = torch.Generator().manual_seed(2)
    states, returns = torch.randn(40, 2, 3, generator=g), torch.randn(40, 2, generator=g)
    for _ in range(2):
        if interleave:
            for _ in range(config.epochs):
                torch.testing.assert_close(b.advantage_step(states, returns), a.advantage_step(states, returns),
                                           rtol=1e-4, atol=1e-6)
            sa, sb = a.end_update(), b.end_update()
        else:
            old = torch.randn(40, 2, generator=g)
            sa, sb = a.update(states, old, returns), b.update(states, old, returns)
        assert sb.value_loss == pytest.approx(sa.value_loss, rel=1e-4)
    for p, q in zip(eager.parameters(), fast.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6)
