"""harl's Sable network and update against numbers Mava's own Sable produced (issue 57, item 2a).

``benchmarks/sable_mava_replay.py`` ran Mava 73c4611's ``SableNetwork`` (JAX/flax, in its own
venv) on fixed inputs with weights from a fixed key, and 1 and 10 steps of Mava's own minibatch
update (``_update_minibatch`` of mava/systems/sable/anakin/{rec,ff}_sable.py: its PPO loss and
``optax.chain(clip_by_global_norm(0.5), adam(2.5e-4, eps=1e-5))``) on one batch, and kept the
inputs, Mava's weights under harl's parameter names, its outputs, each step's losses and the
weights after 1 and 10 steps in ``tests/sable/data/mava_replay_<case>.json``.  Here harl's side
runs alone (no JAX) and must give Mava's numbers to float32 rounding:

* ``rec``: memory Sable, the parallel training form over 6 timesteps with episode starts
  mid-rollout, at t=0 and twice in one row, a carried state, 2 blocks, illegal actions masked;
* ``rec_chunk_pos``: the same chunkwise over 3 timesteps (a start mid-chunk) with the timestep
  encoding on;
* ``ff``: non-memory Sable, each row one timestep of the agents, no state (harl's network with
  T=1 and zero states).

The reference is Mava 73c4611 with four one-line fixes (the replay script's ``PATCHES``: the
head-slice write that zeroes retention's output, the decoder state not carried agent to agent
when acting, the ff decoder's lost causal mask, and the loss unpacking the network's
``(values, log_probs, entropy)`` as ``(log_prob, value, entropy)``).  What the unchanged 73c4611
gives is pinned too: harl reproduces it with every retention head's output replaced by zeros
and the loss fed values as log-probs and log-probs as values.

The update is checked twice: with harl's own Sable objective as its ``update`` runs one
minibatch (``SableLearner.loss`` with the ``sable_v`` value loss, ``optimizer_step``: torch's
``clip_grad_norm_`` and Adam; harl/update/objectives/sable.py, sable_values.py) and with
``mava_ppo_loss`` below, Mava's ``_loss_fn`` (rec_sable.py:200-252, ff_sable.py:186-236) written
out by hand in torch beside optax's ``clip_by_global_norm`` (``t / norm * max_norm`` when
norm >= max_norm; the clip acts here, the gradient norms 0.8-5 against 0.5; torch's clip divides by
norm + 1e-6, a difference below these tolerances).
The hand-written loss also reproduces 73c4611 as-is (swapped inputs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from benchmarks.sable_mava_replay import unpack
from harl.nets.sable.network import SableHidden, SableNetwork
from harl.nets.sable.retention import MultiScaleRetention

DATA = Path(__file__).resolve().parent / "data"
CASES = ("rec", "rec_chunk_pos", "ff")
HIDDEN = ("hidden_encoder", "hidden_decoder_self", "hidden_decoder_cross")


def build_net(settings: dict[str, Any], weights: dict[str, np.ndarray]) -> SableNetwork:
    net = SableNetwork(settings["obs_dim"], settings["action_dim"], settings["n_agents"], discrete=True,
                       n_block=settings["n_block"], embed_dim=settings["embed_dim"], n_head=settings["n_head"],
                       decay_scaling_factor=settings["decay_scaling_factor"], positional_encoding=settings["pos"],
                       chunk_timesteps=settings["chunk"])
    net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in weights.items()}, strict=True)
    return net


def mava_ppo_loss(log_prob: torch.Tensor, value: torch.Tensor, entropy: torch.Tensor,
                  old: dict[str, torch.Tensor], system: dict[str, float]) -> tuple[torch.Tensor, dict[str, float]]:
    """Mava's Sable loss (rec_sable.py / ff_sable.py ``_loss_fn``): clipped ratio on normalised
    advantages (population std + 1e-8 over the minibatch), entropy mean, value loss as half the
    mean of the larger of the unclipped and the clipped squared errors."""
    eps = system["clip_eps"]
    ratio = torch.exp(log_prob - old["old_log_probs"])
    gae = old["advantages"]
    gae = (gae - gae.mean()) / (gae.std(correction=0) + 1e-8)
    actor = -torch.minimum(ratio * gae, ratio.clamp(1.0 - eps, 1.0 + eps) * gae).mean()
    ent = entropy.mean()
    clipped = old["old_values"] + (value - old["old_values"]).clamp(-eps, eps)
    value_loss = 0.5 * torch.maximum((value - old["targets"]) ** 2, (clipped - old["targets"]) ** 2).mean()
    total = actor - system["ent_coef"] * ent + system["vf_coef"] * value_loss
    parts = {"total_loss": total, "actor_loss": actor, "entropy": ent, "value_loss": value_loss}
    return total, {k: v.item() for k, v in parts.items()}


def clip_by_global_norm(params: list[torch.Tensor], max_norm: float) -> None:
    """optax.clip_by_global_norm: unchanged below max_norm, else each gradient / norm * max_norm."""
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.sqrt(sum(g.pow(2).sum() for g in grads))
    if not bool(norm < max_norm):
        for g in grads:
            g.copy_(g / norm * max_norm)


class HarlUpdate:
    """harl's network on the replay's inputs, stepped with Adam at Mava's settings on one loss:

    * ``objective="harl"``: harl's Sable objective as its ``update`` runs each minibatch
      (``SableLearner.loss`` with ``sable_v``'s ``SableValueLoss``, then ``optimizer_step``: torch's
      ``clip_grad_norm_`` and Adam), on a ``SablePolicy`` holding the weights, the timestep encoding
      (``timestep_positional_encoding``) on where the case has it, the batch's step counts Mava's;
    * ``objective="hand"``: ``mava_ppo_loss``, optax's clip written out, torch's Adam; ``swapped``
      feeds the loss values as log-probs and log-probs as values (73c4611 as-is).
    """

    def __init__(self, settings: dict[str, Any], system: dict[str, float], weights: dict[str, np.ndarray],
                 x: dict[str, np.ndarray], old: dict[str, np.ndarray], swapped: bool = False,
                 objective: str = "hand") -> None:
        self.settings, self.system, self.swapped, self.objective = settings, system, swapped, objective
        self.x = {k: torch.from_numpy(np.asarray(v)) for k, v in x.items()}
        self.old = {k: torch.from_numpy(np.asarray(v)) for k, v in old.items()}
        if objective == "harl":
            self._harl_objective(weights)
        else:
            self.net = build_net(settings, weights)
            self.opt = torch.optim.Adam(self.net.parameters(), lr=system["actor_lr"], betas=(0.9, 0.999),
                                        eps=system["adam_eps"])

    def _harl_objective(self, weights: dict[str, np.ndarray]) -> None:
        from gymnasium import spaces

        from harl.policy.sable_policy import SablePolicy
        from harl.update.objectives.sable import SableBatch, SableConfig, SableLearner
        from harl.update.sable_values import SableValueLoss, SableValues, SableValuesConfig

        st, sy, x = self.settings, self.system, self.x
        memory = st["variant"] == "rec"
        policy = SablePolicy([spaces.Box(-np.inf, np.inf, (st["obs_dim"],))] * st["n_agents"],
                             [spaces.Discrete(st["action_dim"])] * st["n_agents"], memory=memory, agent_id=False,
                             n_block=st["n_block"], embed_dim=st["embed_dim"], n_head=st["n_head"],
                             decay_scaling_factor=st["decay_scaling_factor"], positional_encoding=st["pos"],
                             chunk_timesteps=st["chunk"])
        policy.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in weights.items()}, strict=True)
        config = SableConfig(memory=memory, n_block=st["n_block"], embed_dim=st["embed_dim"], n_head=st["n_head"],
                             decay_scaling_factor=st["decay_scaling_factor"], chunk_timesteps=st["chunk"] or 0,
                             timestep_positional_encoding=st["pos"], agent_id=False, clip=sy["clip_eps"], epochs=1, minibatches=1,
                             entropy_coef=sy["ent_coef"], lr=sy["actor_lr"], adam_eps=sy["adam_eps"],
                             max_grad_norm=sy["max_grad_norm"])
        self.net, self.learner = policy, SableLearner(policy, config, torch.Generator().manual_seed(0))
        self.value_loss = SableValueLoss(SableValues(policy), SableValuesConfig(value_clip=sy["clip_eps"]))
        batch = SableBatch(obs=x["obs"], actions=x["actions"].long(), old_log_probs=self.old["old_log_probs"],
                           legal=x["legal"].bool(), starts=x["starts"].bool(), advantages=self.old["advantages"],
                           old_values=self.old["old_values"], returns=self.old["targets"],
                           hidden=SableHidden(*(x[k] for k in HIDDEN)) if memory else None,
                           step_count=x["step_count"].long() if st["pos"] else None)
        self.batch = batch if memory else batch.single_steps()  # as SableLearner.minibatches

    def evaluate(self) -> Any:
        x = self.x
        hidden = SableHidden(*(x[k] for k in HIDDEN))
        steps = x["step_count"] if self.settings["pos"] else None
        return self.net.evaluate(x["obs"], x["actions"].long(), hidden, x["starts"].bool(), x["legal"].bool(), steps)

    def step(self) -> dict[str, float]:
        if self.objective == "harl":
            from harl.update.common import optimizer_step
            learner = self.learner
            loss, policy_loss, v_loss, entropy, _ = learner.loss(self.batch, self.value_loss,
                                                                 self.value_loss.value_loss_coef)
            optimizer_step(learner.optimizer, loss, self.net.parameters(), learner.config.max_grad_norm)
            parts = {"total_loss": loss, "actor_loss": policy_loss, "entropy": entropy, "value_loss": v_loss}
            return {k: v.item() for k, v in parts.items()}
        ev = self.evaluate()
        log_prob, value = (ev.values, ev.log_probs) if self.swapped else (ev.log_probs, ev.values)
        total, parts = mava_ppo_loss(log_prob, value, ev.entropy, self.old, self.system)
        self.opt.zero_grad()
        total.backward()
        clip_by_global_norm(list(self.net.parameters()), self.system["max_grad_norm"])
        self.opt.step()
        return parts


def harl_act(settings: dict[str, Any], weights: dict[str, np.ndarray], x: dict[str, np.ndarray],
             mava_actions: np.ndarray) -> dict[str, np.ndarray]:
    """harl's acting call on the replay's acting inputs, taking the actions Mava sampled
    (JAX's and torch's generators differ), agent by agent."""
    net = build_net(settings, weights)
    forced = iter(torch.from_numpy(mava_actions).long().unbind(1))
    net._sample = lambda dist, out, deterministic, generator: next(forced)  # type: ignore[method-assign]
    t = {k: torch.from_numpy(np.asarray(v)) for k, v in x.items()}
    steps = t["act_step_count"] if settings["pos"] else None
    with torch.no_grad():
        out = net.act(t["act_obs"], SableHidden(*(t[k] for k in HIDDEN)), t["act_starts"].bool(),
                      t["act_legal"].bool(), step_count=steps)
    got = {"actions": out.actions, "log_probs": out.log_probs, "values": out.values}
    got.update(zip(HIDDEN, out.hidden, strict=True))
    return {k: v.numpy() for k, v in got.items()}


@pytest.fixture(scope="module", params=CASES)
def record(request: pytest.FixtureRequest) -> dict[str, Any]:
    import json
    torch.set_num_threads(1)
    rec = json.loads((DATA / f"mava_replay_{request.param}.json").read_text(encoding="utf-8"))
    rec["x"] = {k: unpack(v) for k, v in rec["inputs"].items()}
    rec["old"] = {k: unpack(v) for k, v in rec["rollout"].items()}
    rec["init"] = {k: unpack(v) for k, v in rec["weights_init"].items()}
    return rec


@pytest.fixture
def zero_heads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every retention head's output replaced by zeros before the group norm: 73c4611 as-is."""
    gate = MultiScaleRetention._gate
    monkeypatch.setattr(MultiScaleRetention, "_gate", lambda self, key, heads: gate(self, key, torch.zeros_like(heads)))


def _check_train(rec: dict[str, Any], side: str) -> None:
    with torch.no_grad():
        ev = HarlUpdate(rec["settings"], rec["system"], rec["init"], rec["x"], rec["old"]).evaluate()
    for name, ours in (("values", ev.values), ("log_probs", ev.log_probs), ("entropy", ev.entropy)):
        np.testing.assert_allclose(ours.numpy(), unpack(rec[side]["train"][name]), rtol=1e-5, atol=1e-6, err_msg=name)


def _check_act(rec: dict[str, Any], side: str) -> None:
    mava = {k: unpack(v) for k, v in rec[side]["act"].items()}
    ours = harl_act(rec["settings"], rec["init"], rec["x"], mava["actions"])
    assert rec["x"]["act_legal"][np.arange(len(mava["actions"]))[:, None], np.arange(mava["actions"].shape[1]),
                                 mava["actions"]].all()  # Mava sampled legal actions only
    for name, theirs in mava.items():
        np.testing.assert_allclose(ours[name], theirs, rtol=1e-5, atol=1e-6, err_msg=name)


def _check_update(rec: dict[str, Any], side: str, swapped: bool, objective: str = "hand") -> None:
    ours = HarlUpdate(rec["settings"], rec["system"], rec["init"], rec["x"], rec["old"], swapped=swapped,
                      objective=objective)
    for k, mava_loss in enumerate(rec[side]["losses"], start=1):
        loss = ours.step()
        for name, value in mava_loss.items():
            assert loss[name] == pytest.approx(value, rel=1e-5, abs=1e-6), (k, name)
        if k in (1, 10):
            state = {n: p.detach().numpy() for n, p in ours.net.state_dict().items()}
            pinned = rec[side][f"step{k}"]
            for name, arr in pinned["selected"].items():
                # each weight to float32 rounding of its step's change (Adam moves each by <= lr per step)
                np.testing.assert_allclose(state[name], unpack(arr), rtol=0, atol=2e-7 * k, err_msg=(k, name))
            assert sorted(pinned["fingerprint"]) == sorted(state)
            for name, (total, magnitude, largest) in pinned["fingerprint"].items():
                change = state[name].astype(np.float64) - rec["init"][name].astype(np.float64)
                tol = 2e-7 * k * change.size
                assert abs(change.sum() - total) <= tol, (k, name)
                assert abs(np.abs(change).sum() - magnitude) <= tol, (k, name)
                assert abs(np.abs(change).max() - largest) <= 2e-7 * k, (k, name)


def test_training_call_matches_mava(record: dict[str, Any]) -> None:
    _check_train(record, "mava")


def test_acting_call_matches_mava(record: dict[str, Any]) -> None:
    _check_act(record, "mava")


def test_update_matches_mava_after_1_and_10_steps(record: dict[str, Any]) -> None:
    """Mava's loss written out here, optax's clip and torch's Adam."""
    _check_update(record, "mava", swapped=False)
    moved = [v[1] for v in record["mava"]["step10"]["fingerprint"].values()]
    assert min(moved) > 0  # every tensor moved: no pin of an idle layer


def test_harl_sable_objective_matches_mava_after_1_and_10_steps(record: dict[str, Any]) -> None:
    """harl's own Sable objective, value loss, clip and Adam (harl/update/objectives/sable.py) as its
    update runs one minibatch."""
    _check_update(record, "mava", swapped=False, objective="harl")


def test_mava_as_is_is_harl_with_zero_heads_and_swapped_outputs(record: dict[str, Any], zero_heads: None) -> None:
    """73c4611 unchanged: retention's output is zero (the dropped head-slice write), and its loss
    takes values for log-probs and log-probs for values."""
    _check_train(record, "mava_as_is")
    _check_act(record, "mava_as_is")
    _check_update(record, "mava_as_is", swapped=True)
