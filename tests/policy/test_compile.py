"""[policy] compile: the compiled minibatch losses step as the eager ones do, to float rounding."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.buffers.rollout import AgentBatch
from harl.policy.on_policy import Actor, PolicyConfig
from harl.update.objectives.ppo import PPOConfig, ppo_learner
from harl.update.v_critic import VCritic, VCriticConfig, VCriticLearner

pytestmark = pytest.mark.slow  # inductor compiles each graph once per process: tens of seconds


def test_compiled_ppo_steps_equal_eager() -> None:
    torch.manual_seed(0)
    eager = Actor(6, spaces.Discrete(4), PolicyConfig(hidden_sizes=(16, 16)))
    compiled = copy.deepcopy(eager)
    compiled.compile_update = True
    g0, g1 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    config = PPOConfig(epochs=2, minibatches=2)
    a, b = ppo_learner(eager, config, g0), ppo_learner(compiled, config, g1)
    assert a.compiled is None and b.compiled is not None
    g = torch.Generator().manual_seed(2)
    batch = AgentBatch(obs=torch.randn(64, 6, generator=g), actions=torch.randint(0, 4, (64, 1), generator=g).float(),
                       old_log_probs=-1.4 - 0.1 * torch.rand(64, 1, generator=g), avail=None,
                       active=torch.ones(64, 1), advantages=torch.randn(64, 1, generator=g))
    factor = 0.5 + torch.rand(64, 1, generator=g)
    for _ in range(2):
        sa, sb = a.update(batch, factor), b.update(batch, factor)
        for field in ("policy_loss", "entropy", "ratio", "grad_norm"):
            assert getattr(sb, field) == pytest.approx(getattr(sa, field), rel=1e-4, abs=1e-6)
    for p, q in zip(eager.parameters(), compiled.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6)


def test_compiled_value_steps_equal_eager() -> None:
    torch.manual_seed(0)
    config = VCriticConfig(hidden_sizes=(16, 16), epochs=2, minibatches=2)
    eager = VCritic(5, 2, config, state_space=spaces.Box(-1, 1, (5,), np.float32))
    compiled = copy.deepcopy(eager)
    a = VCriticLearner(eager, config, torch.Generator().manual_seed(1))
    b = VCriticLearner(compiled, config, torch.Generator().manual_seed(1), compile=True)
    g = torch.Generator().manual_seed(2)
    states, old, returns = torch.randn(48, 5, generator=g), torch.randn(48, generator=g), torch.randn(48, generator=g)
    sa, sb = a.update(states, old, returns), b.update(states, old, returns)
    assert sb.value_loss == pytest.approx(sa.value_loss, rel=1e-4)
    assert sb.grad_norm == pytest.approx(sa.grad_norm, rel=1e-4)
    for p, q in zip(eager.parameters(), compiled.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6)
