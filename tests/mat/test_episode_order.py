"""MAT with ``order = "episode"``: a decoding order per episode of each env in collection, the same orders
in the update's teacher forcing, evaluation and export in the fixed order."""

from __future__ import annotations

import torch

from harl.policy.mat import MultiAgentTransformer
from tests.mat.test_formulas import N_ACT, A, obs_list, transformer

E = 6


def episodic(seed: int = 0) -> MultiAgentTransformer:
    net = transformer(seed=seed)
    net.draw_episode_orders(torch.Generator().manual_seed(5))
    return net


def test_a_new_order_where_an_episode_begins_only() -> None:
    """Each env keeps its order through its episode and draws a new one when the next begins."""
    net = episodic()
    obs = obs_list(E)
    starts = [torch.ones(E), torch.zeros(E), torch.tensor([0., 1, 0, 0, 1, 0])] + [torch.ones(E)] * 6
    for s in starts:
        net.sample(obs, None, starts=s)
    orders = net.take_orders()
    assert orders is not None and orders.shape == (len(starts), E, A)
    assert torch.equal(orders.sort(-1).values, torch.arange(A).expand(len(starts), E, A))  # permutations
    assert torch.equal(orders[1], orders[0])
    assert torch.equal(orders[2][[0, 2, 3, 5]], orders[1][[0, 2, 3, 5]])
    assert len({tuple(o) for o in orders[:, 1].tolist()}) > 1  # env 1's episodes do not all share one order
    assert len({tuple(o) for o in orders[0].tolist()}) > 1  # nor do the envs
    again = net.take_orders()  # the log starts anew
    assert again is not None and again.shape == (0, E, A)


def test_teacher_forcing_with_each_steps_order_gives_the_sampled_log_probs() -> None:
    """The update's one decoder pass, each row in its logged order, reproduces collection's log-probs;
    each row is decoded as a network set to that row's order decodes it."""
    net = episodic()
    obs = obs_list(E)
    torch.manual_seed(3)
    sampled = net.sample(obs, None, starts=torch.ones(E))
    orders = net.take_orders()
    assert orders is not None
    actions, x = torch.stack(sampled.actions, 1), net.stack_obs(obs)
    log_probs, _, values = net.evaluate(x, actions, None, orders[0])
    torch.testing.assert_close(log_probs, torch.stack(sampled.log_probs, 1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(values, net.encode(x)[0])
    for b in range(E):
        net.set_order(orders[0, b])
        row, _, _ = net.evaluate(x[b:b + 1], actions[b:b + 1], None)
        torch.testing.assert_close(row, log_probs[b:b + 1], rtol=1e-5, atol=1e-5)
    # agent decoded first in row b reads no one: changing every other agent's action leaves it as it is
    first = orders[0, :, 0]
    changed = (actions + 1) % N_ACT
    changed[torch.arange(E), first] = actions[torch.arange(E), first]
    after, _, _ = net.evaluate(x, changed, None, orders[0])
    torch.testing.assert_close(after[torch.arange(E), first], log_probs[torch.arange(E), first])


def test_acting_outside_collection_decodes_in_the_fixed_order() -> None:
    """Evaluation (act) draws nothing and decodes agent 0 first, as the same weights without episode orders."""
    net, plain = episodic(), transformer()
    obs = obs_list(E)
    net.sample(obs, None, starts=torch.ones(E))  # collection's draws leave act alone
    want, _ = plain.act(obs, None, deterministic=True)
    got, _ = net.act(obs, None, deterministic=True)
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    assert len(net.collected_orders) == 1


def test_running_orders_are_saved_with_the_weights() -> None:
    """A checkpoint holds each env's running order (a resumed episode keeps it); older weights load."""
    net = episodic()
    net.sample(obs_list(E), None, starts=torch.ones(E))
    other = episodic(seed=3)
    other.load_state_dict(net.state_dict())
    assert torch.equal(other.env_orders, net.env_orders) and other.env_orders.shape == (E, A)
    old = {k: v for k, v in net.state_dict().items() if k != "env_orders"}
    transformer(seed=4).load_state_dict(old)
