"""``[updater] compile``: the fused minibatch step (forward, backward, clip and Adam as one function,
``harl.update.fused``) leaves what the eager step leaves, to float rounding: the losses and gradient
norms it reports, the weights, and Adam's state; and the switch's rules.

The function is tested uncompiled here (fast); the same function compiled by inductor is the ``slow``
test at the end (a compile takes a minute or more on two shared cores).
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.buffers.rollout import AgentBatch
from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.errors import ConfigError
from harl.policy.on_policy import Actor, PolicyConfig
from harl.update import fused as fused_module
from harl.update.common import set_lr
from harl.update.fused import CompileSwitch, compile_checks
from harl.update.independent_v import IndependentVConfig, IndependentVCritic, IndependentVLearner
from harl.update.objectives.a2c import A2CConfig, a2c_learner
from harl.update.objectives.ppo import PPOConfig, ppo_learner
from harl.update.sequential import SequentialConfig
from harl.update.simultaneous import SimultaneousConfig
from harl.update.v_critic import VCritic, VCriticConfig, VCriticLearner
from tests.collect.test_on_policy import counting_pipeline

TOL = {"rtol": 1e-5, "atol": 1e-6}


def actor_batch(discrete: bool, n: int = 64, seed: int = 2) -> tuple[AgentBatch, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    if discrete:
        actions = torch.randint(0, 4, (n, 1), generator=g).float()
        avail = torch.ones(n, 4)
        avail[::3, 1] = 0.0
        actions[::3] = 0.0
        old = -1.4 - 0.1 * torch.rand(n, 1, generator=g)
    else:
        actions, avail = torch.rand(n, 2, generator=g) * 2 - 1, None
        old = -1.0 - 0.1 * torch.rand(n, 2, generator=g)
    active = (torch.rand(n, 1, generator=g) > 0.1).float()
    batch = AgentBatch(obs=torch.randn(n, 6, generator=g), actions=actions, old_log_probs=old, avail=avail,
                       active=active, advantages=torch.randn(n, 1, generator=g))
    return batch, 0.5 + torch.rand(n, 1, generator=g)


def assert_same_adam(a: torch.optim.Optimizer, b: torch.optim.Optimizer, pa: list[torch.Tensor],
                     pb: list[torch.Tensor]) -> None:
    for p, q in zip(pa, pb):
        sa, sb = a.state[p], b.state[q]
        assert float(sa["step"]) == float(sb["step"]) > 0
        assert sa["step"].dtype == sb["step"].dtype
        torch.testing.assert_close(sb["exp_avg"], sa["exp_avg"], **TOL)
        torch.testing.assert_close(sb["exp_avg_sq"], sa["exp_avg_sq"], rtol=1e-5, atol=1e-9)
    # the optimiser's state_dict (a checkpoint) reads the same
    torch.testing.assert_close(b.state_dict()["state"], a.state_dict()["state"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("objective", "discrete", "clip"), [("ppo", False, 10.0), ("ppo", True, 0.05),
                                                             ("a2c", False, 0.0), ("ppo", False, 0.0)])
def test_fused_actor_steps_equal_eager(objective: str, discrete: bool, clip: float) -> None:
    """Three updates of two epochs x two minibatches, the rate changed between them (lr_decay): the
    fused step's reported losses, entropies, ratios and gradient norms, the weights and Adam's state are
    the eager step's (a tight clip, 0.05, clips every step; 0 clips none)."""
    torch.manual_seed(0)
    space = spaces.Discrete(4) if discrete else spaces.Box(-1, 1, (2,), np.float32)
    eager = Actor(6, space, PolicyConfig(hidden_sizes=(16, 16)))
    fast = copy.deepcopy(eager)
    make, config = ((ppo_learner, PPOConfig(epochs=2, minibatches=2, max_grad_norm=clip)) if objective == "ppo"
                    else (a2c_learner, A2CConfig(epochs=2, minibatches=2, max_grad_norm=clip)))
    a = make(eager, config, torch.Generator().manual_seed(1))  # type: ignore[operator]
    b = make(fast, config, torch.Generator().manual_seed(1))  # type: ignore[operator]
    assert b.fusable() is None
    b.enable_fused(compile=False)
    batch, factor = actor_batch(discrete)
    start = [p.detach().clone() for p in eager.parameters()]
    for scale in (1.0, 0.5, 0.25):
        set_lr([a, b], scale)
        sa, sb = a.update(batch, factor), b.update(batch, factor)
        for field in ("policy_loss", "entropy", "ratio", "grad_norm", "factor"):
            assert getattr(sb, field) == pytest.approx(getattr(sa, field), rel=1e-5, abs=1e-7), field
        torch.testing.assert_close(b.ratio(batch), a.ratio(batch), **TOL)  # the HA factor's next term
    assert a.optimizer.param_groups[0]["lr"] == b.optimizer.param_groups[0]["lr"] == config.lr * 0.25
    for p, q in zip(eager.parameters(), fast.parameters()):
        torch.testing.assert_close(q, p, **TOL)
    assert_same_adam(a.optimizer, b.optimizer, list(eager.parameters()), list(fast.parameters()))
    assert not all(torch.equal(p, s) for p, s in zip(eager.parameters(), start))  # the steps moved the weights


def test_eager_after_fused_and_fused_after_eager() -> None:
    """The fused step keeps the module's parameters and the optimiser's state (what checkpoints save): eager
    steps after fused ones, and fused ones after a reloaded optimiser, go on from the same state."""
    torch.manual_seed(0)
    eager = Actor(6, spaces.Box(-1, 1, (2,), np.float32), PolicyConfig(hidden_sizes=(16, 16)))
    fast = copy.deepcopy(eager)
    config = PPOConfig(epochs=1, minibatches=2)
    a = ppo_learner(eager, config, torch.Generator().manual_seed(1))
    b = ppo_learner(fast, config, torch.Generator().manual_seed(1))
    batch, factor = actor_batch(False)
    a.update(batch, factor)
    b.update(batch, factor)  # eager first: Adam's state made by torch
    b.enable_fused(compile=False)
    a.update(batch, factor)
    b.update(batch, factor)
    saved = copy.deepcopy(b.optimizer.state_dict())
    b.fused = None  # back to eager
    a.update(batch, factor)
    b.update(batch, factor)
    b.optimizer.load_state_dict(b.optimizer.state_dict())  # fresh state tensors: the step reads them anew
    b.enable_fused(compile=False)
    a.update(batch, factor)
    b.update(batch, factor)
    for p, q in zip(eager.parameters(), fast.parameters()):
        torch.testing.assert_close(q, p, **TOL)
    assert_same_adam(a.optimizer, b.optimizer, list(eager.parameters()), list(fast.parameters()))
    assert float(saved["state"][0]["step"]) == 4


def test_a_failed_compile_leaves_the_eager_step(monkeypatch: Any) -> None:
    """A network the compiler cannot take: one warning line, nothing changed by the failed call, and the
    learner's eager steps from then on (the same weights as a learner that never tried, bit for bit)."""
    def broken(fn: Any) -> Any:
        def call(*args: Any) -> Any:
            raise RuntimeError("Unsupported: a made-up reason\nwith a second line")
        return call
    monkeypatch.setattr(fused_module, "compiled", broken)
    monkeypatch.setattr(fused_module, "use_cache_dir", lambda: None)
    torch.manual_seed(0)
    eager = Actor(6, spaces.Box(-1, 1, (2,), np.float32), PolicyConfig(hidden_sizes=(16, 16)))
    fast = copy.deepcopy(eager)
    config = PPOConfig(epochs=2, minibatches=2)
    a = ppo_learner(eager, config, torch.Generator().manual_seed(1))
    b = ppo_learner(fast, config, torch.Generator().manual_seed(1))
    b.enable_fused()
    batch, factor = actor_batch(False)
    with pytest.warns(RuntimeWarning, match="the actors' update stays eager: the compile failed "
                                            "\\(RuntimeError: Unsupported: a made-up reason\\)"):
        sb = b.update(batch, factor)
    assert b.fused is None and a.update(batch, factor) == sb
    for p, q in zip(eager.parameters(), fast.parameters()):
        assert torch.equal(p, q)


@pytest.mark.parametrize("value_norm", [True, False])
def test_fused_v_critic_steps_equal_eager(value_norm: bool) -> None:
    """The V critic (value clip, Huber, value normaliser updated per minibatch outside the step): losses,
    gradient norms, weights and Adam's state after two updates of two epochs x two minibatches."""
    torch.manual_seed(0)
    config = VCriticConfig(hidden_sizes=(16, 16), epochs=2, minibatches=2, value_norm=value_norm,
                           value_loss_coef=0.5, huber_delta=0.5)
    eager = VCritic(5, 2, config, state_space=spaces.Box(-1, 1, (5,), np.float32))
    fast = copy.deepcopy(eager)
    a = VCriticLearner(eager, config, torch.Generator().manual_seed(1))
    b = VCriticLearner(fast, config, torch.Generator().manual_seed(1))
    b.enable_fused(compile=False)
    g = torch.Generator().manual_seed(2)
    for _ in range(2):
        states, old, returns = torch.randn(48, 5, generator=g), torch.randn(48, generator=g), torch.randn(48, generator=g)
        sa, sb = a.update(states, old, returns), b.update(states, old, returns)
        assert sb.value_loss == pytest.approx(sa.value_loss, rel=1e-5)
        assert sb.grad_norm == pytest.approx(sa.grad_norm, rel=1e-5)
    for p, q in zip(eager.parameters(), fast.parameters()):
        torch.testing.assert_close(q, p, **TOL)
    assert_same_adam(a.optimizer, b.optimizer, list(eager.parameters()), list(fast.parameters()))


def test_fused_independent_v_steps_equal_eager() -> None:
    """IPPO's critic (JaxMARL's settings: shared, no id, squared error, no value normalisation) and one with
    a soft target, whose parameters the step must leave alone."""
    torch.manual_seed(0)
    for config in (IndependentVConfig(hidden_sizes=(16, 16), activation="tanh", agent_id=False, input_norm=False,
                                      epochs=2, minibatches=2, value_loss_coef=0.5, huber_delta=0.0,
                                      max_grad_norm=0.5, value_norm=False),
                   IndependentVConfig(hidden_sizes=(16, 16), recurrent="none", epochs=2, minibatches=2,
                                      polyak=0.01, value_norm=False)):
        eager = IndependentVCritic([(3,), (3,)], config)
        fast = copy.deepcopy(eager)
        a = IndependentVLearner(eager, config, torch.Generator().manual_seed(1))
        b = IndependentVLearner(fast, config, torch.Generator().manual_seed(1))
        b.enable_fused(compile=False)
        g = torch.Generator().manual_seed(2)
        states, returns = torch.randn(40, 2, 3, generator=g), torch.randn(40, 2, generator=g)
        for _ in range(2):
            old = torch.randn(40, 2, generator=g)
            sa, sb = a.update(states, old, returns), b.update(states, old, returns)
            assert sb.value_loss == pytest.approx(sa.value_loss, rel=1e-5)
            assert sb.grad_norm == pytest.approx(sa.grad_norm, rel=1e-5)
        for p, q in zip(eager.parameters(), fast.parameters()):
            torch.testing.assert_close(q, p, **TOL)
        assert_same_adam(a.optimizer, b.optimizer, a.trainable(), b.trainable())


@pytest.mark.parametrize("kind", ["sequential", "simultaneous"])
def test_updater_compile_on_equals_off(monkeypatch: Any, kind: str) -> None:
    """A whole pipeline (a fake env of three agents, Box and Discrete with masks, HA or MA, a V critic with
    value normalisation): ``[updater] compile = "on"`` (its function uncompiled here) and "off" give the
    same update rows and weights, over two iterations, to float rounding; the HA factor included."""
    monkeypatch.setattr(fused_module, "compiled", lambda fn: fn)
    monkeypatch.setattr(fused_module, "use_cache_dir", lambda: None)
    built = []
    for mode in ("off", "on"):
        data = counting_pipeline(rollout_length=8)
        data["updater"] = {"kind": kind, "compile": mode,
                           "objective": {"epochs": 2, "minibatches": 2, "max_grad_norm": 0.5}}
        data["critic"] = {"hidden_sizes": [8], "epochs": 2, "minibatches": 2}
        built.append(build_stages(structure_pipeline(data, "counting")))
    eager, fast = built
    try:
        learners = fast.updater.fused.learners
        assert len(learners) == 4 and all(learner.fused is not None for learner in learners)
        assert eager.updater.fused.learners == []
        for k in range(2):
            rows = []
            for stages in built:
                torch.manual_seed(10 + k)  # the same draws for both (building seeds the global generator)
                stages.collector.collect(stages.buffer)
                stages.returns.compute(stages.buffer)
                rows.append(stages.updater.update(stages.buffer, progress=k / 4).row())
            assert rows[1].keys() == rows[0].keys()
            for key, value in rows[0].items():
                assert rows[1][key] == (pytest.approx(value, rel=1e-4, abs=1e-6) if isinstance(value, float)
                                        else value), key
        for a, b in ((eager.policy, fast.policy), (eager.critic, fast.critic)):
            for p, q in zip(a.parameters(), b.parameters()):
                torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6)
    finally:
        for stages in built:
            stages.close()


def test_the_old_policy_compile_takes_the_fused_step(monkeypatch: Any) -> None:
    """``[policy] compile = true`` (issue 49's key, folded into ``[updater] compile`` by issue 58) builds the
    same learners as ``[updater] compile = "on"``: every one on the fused step, the one compiled path."""
    from harl.config import renames
    from harl.errors import HarlDeprecationWarning

    monkeypatch.setattr(fused_module, "compiled", lambda fn: fn)
    monkeypatch.setattr(fused_module, "use_cache_dir", lambda: None)
    monkeypatch.setattr(renames, "_WARNED", set())
    data = counting_pipeline(rollout_length=8)
    data["policy"] = {**data.get("policy", {}), "compile": True}
    data["critic"] = {"hidden_sizes": [8]}
    with pytest.warns(HarlDeprecationWarning, match=r"\[policy\] compile is deprecated: use \[updater\] compile"):
        spec = structure_pipeline(data, "counting")
    assert spec.updater.compile == "on" and not hasattr(spec.policy, "compile")
    stages = build_stages(spec)
    try:
        learners = stages.updater.fused.learners
        assert stages.updater.fused.state == "compiled"
        assert len(learners) == 4 and all(learner.fused is not None for learner in learners)
        assert not any(hasattr(learner, "compiled_step") for learner in learners)  # no second path
    finally:
        stages.close()


# ---------------------------------------------------------------------- the switch


class Learner:
    """A learner that records ``enable_fused`` (and says why not, where ``why``)."""

    def __init__(self, why: str | None = None, compile_s: float = 0.0) -> None:
        self.why, self.fused, self.enabled, self.compile_s = why, None, 0, compile_s

    def fusable(self) -> str | None:
        return self.why

    def enable_fused(self, compile: bool = True) -> None:
        self.enabled += 1
        self.fused = type("Step", (), {"compile_s": self.compile_s})()


def test_the_key_and_its_values() -> None:
    """Both on-policy updaters take the key, "off" by default; anything but off, on, auto is refused."""
    assert SequentialConfig().compile == SimultaneousConfig().compile == "off"
    assert SequentialConfig(compile="auto").compile == "auto"
    with pytest.raises(ValueError, match="expected one of: off, on, auto"):
        SimultaneousConfig(compile="maybe")


def test_on_where_nothing_can_compile_is_refused_at_load() -> None:
    """"on" with another objective (TRPO, an off-policy one) or recurrent networks names the key; auto and off pass."""
    policy = type("P", (), {"recurrent": "naive"})()
    trpo = SequentialConfig(compile="on", objective=type("O", (), {"kind": "trpo"})())
    assert [k for k, _ in compile_checks(trpo, {})] == [["updater", "compile"]]
    assert [k for k, _ in compile_checks(SequentialConfig(compile="on"), {"policy": policy})] == [["updater", "compile"]]
    assert list(compile_checks(SequentialConfig(compile="on"), {})) == []
    assert list(compile_checks(SequentialConfig(compile="auto"), {"policy": policy})) == []
    assert issubclass(ConfigError, Exception)


def test_on_enables_every_learner_that_can_and_says_which_cannot() -> None:
    learners = [Learner(), Learner("a recurrent actor's update"), Learner()]
    with pytest.warns(RuntimeWarning, match="1 learner\\(s\\) stay eager: a recurrent actor's update"):
        switch = CompileSwitch("on", [learners[0], learners[1], learners[2], learners[0]])  # a shared actor once
    assert [learner.enabled for learner in learners] == [1, 0, 1] and switch.active
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not CompileSwitch("off", [Learner("no")]).active  # off: no note


def test_auto_compiles_after_the_expected_compile_and_keeps_it_only_if_faster(monkeypatch: Any) -> None:
    """auto: eager until the eager updates' time reaches the expected compile, then compiled; the compiling
    update is recorded and not timed; the next TRIAL_UPDATES decide against the eager median."""
    records: dict[str, float] = {}
    monkeypatch.setattr(fused_module, "recorded_compile_s", lambda sig: records.get(sig))
    monkeypatch.setattr(fused_module, "record_compile_s", lambda sig, s: records.__setitem__(sig, s))
    monkeypatch.setattr(fused_module, "use_cache_dir", lambda: None)
    monkeypatch.setattr(fused_module, "COLD_COMPILE_S", 1.0)
    for compiled_s, keeps in ((0.1, True), (0.3, False)):
        learner = Learner(compile_s=5.0)
        switch = CompileSwitch("auto", [learner])
        assert learner.enabled == 0 and not switch.active
        for _ in range(5):  # 0.25 s each: the fifth reaches the expected 1 s
            switch.finish(switch.start() - 0.25, (32, 128, 3))
        assert learner.enabled == 1 and switch.active and switch.state == "trial"
        switch.finish(switch.start() - 60.0, (32, 128, 3))  # the compiling update
        assert list(records.values())[-1] == 5.0
        for _ in range(fused_module.TRIAL_UPDATES):
            switch.finish(switch.start() - compiled_s, (32, 128, 3))
        assert switch.state == ("compiled" if keeps else "dropped")
        assert (learner.fused is not None) == keeps and switch.active == keeps
        switch.finish(switch.start() - 0.01, (32, 128, 3))  # decided once
        assert learner.enabled == 1
        records.clear()


# inductor compiles each graph once per process: a minute or more on two shared cores
@pytest.mark.slow
def test_compiled_fused_steps_equal_eager() -> None:
    """The fused function compiled (one graph: forward, backward, clip, Adam) against the eager step: a PPO
    actor on discrete actions with a mask, and the V critic with value normalisation."""
    torch.manual_seed(0)
    eager = Actor(6, spaces.Discrete(4), PolicyConfig(hidden_sizes=(16, 16)))
    fast = copy.deepcopy(eager)
    config = PPOConfig(epochs=2, minibatches=2, max_grad_norm=0.5)
    a = ppo_learner(eager, config, torch.Generator().manual_seed(1))
    b = ppo_learner(fast, config, torch.Generator().manual_seed(1))
    b.enable_fused(compile=True)
    batch, factor = actor_batch(True)
    for scale in (1.0, 0.5):
        set_lr([a, b], scale)
        sa, sb = a.update(batch, factor), b.update(batch, factor)
        for field in ("policy_loss", "entropy", "ratio", "grad_norm"):
            assert getattr(sb, field) == pytest.approx(getattr(sa, field), rel=1e-4, abs=1e-6), field
    for p, q in zip(eager.parameters(), fast.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6)
    assert_same_adam(a.optimizer, b.optimizer, list(eager.parameters()), list(fast.parameters()))

    vconfig = VCriticConfig(hidden_sizes=(16, 16), epochs=2, minibatches=2)
    veager = VCritic(5, 2, vconfig, state_space=spaces.Box(-1, 1, (5,), np.float32))
    vfast = copy.deepcopy(veager)
    va = VCriticLearner(veager, vconfig, torch.Generator().manual_seed(1))
    vb = VCriticLearner(vfast, vconfig, torch.Generator().manual_seed(1))
    vb.enable_fused(compile=True)
    g = torch.Generator().manual_seed(2)
    for _ in range(2):
        states, old, returns = torch.randn(48, 5, generator=g), torch.randn(48, generator=g), torch.randn(48, generator=g)
        sa_, sb_ = va.update(states, old, returns), vb.update(states, old, returns)
        assert sb_.value_loss == pytest.approx(sa_.value_loss, rel=1e-4)
        assert sb_.grad_norm == pytest.approx(sa_.grad_norm, rel=1e-4)
    for p, q in zip(veager.parameters(), vfast.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6)
