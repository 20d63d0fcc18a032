"""MAT's formulas pinned: the causal decoder, teacher forcing against auto-regressive decoding,
MAT-Dec's independence, available-action masks, the Gaussian's log-probability, and the PPO and
value losses on batches small enough to compute by hand from MAT's trainer
(PKU-MARL/Multi-Agent-Transformer mat/algorithms/mat/mat_trainer.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from harl.policy.mat import MASKED_LOGIT
from harl.policy.mat_decode import evaluate, masked_log_softmax
from harl.policy.mat_policy import TransformerPolicy
from harl.update.mat_values import MATValuesConfig, TransformerValueLoss, TransformerValues, mat_value_loss
from harl.update.objectives.mat import (
    MATConfig,
    TeamBatch,
    TransformerLearner,
    mat_entropy,
    mat_policy_loss,
)

A, OBS, N_ACT, BOX = 4, 6, 5, 3


def transformer(discrete: bool = True, decentralised: bool = False, share_actor: bool = False,
                n_block: int = 2, seed: int = 0, order: str = "fixed",
                generator: torch.Generator | None = None) -> TransformerPolicy:
    torch.manual_seed(seed)
    act: spaces.Space = spaces.Discrete(N_ACT) if discrete else spaces.Box(-1, 1, (BOX,))
    net = TransformerPolicy([spaces.Box(-1, 1, (OBS,))] * A, [act] * A, n_block, 16, 2,
                            decentralised=decentralised, share_actor=share_actor, order=order, generator=generator)
    with torch.no_grad():  # MAT's gain-0.01 heads make every logit nearly equal: spread them out
        for p in net.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return net


def obs_list(batch: int, seed: int = 1) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, OBS, generator=g) for _ in range(A)]


def test_agent_i_reads_only_the_actions_of_agents_before_it() -> None:
    net = transformer()
    x = torch.stack(obs_list(8), 1)
    _, rep = net.encode(x)
    actions = torch.randint(0, N_ACT, (8, A, 1)).float()
    base = net.decode(net.shifted(actions), rep, x)
    for i in range(A):
        changed = actions.clone()
        changed[:, i:] = (changed[:, i:] + 1) % N_ACT  # agents i .. A-1 act otherwise
        out = net.decode(net.shifted(changed), rep, x)
        torch.testing.assert_close(out[:, : i + 1], base[:, : i + 1], rtol=0, atol=1e-6)
        if i + 1 < A:  # and the agent after them does see it
            assert not torch.allclose(out[:, i + 1], base[:, i + 1], atol=1e-4)


def test_the_decoder_input_is_the_start_token_then_the_actions_shifted_by_one() -> None:
    net = transformer()
    tokens = net.shifted(torch.tensor([[[2.0], [0.0], [4.0], [1.0]]]))
    expected = torch.zeros(1, A, N_ACT + 1)
    expected[0, 0, 0] = 1  # start
    expected[0, 1, 1 + 2] = expected[0, 2, 1 + 0] = expected[0, 3, 1 + 4] = 1
    assert torch.equal(tokens, expected)
    box = transformer(discrete=False)
    acts = torch.arange(A * BOX, dtype=torch.float32).reshape(1, A, BOX)
    assert torch.equal(box.shifted(acts), torch.cat([torch.zeros(1, 1, BOX), acts[:, :-1]], 1))


@pytest.mark.parametrize("discrete", [True, False])
def test_teacher_forcing_gives_the_auto_regressive_log_probs(discrete: bool) -> None:
    net = transformer(discrete)
    obs = obs_list(64)
    avail = None
    if discrete:
        avail = [(torch.rand(64, N_ACT) < 0.6).float() for _ in range(A)]
        for m in avail:
            m[:, 0] = 1.0
    torch.manual_seed(3)
    sampled = net.sample(obs, avail)
    actions = torch.stack(sampled.actions, 1)
    log_probs, _, values = evaluate(net, net.stack_obs(obs), actions,
                                        None if avail is None else torch.stack(avail, 1))
    torch.testing.assert_close(log_probs, torch.stack(sampled.log_probs, 1), rtol=1e-5, atol=1e-5)
    assert values.shape == (64, A)


def test_mat_dec_agents_decide_alone() -> None:
    for share in (False, True):
        net = transformer(decentralised=True, share_actor=share)
        x = torch.stack(obs_list(8), 1)
        values, rep = net.encode(x)
        acts = torch.randint(0, N_ACT, (8, A, 1)).float()
        base = net.decode(net.shifted(acts), rep, x)
        other = torch.randint(0, N_ACT, (8, A, 1)).float()
        torch.testing.assert_close(net.decode(net.shifted(other), rep, x), base, rtol=0, atol=0)
        moved = x.clone()
        moved[:, 1:] += torch.randn(8, A - 1, OBS)  # every agent but 0 sees something else
        values2, rep2 = net.encode(moved)
        out = net.decode(net.shifted(acts), rep2, moved)
        torch.testing.assert_close(out[:, 0], base[:, 0], rtol=0, atol=0)
        assert not torch.allclose(out[:, 1:], base[:, 1:])
        assert not torch.allclose(values2[:, 0], values[:, 0])  # the encoder's values still see the team
        obs = obs_list(32)
        torch.manual_seed(5)
        sampled = net.sample(obs, None)
        log_probs, _, _ = evaluate(net, net.stack_obs(obs), torch.stack(sampled.actions, 1), None)
        torch.testing.assert_close(log_probs, torch.stack(sampled.log_probs, 1))
    assert len(transformer(decentralised=True).own_actors) == A
    assert len(transformer(decentralised=True, share_actor=True).own_actors) == 1


def test_unavailable_actions_are_never_taken() -> None:
    net = transformer()
    avail = [torch.zeros(256, N_ACT) for _ in range(A)]
    for i, m in enumerate(avail):
        m[:, i % N_ACT] = 1.0
        m[:, (i + 2) % N_ACT] = 1.0
    for deterministic in (False, True):
        actions, _ = net.act(obs_list(256), avail, deterministic)
        for i, a in enumerate(actions):
            assert set(a[:, 0].long().tolist()) <= {i % N_ACT, (i + 2) % N_ACT}
    x = net.stack_obs(obs_list(256))
    _, rep = net.encode(x)
    acts = torch.stack(net.act(obs_list(256), avail)[0], 1)
    with torch.no_grad():
        logp = masked_log_softmax(net.decode(net.shifted(acts), rep, x), torch.stack(avail, 1))
    torch.testing.assert_close(logp.exp().sum(-1), torch.ones(256, A))
    assert float(logp.exp()[torch.stack(avail, 1) == 0].max()) == 0.0
    assert MASKED_LOGIT == -1e10


def test_gaussian_log_prob_and_entropy_by_hand() -> None:
    net = transformer(discrete=False)
    with torch.no_grad():
        net.std_param.fill_(1.0)  # as MAT initialises it
    obs = net.stack_obs(obs_list(4))
    actions = torch.full((4, A, BOX), 0.25)
    log_probs, entropy, _ = evaluate(net, obs, actions, None)
    _, rep = net.encode(obs)
    mean = net.decode(net.shifted(actions), rep, obs)
    std = 0.5 / (1 + math.exp(-1.0))  # 0.5 * sigmoid(1): MAT's initial standard deviation
    by_hand = -((0.25 - mean) ** 2) / (2 * std**2) - math.log(std) - 0.5 * math.log(2 * math.pi)
    torch.testing.assert_close(log_probs, by_hand, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy, torch.full_like(entropy, 0.5 + 0.5 * math.log(2 * math.pi) + math.log(std)))
    actions, _ = net.act(obs_list(4), None, deterministic=True)  # the mean
    torch.testing.assert_close(torch.stack(actions, 1), net.decode(
        net.shifted(torch.stack(actions, 1)), net.encode(obs)[1], obs))


def test_ppo_loss_by_hand() -> None:
    """MAT's trainer: imp_weights = exp(log_prob - old_log_prob); surr1 = imp_weights * adv;
    surr2 = clamp(imp_weights, 1 - clip, 1 + clip) * adv; policy_loss = (-sum(min(surr1, surr2),
    dim=-1) * active).sum() / active.sum().  One step, three agents (the third dead), two action
    dimensions, clip 0.2:

        agent 0, A = 2:  r = (1.5, 1.0): min(3, 2.4) + min(2, 2)          = 4.4
        agent 1, A = -1: r = (0.5, 2.0): min(-0.5, -0.8) + min(-2, -1.2)  = -2.8
        agent 2: dead, its numbers must not count
        policy_loss = -(4.4 - 2.8) / 2 = -0.8
    """
    old = torch.zeros(1, 3, 2)
    new = torch.log(torch.tensor([[[1.5, 1.0], [0.5, 2.0], [9.0, 9.0]]]))
    adv = torch.tensor([[2.0, -1.0, 100.0]])
    active = torch.tensor([[1.0, 1.0, 0.0]])
    loss, ratio = mat_policy_loss(new, old, adv, active, 0.2)
    assert float(loss) == pytest.approx(-0.8, abs=1e-6)
    torch.testing.assert_close(ratio, new.exp())
    entropy = torch.tensor([[[1.0, 0.5], [0.25, 0.25], [7.0, 7.0]]])
    assert float(mat_entropy(entropy, active)) == pytest.approx((1.5 + 0.5) / 2)


def test_value_loss_by_hand() -> None:
    """MAT's cal_value_loss: value_pred_clipped = old + clamp(v - old, -clip, clip); errors of the
    normalised return against both; max of the two Huber losses; mean over active agents.

        agent 0: v = 0.5, old = 0, R = 3:  clipped 0.2;  errors 2.5 and 2.8
                 delta 10: max(3.125, 3.92) = 3.92;   delta 1: max(2.0, 2.3) = 2.3
        agent 1: v = -1, old = -0.9, R = -1: clipped -1; errors 0 and 0: 0
        agent 2: dead
    """
    new = torch.tensor([[0.5, -1.0, 50.0]])
    old = torch.tensor([[0.0, -0.9, 0.0]])
    target = torch.tensor([[3.0, -1.0, -50.0]])
    active = torch.tensor([[1.0, 1.0, 0.0]])
    assert float(mat_value_loss(new, old, target, active, 0.2, 10.0)) == pytest.approx(3.92 / 2)
    assert float(mat_value_loss(new, old, target, active, 0.2, 1.0)) == pytest.approx(2.3 / 2)
    assert float(mat_value_loss(new, old, target, active, None, 10.0)) == pytest.approx(3.125 / 2)
    unmasked = (3.92 + 0.0 + 10 * (100 - 5)) / 3  # the dead agent counts: error -100 (clipped: -50.2), linear
    assert float(mat_value_loss(new, old, target, active, 0.2, 10.0, active_masks=False)) == pytest.approx(unmasked)


class Fixed(nn.Module):
    """A stand-in network whose teacher-forced numbers (``fixed_evaluate``) are those of the two tests above."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))


def fixed_evaluate(net, obs, actions, avail, orders=None):  # noqa: ANN001, ANN201 - mat_decode.evaluate's signature
    new = torch.log(torch.tensor([[[1.5, 1.0], [0.5, 2.0], [9.0, 9.0]]])) + net.w
    entropy = torch.tensor([[[1.0, 0.5], [0.25, 0.25], [7.0, 7.0]]])
    return new, entropy, torch.tensor([[0.5, -1.0, 50.0]]) + net.w


def test_the_joint_loss_adds_the_three_terms(monkeypatch: pytest.MonkeyPatch) -> None:
    """loss = policy_loss - entropy_coef * entropy + value_loss_coef * value_loss
            = -0.8 - 0.01 * 1.0 + 1 * 1.96 = 1.15"""
    monkeypatch.setattr("harl.policy.mat_decode.evaluate", fixed_evaluate)
    learner = TransformerLearner(Fixed(), MATConfig(clip=0.2), torch.Generator())  # type: ignore[arg-type]
    critic = TransformerValues.__new__(TransformerValues)
    nn.Module.__init__(critic)
    critic.normalizer = None
    value_loss = TransformerValueLoss(critic, MATValuesConfig(value_clip=0.2, value_norm=False))
    batch = TeamBatch(obs=torch.zeros(1, 3, 1), actions=torch.zeros(1, 3, 2), old_log_probs=torch.zeros(1, 3, 2),
                      avail=None, active=torch.tensor([[1.0, 1.0, 0.0]]), advantages=torch.tensor([[2.0, -1.0, 100.0]]),
                      old_values=torch.tensor([[0.0, -0.9, 0.0]]), returns=torch.tensor([[3.0, -1.0, -50.0]]))
    loss, policy_loss, v_loss, entropy, _ = learner.loss(batch, value_loss, 1.0)
    assert [float(x.detach()) for x in (policy_loss, v_loss, entropy)] == pytest.approx([-0.8, 1.96, 1.0])
    assert float(loss.detach()) == pytest.approx(-0.8 - 0.01 * 1.0 + 1.96)


def test_value_normaliser_is_updated_with_the_returns_before_it_normalises() -> None:
    net = transformer()
    critic = TransformerValues(net, MATValuesConfig())
    loss = TransformerValueLoss(critic, MATValuesConfig())
    returns = torch.tensor([[4.0, 4.0, 4.0, 4.0]])
    batch = TeamBatch(obs=torch.zeros(1, A, OBS), actions=torch.zeros(1, A, 1), old_log_probs=torch.zeros(1, A, 1),
                      avail=None, active=torch.ones(1, A), advantages=torch.zeros(1, A), old_values=torch.zeros(1, A),
                      returns=returns)
    loss(torch.zeros(1, A), batch)
    assert critic.normalizer is not None
    mean, _ = critic.normalizer.stats()
    assert float(mean) == pytest.approx(4.0)  # one update, debiased: the returns' mean


def test_narrower_observations_are_zero_padded() -> None:
    net = TransformerPolicy([spaces.Box(-1, 1, (3,)), spaces.Box(-1, 1, (5,))], [spaces.Discrete(2)] * 2, 1, 8, 1)
    x = net.stack_obs([np.ones((2, 3), np.float32), np.ones((2, 5), np.float32)])
    assert x.shape == (2, 2, 5)
    assert torch.equal(x[:, 0, 3:], torch.zeros(2, 2))


def test_a_random_order_decodes_its_first_agent_first() -> None:
    net = transformer()
    order = torch.tensor([2, 0, 3, 1])
    net.set_order(order)
    obs = obs_list(64)
    torch.manual_seed(4)
    sampled = net.sample(obs, None)
    actions = torch.stack(sampled.actions, 1)
    x = net.stack_obs(obs)
    log_probs, _, values = evaluate(net, x, actions, None)
    torch.testing.assert_close(log_probs, torch.stack(sampled.log_probs, 1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(values, net.encode(x)[0])  # the encoder has no positions: values in any order
    for p, agent in enumerate(order.tolist()):
        changed = actions.clone()
        changed[:, agent] = (changed[:, agent] + 1) % N_ACT
        after, _, _ = evaluate(net, x, changed, None)
        earlier_or_same = order[: p + 1].tolist()
        later = order[p + 1:].tolist()
        torch.testing.assert_close(after[:, earlier_or_same[:-1]], log_probs[:, earlier_or_same[:-1]], rtol=0, atol=1e-6)
        if later:
            assert not torch.allclose(after[:, later], log_probs[:, later], atol=1e-4)
    copy = transformer(seed=9)
    copy.load_state_dict(net.state_dict())
    assert torch.equal(copy.order, order) and not copy.fixed_order
    mat_dec = transformer(decentralised=True)
    mat_dec.set_order(order)
    assert torch.equal(mat_dec.order, torch.arange(A))  # no agent reads another: nothing to order


def test_weights_saved_without_an_order_load_in_the_fixed_order() -> None:
    net = transformer()
    state = {k: v for k, v in net.state_dict().items() if k != "order"}
    other = transformer(seed=7)
    other.set_order(torch.tensor([3, 2, 1, 0]))
    other.load_state_dict(state)
    assert torch.equal(other.order, torch.arange(A)) and other.fixed_order
