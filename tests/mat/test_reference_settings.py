"""Two settings pinned to what PKU-MARL/Multi-Agent-Transformer's runs do.

MAT-Dec's decoder: MAT's ``train_smac.py`` (and its other ``train_*.py`` but ``train_mpe.py``) set
``dec_actor = True; share_actor = True`` for ``--algorithm_name mat_dec``: one MLP, shared by the
agents.  harl's ``mat_dec`` builds that by default; ``share_actor = false`` gives one per agent.

The active masks: MAT's ``--use_value_active_masks`` and ``--use_policy_active_masks`` are
``store_false`` flags (``mat/config.py``, default True).  ``train_smac.sh`` passes only the value
one, so MAT's SMAC runs average the value loss over every agent, dead ones included, and the
policy loss and entropy over the alive ones; ``train_mujoco.sh`` passes both (both off);
``train_mpe.sh`` neither (both on).  The expected numbers below are worked by hand from MAT's
``MATTrainer.ppo_update`` / ``cal_value_loss`` and ``TransformerPolicy.evaluate_actions``::

    policy_loss = (-sum(min(surr1, surr2), -1) * active).sum() / active.sum()   # masked
                = -sum(min(surr1, surr2), -1).mean()                            # unmasked
    value_loss  = (max(huber(e), huber(e_clipped)) * active).sum() / active.sum()   # masked
                = max(huber(e), huber(e_clipped)).mean()                             # unmasked
    entropy     = (entropy * active).sum() / active.sum()   # masked;  entropy.mean() unmasked
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import attrs
import pytest
import torch
from gymnasium import spaces
from torch import nn

from harl.api import load_pipeline
from harl.policy.mat_policy import transformer_policy
from harl.update.mat_values import TransformerValueLoss, TransformerValues
from harl.update.objectives.mat import MATDecConfig, TeamBatch, TransformerLearner, mat_entropy

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = ROOT / "pipelines"
A, OBS, N_ACT = 3, 5, 4


def parts() -> SimpleNamespace:
    return SimpleNamespace(obs_spaces=[spaces.Box(-1, 1, (OBS,))] * A, act_spaces=[spaces.Discrete(N_ACT)] * A,
                           source="test", generator=torch.Generator().manual_seed(0))


def test_mat_dec_defaults_to_one_shared_actor_mlp() -> None:
    assert MATDecConfig().share_actor is True
    shared = transformer_policy(MATDecConfig(n_embd=16, agent_id=False), parts())
    assert shared.decentralised and shared.share_actor
    assert len(shared.own_actors) == 1
    # one MLP: two agents that see the same observation (no ids after it) get the same distribution
    x = torch.randn(6, 1, OBS).expand(6, A, OBS).contiguous()
    _, rep = shared.encode(x)
    out = shared.decode(shared.shifted(torch.zeros(6, A, 1)), rep, x)
    torch.testing.assert_close(out[:, 1], out[:, 0], rtol=0, atol=0)
    torch.testing.assert_close(out[:, 2], out[:, 0], rtol=0, atol=0)

    apart = transformer_policy(MATDecConfig(n_embd=16, share_actor=False, agent_id=False), parts())
    assert not apart.share_actor
    assert len(apart.own_actors) == A
    assert sum(p.numel() for p in apart.own_actors.parameters()) == A * sum(
        p.numel() for p in shared.own_actors.parameters())


def test_mat_dec_from_a_pipeline_shares_its_actor_unless_told_not_to() -> None:
    pytest.importorskip("mpe2", reason="builds MAT's MPE pipeline (pip install harl[mpe])")
    from harl.api import build

    small = ["updater.objective.n_embd=16", "collector.n_envs=2", "evaluator.n_envs=1"]
    mpe = PIPELINES / "mat_mpe_spread.toml"
    with build(mpe, ["updater.objective.kind=mat_dec", *small]) as stages:
        assert len(stages.policy.own_actors) == 1
    with build(mpe, ["updater.objective.kind=mat_dec", "updater.objective.share_actor=false", *small]) as stages:
        assert len(stages.policy.own_actors) == stages.policy.n_agents == 3
    spec = load_pipeline(PIPELINES / "matdec_smax_3m.toml")
    assert spec.updater.objective.kind == "mat_dec" and spec.updater.objective.share_actor is True


# (policy and entropy masked, value loss masked) as MAT's scripts leave them
MASKS = {
    "mat_smax_3m": (True, False),         # train_smac.sh: --use_value_active_masks
    "mat_smax_2s3z": (True, False),
    "matdec_smax_3m": (True, False),
    "mat_mamujoco_halfcheetah_6x1": (False, False),  # train_mujoco.sh: both flags
    "mat_mpe_spread": (True, True),       # train_mpe.sh: neither
}


@pytest.mark.parametrize("name", sorted(MASKS))
def test_shipped_pipelines_mask_as_mats_scripts(name: str) -> None:
    spec = load_pipeline(PIPELINES / f"{name}.toml")
    assert (spec.updater.objective.active_masks, spec.critic.active_masks) == MASKS[name]


class Fixed(nn.Module):
    """A stand-in transformer: three agents, one discrete action each, agent 2 dead; its teacher-forced
    numbers (``fixed_evaluate``): ratios r = (1.5, 0.5, 1.0), entropies (1.0, 0.5, 3.0), values (0.5, -1.0, 2.0)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))


def fixed_evaluate(net, obs, actions, avail, orders=None):  # noqa: ANN001, ANN201 - mat_decode.evaluate's signature
    log_probs = torch.log(torch.tensor([[[1.5], [0.5], [1.0]]])) + net.w
    entropy = torch.tensor([[[1.0], [0.5], [3.0]]])
    return log_probs, entropy, torch.tensor([[0.5, -1.0, 2.0]]) + net.w


BATCH = TeamBatch(obs=torch.zeros(1, 3, 1), actions=torch.zeros(1, 3, 1), old_log_probs=torch.zeros(1, 3, 1),
                  avail=None, active=torch.tensor([[1.0, 1.0, 0.0]]), advantages=torch.tensor([[2.0, -1.0, 4.0]]),
                  old_values=torch.tensor([[0.0, -0.9, 1.9]]), returns=torch.tensor([[3.0, -1.0, 0.0]]))
"""By hand, clip 0.05 (the SMAX pipelines' clip and value_clip), Huber delta 10:

policy, per agent min(r A, clip(r, 0.95, 1.05) A):
    agent 0: min(3.0, 2.1) = 2.1;  agent 1: min(-0.5, -0.95) = -0.95;  agent 2 (dead): min(4.0, 4.0) = 4.0
    masked:   -(2.1 - 0.95) / 2       = -0.575
    unmasked: -(2.1 - 0.95 + 4.0) / 3 = -5.15 / 3
entropy: masked (1.0 + 0.5) / 2 = 0.75;  unmasked (1.0 + 0.5 + 3.0) / 3 = 1.5
value, v_clipped = old + clamp(v - old, -0.05, 0.05), errors R - v and R - v_clipped, Huber e^2 / 2:
    agent 0: v 0.5, old 0, R 3:      clipped 0.05;  errors 2.5, 2.95:  max(3.125, 4.35125) = 4.35125
    agent 1: v -1, old -0.9, R -1:   clipped -0.95; errors 0, -0.05:   max(0, 0.00125)    = 0.00125
    agent 2: v 2, old 1.9, R 0:      clipped 1.95;  errors -2, -1.95:  max(2.0, 1.90125)  = 2.0
    masked:   (4.35125 + 0.00125) / 2       = 2.17625
    unmasked: (4.35125 + 0.00125 + 2.0) / 3 = 2.1175
"""
POLICY = {True: -0.575, False: -5.15 / 3}
ENTROPY = {True: 0.75, False: 1.5}
VALUE = {True: 2.17625, False: 2.1175}


@pytest.mark.parametrize("name", ["mat_smax_3m", "matdec_smax_3m", "mat_mamujoco_halfcheetah_6x1", "mat_mpe_spread"])
def test_a_dead_agent_counts_as_mats_scripts_count_it(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline's own objective and critic settings (value normalisation off, clips 0.05, so
    that the numbers stay by hand) on one step with agent 2 dead: SMAX, MAT's SMAC run, gives the
    value loss as the plain mean over all three agents and the policy loss over the two alive."""
    spec = load_pipeline(PIPELINES / f"{name}.toml")
    objective = attrs.evolve(spec.updater.objective, clip=0.05)
    critic_config = attrs.evolve(spec.critic, value_norm=False, value_clip=0.05, huber_delta=10.0)
    monkeypatch.setattr("harl.policy.mat_decode.evaluate", fixed_evaluate)
    learner = TransformerLearner(Fixed(), objective, torch.Generator())  # type: ignore[arg-type]
    critic = TransformerValues.__new__(TransformerValues)
    nn.Module.__init__(critic)
    critic.normalizer = None
    policy_masked, value_masked = MASKS[name]
    loss, policy_loss, value_loss, entropy, _ = learner.loss(BATCH, TransformerValueLoss(critic, critic_config),
                                                             critic_config.value_loss_coef)
    assert float(policy_loss.detach()) == pytest.approx(POLICY[policy_masked], abs=1e-6)
    assert float(value_loss.detach()) == pytest.approx(VALUE[value_masked], abs=1e-6)
    assert float(entropy.detach()) == pytest.approx(ENTROPY[policy_masked], abs=1e-6)
    expected = POLICY[policy_masked] - objective.entropy_coef * ENTROPY[policy_masked] + VALUE[value_masked]
    assert float(loss.detach()) == pytest.approx(expected, abs=1e-6)
    if name.startswith(("mat_smax", "matdec_smax")):  # MAT's SMAC run, spelt out
        assert float(value_loss.detach()) == pytest.approx((4.35125 + 0.00125 + 2.0) / 3)
        assert float(policy_loss.detach()) == pytest.approx(-(2.1 - 0.95) / 2)


def test_unmasked_entropy_is_mats_mean_over_action_dimensions_too() -> None:
    """MAT's evaluate_actions without policy masks: entropy.view(-1, act_num).mean(), a mean over
    every (step, agent, dimension); with them, each row's dimensions summed, averaged over the active."""
    entropy = torch.tensor([[[1.0, 0.5], [0.25, 0.25], [7.0, 3.0]]])
    active = torch.tensor([[1.0, 1.0, 0.0]])
    assert float(mat_entropy(entropy, active)) == pytest.approx((1.5 + 0.5) / 2)
    assert float(mat_entropy(entropy, active, active_masks=False)) == pytest.approx(12.0 / 6)
