"""The joint updater's view of a rollout (``team_batch``) and one update through it: every agent of
an env step in one row, advantages standardised over every agent's active samples as MAT's trainer
does (``np.nanmean`` / ``np.nanstd`` with the dead agents' entries set to NaN), old values in the
normaliser's units; MAT's decoding orders from the step records the buffer stored."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from harl.buffers.records import StartRecord, StepRecord
from harl.buffers.rollout import RolloutBuffer
from harl.policy import mat_orders
from harl.policy.mat_policy import TransformerPolicy
from harl.update.joint import JointConfig, JointUpdater, team_batch
from harl.update.mat_values import MATValuesConfig, TransformerValueLoss, TransformerValues
from harl.update.objectives.mat import MATConfig, TransformerLearner

T, E, A, OBS, N_ACT = 5, 3, 2, 4, 3


def filled(order: str = "fixed") -> tuple[RolloutBuffer, TransformerPolicy, TransformerValueLoss]:
    """A rollout collected as the on-policy collector does: the policy's values, its record fields."""
    torch.manual_seed(0)
    obs_spaces = [spaces.Box(-1, 1, (OBS,)), spaces.Box(-1, 1, (OBS - 1,))]  # the second agent's is padded
    act_spaces = [spaces.Discrete(N_ACT)] * A
    policy = TransformerPolicy(obs_spaces, act_spaces, 1, 8, 1, order=order, generator=torch.Generator().manual_seed(1))
    critic = TransformerValues(policy, MATValuesConfig())
    buffer = RolloutBuffer(obs_spaces, act_spaces, state_dim=2, n_envs=E, length=T, fp_state=True,
                           critic_reads=critic.reads, record_fields=policy.record_fields)

    def observe() -> list[torch.Tensor]:
        return [torch.randn(E, s.shape[0]) for s in obs_spaces]

    avail = [torch.ones(E, N_ACT) for _ in range(A)]
    buffer.start(StartRecord(observe(), torch.zeros(E, 2), avail))
    for t in range(T):
        inputs = buffer.inputs(t)
        sampled = policy.sample(inputs.obs, inputs.avail, starts=inputs.starts, carried=inputs.extras)
        assert torch.equal(critic.denormalize(sampled.values), critic.value(critic.reads(inputs.obs, None)))
        active = torch.ones(E, A)
        active[0, 1] = float(t >= 2)  # agent 1 of env 0 is dead from step 1 to step 2
        starts = torch.zeros(E)
        starts[1] = float(t == 2)  # env 1's next episode begins at step 3
        buffer.insert(StepRecord(actions=sampled.actions, log_probs=sampled.log_probs,
                                 values=critic.denormalize(sampled.values), obs=observe(), avail=avail,
                                 state=torch.zeros(E, 2), rewards=torch.randn(E, A),
                                 terminated=torch.zeros(E, dtype=torch.bool), truncated=torch.zeros(E, dtype=torch.bool),
                                 active=active, starts=starts, extras=sampled.extras))
    buffer.finish(torch.zeros(E, A))
    advantages, returns = torch.randn(T, E, A), torch.randn(T, E, A)
    buffer.set_targets(advantages, returns)
    return buffer, policy, TransformerValueLoss(critic, MATValuesConfig())


def test_team_batch_layout_and_advantages() -> None:
    buffer, _, value_loss = filled()
    batch = team_batch(buffer, value_loss)
    n = T * E
    assert batch.obs.shape == (n, A, OBS) and batch.actions.shape == (n, A, 1)
    assert batch.avail is not None and batch.avail.shape == (n, A, N_ACT)
    t, e = 3, 2  # row t * E + e is env e's step t, every agent in it
    row = t * E + e
    assert torch.equal(batch.obs[row, 0], buffer.obs[0][t, e])
    assert torch.equal(batch.obs[row, 1, : OBS - 1], buffer.obs[1][t, e]) and batch.obs[row, 1, -1] == 0
    assert torch.equal(batch.actions[row, 1], buffer.actions[1][t, e])
    assert torch.equal(batch.active, buffer.active[:-1].reshape(n, A))
    # MAT's trainer: advantages_copy[active_masks == 0] = nan; (adv - nanmean) / (nanstd + 1e-5)
    adv = buffer.advantages.numpy().copy()
    adv[buffer.active[:-1].numpy() == 0] = np.nan
    expected = (buffer.advantages.numpy() - np.nanmean(adv)) / (np.nanstd(adv) + 1e-5)
    np.testing.assert_allclose(batch.advantages.numpy(), expected.reshape(n, A), rtol=1e-5, atol=1e-6)
    assert torch.equal(batch.returns, buffer.returns.reshape(n, A))


def test_one_joint_update_moves_the_whole_transformer() -> None:
    buffer, policy, value_loss = filled()
    learner = TransformerLearner(policy, MATConfig(epochs=2, minibatches=3), torch.Generator().manual_seed(0))
    updater = JointUpdater(JointConfig(), learner, value_loss, learner.generator)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    row = updater.update(buffer, progress=0.5).row()
    assert set(row) == {"policy_loss", "value_loss", "entropy", "ratio", "grad_norm", "lr_scale"}
    moved = [k for k, v in policy.state_dict().items() if not torch.equal(v, before[k])]
    assert any(k.startswith("encoder.") for k in moved) and any(k.startswith("decoder.") for k in moved)
    assert any(k.startswith("value_head.") for k in moved)
    assert value_loss.critic.normalizer is not None and float(value_loss.critic.normalizer.debias) > 0
    state = updater.state_dict()
    assert set(state) == {"optimizer", "generator"}


def test_the_update_reads_each_steps_decoding_order_from_the_buffer() -> None:
    """``order = "episode"``: the step records' orders, one per env step, kept through an episode and drawn
    anew where one begins, are the team batch's; the update decodes with them (log-probs of the
    unchanged weights give ratio 1)."""
    buffer, policy, value_loss = filled("episode")
    batch = team_batch(buffer, value_loss)
    assert batch.orders is not None and batch.orders.shape == (T * E, A)
    orders = batch.orders.reshape(T, E, A)
    assert torch.equal(orders, buffer.extras[mat_orders.FIELD][1:])
    assert torch.equal(orders.sort(-1).values, torch.arange(A).expand(T, E, A))
    assert all(torch.equal(orders[t], orders[0]) for t in range(3))  # no episode begins before step 3
    assert torch.equal(orders[:, [0, 2]], orders[:1, [0, 2]].expand(T, 2, A))  # envs 0 and 2: one episode
    assert torch.equal(orders[3:, 1], orders[3:4, 1].expand(T - 3, A))  # env 1's second episode keeps its own
    learner = TransformerLearner(policy, MATConfig(order="episode"), torch.Generator().manual_seed(0))
    torch.testing.assert_close(learner.ratio(batch), torch.ones(T * E, A), rtol=1e-5, atol=1e-5)
    fixed = team_batch(filled()[0], value_loss)
    assert fixed.orders is None and filled()[0].extras == {}
    buffer.roll_over()  # the next rollout's first step gets the running orders
    assert torch.equal(buffer.inputs(0).extras[mat_orders.FIELD], orders[-1])
