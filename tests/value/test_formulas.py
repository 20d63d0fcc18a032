"""The value family's formulas, each against a value computed by hand or a naive loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.buffers.episodes import Episode, EpisodeBuffer
from harl.policy.agent_q import AgentQNetworks, epsilon_greedy, greedy, one_hot
from harl.returns.episode_td import (
    EpisodeTD,
    EpisodeTDConfig,
    lambda_targets,
    n_step_targets,
    one_step_targets,
)
from harl.returns.running_stats import RunningMeanStd
from harl.update.mixers import NoMixer, QMixer, VDNMixer
from harl.update.q_learning import (
    JointTD,
    JointTDConfig,
    next_action_values,
    previous_actions,
)


def test_qmix_with_one_layer_hypernetworks_by_hand() -> None:
    """embed 1, 2 agents, state (1,): hidden = elu(|w1 s| . q + b1 s), Q_tot = |w2 s| hidden + V(s)."""
    mixer = QMixer(n_agents=2, state_dim=1, embed_dim=1, hypernet_layers=1)
    with torch.no_grad():
        mixer.hyper_w1.weight.copy_(torch.tensor([[-2.0], [3.0]]))
        mixer.hyper_w1.bias.zero_()
        mixer.hyper_b1.weight.fill_(0.5)
        mixer.hyper_b1.bias.zero_()
        mixer.hyper_w2.weight.fill_(-4.0)
        mixer.hyper_w2.bias.zero_()
        for layer in (mixer.value[0], mixer.value[2]):
            layer.weight.fill_(1.0)
            layer.bias.zero_()
    q, s = torch.tensor([[1.0, -1.0]]), torch.tensor([[1.0]])
    # w1 = |[-2, 3]| = [2, 3]; 2 * 1 + 3 * (-1) + 0.5 = -0.5; elu(-0.5) = exp(-0.5) - 1
    hidden = np.exp(-0.5) - 1.0
    expected = 4.0 * hidden + 1.0  # |w2| = 4, V(s) = relu(1) * 1 = 1
    assert mixer(q, s).item() == pytest.approx(expected, abs=1e-6)


def test_qmix_is_monotonic_in_every_agent_q() -> None:
    """dQ_tot/dQ_i >= 0 for random states and Qs (the weights are |.| of the hypernetworks')."""
    torch.manual_seed(0)
    mixer = QMixer(n_agents=3, state_dim=5)
    q = torch.randn(64, 7, 3, requires_grad=True)
    total = mixer(q, torch.randn(64, 7, 5))
    assert total.shape == (64, 7, 1)
    (grad,) = torch.autograd.grad(total.sum(), q)
    assert (grad >= 0).all() and (grad > 0).any()


def test_vdn_sums_and_iql_keeps_each_agent() -> None:
    q, s = torch.tensor([[[1.0, 2.0, -0.5]]]), torch.zeros(1, 1, 4)
    assert VDNMixer()(q, s).tolist() == [[[2.5]]]
    assert torch.equal(NoMixer()(q, s), q)


def test_masked_double_q_target_by_hand() -> None:
    """Online Qs pick the best *available* next action; the target network values it."""
    online = torch.tensor([[[1.0, 5.0, 3.0]]])   # action 1 is best but unavailable
    target = torch.tensor([[[10.0, 20.0, 30.0]]])
    masks = torch.tensor([[[1.0, 0.0, 1.0]]])
    assert next_action_values(online, target, masks, double_q=True).tolist() == [[30.0]]
    # without double Q: the target's own best available action
    target2 = torch.tensor([[[10.0, 99.0, 7.0]]])
    assert next_action_values(online, target2, masks, double_q=False).tolist() == [[10.0]]
    assert next_action_values(online, target2, masks, double_q=True).tolist() == [[7.0]]


def test_greedy_and_epsilon_greedy_honour_masks() -> None:
    q = torch.tensor([[[9.0, 1.0, 0.0]]]).expand(500, 1, 3)
    masks = torch.tensor([[[0.0, 1.0, 1.0]]]).expand(500, 1, 3)
    assert (greedy(q, masks) == 1).all()
    picks = epsilon_greedy(q, masks, 1.0, torch.Generator().manual_seed(0))
    assert set(picks.flatten().tolist()) == {1, 2}  # uniform over the available ones, never 0
    assert (epsilon_greedy(q, masks, 0.0, torch.Generator().manual_seed(0)) == 1).all()


def test_one_hot_of_no_action_is_zero() -> None:
    assert one_hot(torch.tensor([-1, 2]), 3).tolist() == [[0, 0, 0], [0, 0, 1]]
    assert previous_actions(torch.tensor([[[1], [2]]])).tolist() == [[[-1], [1], [2]]]


def _episodes() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two episodes padded to 5 steps: a 3-step one that terminates, a 5-step one cut by a time limit."""
    g = torch.Generator().manual_seed(3)
    rewards = torch.randn(2, 5, generator=g)
    terminated = torch.zeros(2, 5, dtype=torch.bool)
    terminated[0, 2] = True
    filled = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    next_q = torch.randn(2, 5, 2, generator=g)
    return rewards, terminated, filled, next_q


def test_one_step_targets_by_hand() -> None:
    rewards, terminated, filled, next_q = _episodes()
    y = one_step_targets(rewards, terminated, filled, next_q, 0.9)
    assert y[0, 1, 0] == pytest.approx(float(rewards[0, 1] + 0.9 * next_q[0, 1, 0]))
    assert y[0, 2, 1] == pytest.approx(float(rewards[0, 2]))                       # terminal: no bootstrap
    assert y[1, 4, 1] == pytest.approx(float(rewards[1, 4] + 0.9 * next_q[1, 4, 1]))  # time limit: bootstrap
    assert (y[0, 3:] == 0).all()                                                    # padding


def _naive_n_step(rewards, terminated, filled, next_q, gamma, n):  # noqa: ANN001, ANN202
    B, T, K = next_q.shape
    out = torch.zeros(B, T, K)
    for b in range(B):
        L = int(filled[b].sum())
        for t in range(L):
            g, m = 0.0, min(n, L - t)
            for k in range(m):
                g = g + gamma ** k * rewards[b, t + k]
            last = t + m - 1
            boot = 0.0 if terminated[b, last] else 1.0
            out[b, t] = g + gamma ** m * boot * next_q[b, last]
    return out


def _naive_lambda(rewards, terminated, filled, next_q, gamma, lam):  # noqa: ANN001, ANN202
    """The forward view: (1 - lam) sum_n lam^(n-1) G^(n) + lam^(L-t-1) G^(L-t)."""
    B, T, K = next_q.shape
    out = torch.zeros(B, T, K)
    nsteps = {n: _naive_n_step(rewards, terminated, filled, next_q, gamma, n) for n in range(1, T + 1)}
    for b in range(B):
        L = int(filled[b].sum())
        for t in range(L):
            left = L - t
            total = sum((1 - lam) * lam ** (n - 1) * nsteps[n][b, t] for n in range(1, left))
            out[b, t] = total + lam ** (left - 1) * nsteps[left][b, t]
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_n_step_targets_match_a_naive_loop(n: int) -> None:
    args = _episodes()
    assert torch.allclose(n_step_targets(*args, 0.9, n), _naive_n_step(*args, 0.9, n), atol=1e-5)
    if n == 1:
        assert torch.allclose(n_step_targets(*args, 0.9, 1), one_step_targets(*args, 0.9), atol=1e-6)


@pytest.mark.parametrize("lam", [0.0, 0.6, 1.0])
def test_td_lambda_matches_the_forward_view(lam: float) -> None:
    args = _episodes()
    got = lambda_targets(*args, 0.95, lam)
    assert torch.allclose(got, _naive_lambda(*args, 0.95, lam), atol=1e-5)
    if lam == 0.0:
        assert torch.allclose(got, one_step_targets(*args, 0.95), atol=1e-6)


def test_running_mean_std_by_hand() -> None:
    """EPyMARL's parallel update from (mean 0, var 1, count 1e-4) with one batch's mean m, unbiased var v, size n."""
    stats = RunningMeanStd()
    values = torch.tensor([1.0, 2.0, 6.0])
    stats.update(values)
    m, v, n, c = 3.0, 7.0, 3, 1e-4
    assert stats.mean.item() == pytest.approx(m * n / (n + c), rel=1e-6)
    assert stats.var.item() == pytest.approx((1.0 * c + v * n + m ** 2 * c * n / (n + c)) / (n + c), rel=1e-6)


# --------------------------------------------------------------------------- padding never reaches the loss


def _team(recurrent: bool, last_action: bool) -> AgentQNetworks:
    torch.manual_seed(0)
    obs = [spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (2,), np.float32)]
    acts: list[spaces.Space] = [spaces.Discrete(3), spaces.Discrete(2)]
    return AgentQNetworks(obs, acts, hidden_dim=8, recurrent=recurrent, share_parameters=not recurrent,
                      last_action=last_action)


def _buffer() -> EpisodeBuffer:
    obs = [spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (2,), np.float32)]
    acts: list[spaces.Space] = [spaces.Discrete(3), spaces.Discrete(2)]
    buffer = EpisodeBuffer(obs, acts, state_dim=4, capacity=4, max_length=6)
    g = torch.Generator().manual_seed(1)
    for length, terminal in ((2, True), (6, False), (4, True)):
        buffer.insert(Episode(
            obs=[torch.randn(length + 1, 3, generator=g), torch.randn(length + 1, 2, generator=g)],
            state=torch.randn(length + 1, 4, generator=g),
            avail=[torch.ones(length + 1, 3), (torch.rand(length + 1, 2, generator=g) > 0.3).float()
                   .index_fill_(1, torch.tensor([0]), 1.0)],
            actions=torch.stack([torch.randint(3, (length,), generator=g), torch.zeros(length, dtype=torch.long)], 1),
            rewards=torch.randn(length, generator=g),
            terminated=torch.arange(length) == length - 1 if terminal else torch.zeros(length, dtype=torch.bool)))
    return buffer


@pytest.mark.parametrize("recurrent", [False, True])
@pytest.mark.parametrize("mode", ["one_step", "n_step", "lambda"])
@pytest.mark.parametrize("mixer", ["qmix", "none"])
def test_padding_values_never_change_the_loss(recurrent: bool, mode: str, mixer: str) -> None:
    """Overwriting every padded step of a batch (observations, states, masks, actions, rewards,
    terminal flags) with garbage leaves the loss and its gradient as they were."""
    buffer = _buffer()
    batch = buffer.gather(torch.tensor([0, 1, 2]))
    assert batch.filled.sum(1).tolist() == [2, 6, 4]
    team = _team(recurrent, last_action=True)
    mix = QMixer(2, 4, embed_dim=4, hypernet_embed=8) if mixer == "qmix" else NoMixer()
    returns = EpisodeTD(EpisodeTDConfig(mode=mode, n_step=3, lam=0.7))
    learner = JointTD(JointTDConfig(), team, mix, returns)
    learner.target_policy.load_state_dict({k: v + 0.1 for k, v in team.state_dict().items()})
    loss, _ = learner.loss(batch, update_stats=False)
    grads = torch.autograd.grad(loss, learner.params)

    pad_steps = ~batch.filled                                   # (B, T)
    pad_rows = torch.cat([torch.zeros(3, 1, dtype=torch.bool), pad_steps], 1)  # rows after each episode's last
    garbage = torch.Generator().manual_seed(9)
    for o in batch.obs:
        o[pad_rows] = torch.randn(o[pad_rows].shape, generator=garbage) * 100
    batch.state[pad_rows] = torch.randn(batch.state[pad_rows].shape, generator=garbage) * 100
    for m in batch.avail:
        if m is not None:
            m[pad_rows] = False
    batch.actions[pad_steps] = 1
    batch.rewards[pad_steps] = 1e3
    batch.terminated[pad_steps] = True
    loss2, _ = learner.loss(batch, update_stats=False)
    grads2 = torch.autograd.grad(loss2, learner.params)
    assert loss2.item() == pytest.approx(loss.item(), rel=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads, grads2))


def test_reward_statistics_count_real_steps_only() -> None:
    """The running reward statistics see the batch's real steps, not the padding's zeros."""
    buffer = _buffer()
    batch = buffer.gather(torch.tensor([0, 1, 2]))
    learner = JointTD(JointTDConfig(), _team(False, False), VDNMixer(), EpisodeTD(EpisodeTDConfig()))
    learner.loss(batch)
    real = batch.rewards[batch.filled]
    assert learner.reward_stats.mean.item() == pytest.approx(real.mean().item() * 12 / (12 + 1e-4), rel=1e-4)


def test_recurrent_unroll_equals_stepping_one_step_at_a_time() -> None:
    """``unroll`` over whole episodes gives the Qs that acting step by step gives (GRU states carried)."""
    team = _team(recurrent=True, last_action=True)
    g = torch.Generator().manual_seed(4)
    obs = [torch.randn(2, 5, 3, generator=g), torch.randn(2, 5, 2, generator=g)]
    actions = torch.stack([torch.randint(3, (2, 4), generator=g), torch.randint(2, (2, 4), generator=g)], -1)
    x = team.inputs(team.stack_obs(obs), previous_actions(actions))
    unrolled = team.unroll(x)
    hidden = team.initial_hidden(2, "cpu")
    starts = torch.ones(2)
    for t in range(5):
        q, _, h = team.q_step([o[:, t] for o in obs], None, hidden, starts)
        assert torch.allclose(q, unrolled[:, t], atol=1e-6)
        if t < 4:
            hidden, starts = (h, actions[:, t]), torch.zeros(2)
