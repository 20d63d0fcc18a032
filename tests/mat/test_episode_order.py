"""MAT with ``order = "episode"``: a decoding order per episode of each env in collection, carried from
step to step in the step record, the same orders in the update's teacher forcing, evaluation and export
in the fixed order, and the running orders that weights from older harl held."""

from __future__ import annotations

import torch

from harl.policy import mat_orders
from harl.policy.mat_decode import evaluate
from harl.policy.mat_policy import TransformerPolicy
from tests.mat.test_formulas import N_ACT, A, obs_list, transformer

E = 6


def episodic(seed: int = 0) -> TransformerPolicy:
    return transformer(seed=seed, order="episode", generator=torch.Generator().manual_seed(5))


def collect(net: TransformerPolicy, starts: list[torch.Tensor]) -> torch.Tensor:
    """``(T, E, A)`` the orders of ``len(starts)`` steps, each step handed what the step before recorded."""
    obs, recorded = obs_list(E), []
    carried = {mat_orders.FIELD: torch.full((E, A), mat_orders.UNKNOWN)}  # a rollout buffer's first slot
    for s in starts:
        sampled = net.sample(obs, None, starts=s, carried=carried)
        carried = dict(sampled.extras)
        recorded.append(sampled.extras[mat_orders.FIELD])
    return torch.stack(recorded)


def test_a_new_order_where_an_episode_begins_only() -> None:
    """Each env keeps its order through its episode and draws a new one when the next begins."""
    net = episodic()
    starts = [torch.ones(E), torch.zeros(E), torch.tensor([0., 1, 0, 0, 1, 0])] + [torch.ones(E)] * 6
    orders = collect(net, starts)
    assert orders.shape == (len(starts), E, A) and orders.dtype == torch.long
    assert torch.equal(orders.sort(-1).values, torch.arange(A).expand(len(starts), E, A))  # permutations
    assert torch.equal(orders[1], orders[0])
    assert torch.equal(orders[2][[0, 2, 3, 5]], orders[1][[0, 2, 3, 5]])
    assert len({tuple(o) for o in orders[:, 1].tolist()}) > 1  # env 1's episodes do not all share one order
    assert len({tuple(o) for o in orders[0].tolist()}) > 1  # nor do the envs
    assert net.record_fields == {mat_orders.FIELD: ((A,), torch.long, mat_orders.UNKNOWN)}
    assert transformer().record_fields == {} and transformer(order="random").record_fields != {}


def test_an_unknown_running_order_is_drawn_even_mid_episode() -> None:
    """A slot no step has written (a run's first step) draws, whatever ``starts`` says; the input is left alone."""
    net = episodic()
    running = torch.full((E, A), mat_orders.UNKNOWN)
    running[:3] = torch.arange(A)
    before = running.clone()
    sampled = net.sample(obs_list(E), None, starts=torch.zeros(E), carried={mat_orders.FIELD: running})
    orders = sampled.extras[mat_orders.FIELD]
    assert torch.equal(orders[:3], before[:3]) and torch.equal(running, before)
    assert torch.equal(orders[3:].sort(-1).values, torch.arange(A).expand(3, A))


def test_teacher_forcing_with_each_steps_order_gives_the_sampled_log_probs() -> None:
    """The update's one decoder pass, each row in its logged order, reproduces collection's log-probs;
    each row is decoded as a network set to that row's order decodes it."""
    net = episodic()
    obs = obs_list(E)
    torch.manual_seed(3)
    sampled = net.sample(obs, None, starts=torch.ones(E))
    orders = sampled.extras[mat_orders.FIELD].unsqueeze(0)
    actions, x = torch.stack(sampled.actions, 1), net.stack_obs(obs)
    log_probs, _, values = evaluate(net, x, actions, None, orders[0])
    torch.testing.assert_close(log_probs, torch.stack(sampled.log_probs, 1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(values, net.encode(x)[0])
    assert torch.equal(sampled.values, values)  # the step's one encoder pass: the update's values, same order
    for b in range(E):
        net.set_order(orders[0, b])
        row, _, _ = evaluate(net, x[b:b + 1], actions[b:b + 1], None)
        torch.testing.assert_close(row, log_probs[b:b + 1], rtol=1e-5, atol=1e-5)
    # agent decoded first in row b reads no one: changing every other agent's action leaves it as it is
    first = orders[0, :, 0]
    changed = (actions + 1) % N_ACT
    changed[torch.arange(E), first] = actions[torch.arange(E), first]
    after, _, _ = evaluate(net, x, changed, None, orders[0])
    torch.testing.assert_close(after[torch.arange(E), first], log_probs[torch.arange(E), first])


def test_acting_outside_collection_decodes_in_the_fixed_order() -> None:
    """Evaluation (act) draws nothing and decodes agent 0 first, as the same weights without episode orders."""
    net, plain = episodic(), transformer()
    obs = obs_list(E)
    net.sample(obs, None, starts=torch.ones(E))  # collection's draws leave act alone
    want, _ = plain.act(obs, None, deterministic=True)
    got, _ = net.act(obs, None, deterministic=True)
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    assert torch.equal(net.order, torch.arange(A))


def test_running_orders_of_older_weights_continue_their_episodes() -> None:
    """Weights saved while the policy held each env's running order (``env_orders``, before the step record
    carried them) load, and the first step keeps those orders where no episode begins (the rollout
    buffer's slot is ``UNKNOWN``: the checkpoint's next rollout start has no orders); weights without
    them load too, and the weights' own state holds no orders today."""
    net = episodic()
    assert set(net.state_dict()) == set(transformer().state_dict()) and "env_orders" not in net.state_dict()
    saved = torch.stack([torch.randperm(A, generator=torch.Generator().manual_seed(e)) for e in range(E)])
    other = episodic(seed=3)
    other.load_state_dict({**net.state_dict(), "env_orders": saved})
    starts = torch.tensor([0., 1, 0, 0, 0, 1])
    unknown = {mat_orders.FIELD: torch.full((E, A), mat_orders.UNKNOWN)}
    orders = other.sample(obs_list(E), None, starts=starts, carried=unknown).extras[mat_orders.FIELD]
    kept = starts == 0
    assert torch.equal(orders[kept], saved[kept])
    again = other.sample(obs_list(E), None, starts=torch.zeros(E), carried=unknown).extras[mat_orders.FIELD]
    assert not torch.equal(again[kept], saved[kept])  # handed over once: later unknown slots draw
    transformer(seed=4).load_state_dict({**net.state_dict(), "env_orders": torch.zeros(0, A, dtype=torch.long)})
    old = {k: v for k, v in net.state_dict().items() if k != "order"}
    transformer(seed=4).load_state_dict(old)
