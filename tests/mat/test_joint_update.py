"""The joint updater's view of a rollout (``team_batch``) and one update through it: every agent of
an env step in one row, advantages standardised over every agent's active samples as MAT's trainer
does (``np.nanmean`` / ``np.nanstd`` with the dead agents' entries set to NaN), old values in the
normaliser's units."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from harl.buffers.records import StartRecord, StepRecord
from harl.buffers.rollout import RolloutBuffer
from harl.policy.mat import MultiAgentTransformer
from harl.update.joint import JointConfig, JointUpdater, team_batch
from harl.update.mat_values import MATValuesConfig, TransformerValueLoss, TransformerValues
from harl.update.objectives.mat import MATConfig, TransformerLearner

T, E, A, OBS, N_ACT = 5, 3, 2, 4, 3


def filled() -> tuple[RolloutBuffer, MultiAgentTransformer, TransformerValueLoss]:
    torch.manual_seed(0)
    obs_spaces = [spaces.Box(-1, 1, (OBS,)), spaces.Box(-1, 1, (OBS - 1,))]  # the second agent's is padded
    act_spaces = [spaces.Discrete(N_ACT)] * A
    policy = MultiAgentTransformer(obs_spaces, act_spaces, 1, 8, 1)
    critic = TransformerValues(policy, MATValuesConfig())
    buffer = RolloutBuffer(obs_spaces, act_spaces, state_dim=2, n_envs=E, length=T, fp_state=True,
                           critic_reads=critic.reads)

    def observe() -> list[torch.Tensor]:
        return [torch.randn(E, s.shape[0]) for s in obs_spaces]

    avail = [torch.ones(E, N_ACT) for _ in range(A)]
    buffer.start(StartRecord(observe(), torch.zeros(E, 2), avail))
    for t in range(T):
        inputs = buffer.inputs(t)
        sampled = policy.sample(inputs.obs, inputs.avail)
        active = torch.ones(E, A)
        active[0, 1] = float(t >= 2)  # agent 1 of env 0 is dead from step 1 to step 2
        buffer.insert(StepRecord(actions=sampled.actions, log_probs=sampled.log_probs,
                                 values=critic.value(critic.reads(inputs.obs, None)), obs=observe(), avail=avail,
                                 state=torch.zeros(E, 2), rewards=torch.randn(E, A),
                                 terminated=torch.zeros(E, dtype=torch.bool), truncated=torch.zeros(E, dtype=torch.bool),
                                 active=active, starts=torch.zeros(E)))
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
