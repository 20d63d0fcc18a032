"""The A2C objective on a hand-computed example, its gradient, and the learner's epochs."""

from __future__ import annotations

import math

import attrs
import torch
from gymnasium import spaces

from harl.buffers.rollout import AgentBatch
from harl.policy.on_policy import Actor, PolicyConfig
from harl.update.objectives.a2c import A2CConfig, a2c_learner, a2c_loss
from harl.update.objectives.ppo import PPOConfig
from harl.update.objectives.surrogate import SurrogateConfig


def test_a2c_and_ppo_share_their_keys_in_the_written_order() -> None:
    """The keys SurrogateLearner reads are defined once (SurrogateConfig); ``kind`` and each
    objective's own keys still come first, as ``harl stages`` and a dumped pipeline.toml list them."""
    shared = ["epochs", "minibatches", "entropy_coef", "lr", "adam_eps", "max_grad_norm", "action_aggregation"]
    assert [f.name for f in attrs.fields(SurrogateConfig)] == shared
    assert [f.name for f in attrs.fields(A2CConfig)] == ["kind", *shared]
    assert [f.name for f in attrs.fields(PPOConfig)] == ["kind", "clip", *shared]
    assert (A2CConfig().kind, PPOConfig().kind, A2CConfig().lr, PPOConfig().epochs) == ("a2c", "ppo", 5e-4, 5)


def test_loss_hand_example() -> None:
    """Four samples: -(sum of factor * r * A over the active ones) / 3, never clipped."""
    ratio = torch.tensor([[1.5], [0.5], [1.0], [2.0]])
    adv = torch.tensor([[1.0], [-2.0], [3.0], [5.0]])
    factor = torch.tensor([[1.0], [2.0], [0.5], [1.0]])
    active = torch.tensor([[1.0], [1.0], [1.0], [0.0]])  # the last sample is masked out
    # 1.5 * 1 * 1 + 0.5 * -2 * 2 + 1.0 * 3 * 0.5 = 1.5 - 2.0 + 1.5 = 1.0
    assert math.isclose(a2c_loss(ratio, adv, factor, active).item(), -1.0 / 3, rel_tol=1e-6)


def test_gradient_at_the_rollout_policy_is_factor_times_advantage() -> None:
    """At r = 1 the loss's gradient in log pi is -factor * A / n_active: the HA policy gradient."""
    log_ratio = torch.zeros(3, 1, requires_grad=True)
    adv = torch.tensor([[2.0], [-1.0], [4.0]])
    factor = torch.tensor([[0.5], [3.0], [1.0]])
    active = torch.tensor([[1.0], [1.0], [0.0]])
    a2c_loss(log_ratio.exp(), adv, factor, active).backward()
    torch.testing.assert_close(log_ratio.grad, torch.tensor([[-0.5], [1.5], [0.0]]))


def test_learner_takes_epochs_times_minibatches_steps() -> None:
    """epochs 3 x minibatches 2 = 6 Adam steps; the positive-advantage action becomes likelier."""
    torch.manual_seed(0)
    actor = Actor(2, spaces.Discrete(3), PolicyConfig(hidden_sizes=(8,)))
    n = 32
    actions = torch.zeros(n, 1)  # always action 0 ...
    with torch.no_grad():
        old, _ = actor.evaluate(torch.ones(n, 2), actions, None)
    batch = AgentBatch(obs=torch.ones(n, 2), actions=actions, old_log_probs=old, avail=None,
                       active=torch.ones(n, 1), advantages=torch.ones(n, 1))  # ... and it was good
    learner = a2c_learner(actor, A2CConfig(epochs=3, minibatches=2, lr=0.01), torch.Generator())
    stats = learner.update(batch, torch.ones(n, 1))
    assert learner.optimizer.state[next(actor.parameters())]["step"].item() == 6
    assert float(learner.ratio(batch).min()) > 1.0
    assert stats.factor == 1.0
