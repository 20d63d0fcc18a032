"""The d3qn objective alone: greedy targets, its loss toward the joint critic, best responses."""

from __future__ import annotations

import pytest
import torch
from gymnasium import spaces

from harl.buffers.replay import ReplayBatch
from harl.errors import ConfigError
from harl.policy.off_policy import OffPolicyActors
from harl.policy.on_policy import PolicyConfig
from harl.update.objectives.d3qn import D3QNConfig, make_actor, make_learner
from harl.update.q_critic import JointQCritic, JointQCriticConfig

SPACES = [spaces.Discrete(3), spaces.Discrete(2)]
CONFIG = D3QNConfig(lr=1e-2, polyak=0.25)


def setup(seed: int = 0) -> tuple[list, JointQCritic, ReplayBatch]:
    torch.manual_seed(seed)
    policy = PolicyConfig(hidden_sizes=(8,), input_norm=False)
    team = OffPolicyActors([make_actor(4, s, policy, CONFIG, i, "t.toml") for i, s in enumerate(SPACES)], True)
    critic = JointQCritic(5, SPACES, JointQCriticConfig(hidden_sizes=(8,), dueling_hidden_sizes=(4,)))
    learners = [make_learner(i, team, critic, CONFIG, s) for i, s in enumerate(SPACES)]
    n = 6
    avail = [torch.ones(n, 3), torch.ones(n, 2)]
    avail[0][:, 1] = 0  # agent 0 may never pick action 1
    batch = ReplayBatch(state=torch.randn(n, 5), obs=[torch.randn(n, 4) for _ in SPACES],
                        actions=[torch.zeros(n, 1) for _ in SPACES], avail=avail,
                        active=torch.tensor([[1.0, 1.0]] * 5 + [[0.0, 1.0]]), returns=torch.zeros(n, 2),
                        discount=torch.ones(n), steps=torch.ones(n, dtype=torch.long), next_state=torch.randn(n, 5),
                        next_obs=[torch.randn(n, 4) for _ in SPACES], next_avail=avail)
    return learners, critic, batch


def test_refuses_non_discrete_actions() -> None:
    with pytest.raises(ConfigError) as info:
        make_actor(4, spaces.Box(-1, 1, (2,)), PolicyConfig(), CONFIG, 1, "t.toml")
    assert str(info.value) == ('t.toml: updater.objective.kind: "d3qn" needs Discrete actions, but agent 1 has '
                               'Box(2,); use kind = "sac" (any space) or "td3" (Box)')


def test_next_action_is_the_target_networks_masked_greedy_action() -> None:
    """a' = argmax over allowed actions of the *target* agent network (never the masked action 1)."""
    learners, _, batch = setup()
    action, penalty = learners[0].next_action(batch)
    q = learners[0].target(batch.next_obs[0]).masked_fill(batch.next_avail[0] == 0, -torch.inf)
    assert penalty is None and action.shape == (6, 1)
    assert action.squeeze(-1).tolist() == q.argmax(-1).float().tolist() and 1.0 not in action.tolist()


def test_loss_is_the_alive_mean_squared_gap_to_the_joint_value() -> None:
    """loss_i = mean over alive samples of (Q_i(o_i, a_i) - Q_joint(s, a))^2, from the pre-step weights."""
    learners, critic, batch = setup()
    actions = [learners[i].initial_action(batch) for i in range(2)]
    with torch.no_grad():
        q = learners[0].actor(batch.obs[0]).gather(-1, actions[0].long()).squeeze(-1)
        target = critic.value(batch.state, actions)
        alive = batch.active[:, 0]
        expected = (((q - target) ** 2) * alive).sum() / alive.sum()  # the last sample is dead: left out
    loss = learners[0].update(batch, actions)["actor_loss"]
    assert float(loss) == pytest.approx(float(expected), rel=1e-6)
    for _ in range(20):
        again = learners[0].update(batch, actions)["actor_loss"]
    assert float(again) < float(loss) / 2  # Adam steps toward the fixed joint value shrink the gap


def test_updated_action_is_the_critics_best_response() -> None:
    """Agent 1's slot becomes argmax_b Q_joint(s, a_0, b): checked against enumerating b."""
    learners, critic, batch = setup()
    actions = [learners[i].initial_action(batch) for i in range(2)]
    best = learners[1].updated_action(batch, actions)
    with torch.no_grad():
        values = torch.stack([critic.value(batch.state, [actions[0], torch.full((6, 1), float(b))])
                              for b in range(2)], -1)
    assert best.squeeze(-1).tolist() == values.argmax(-1).float().tolist()


def test_soft_update_moves_the_target_a_polyak_step() -> None:
    """target <- (1 - 0.25) target + 0.25 online."""
    learners, _, _ = setup()
    online, target = next(learners[0].actor.parameters()), next(learners[0].target.parameters())
    with torch.no_grad():
        online.add_(1.0)
    expected = 0.75 * target.detach().clone() + 0.25 * online.detach()
    learners[0].soft_update()
    torch.testing.assert_close(target.detach(), expected)
