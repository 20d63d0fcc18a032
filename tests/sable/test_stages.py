"""Sable's stages on the torch MPE: what collection records is what the update recomputes, the
retention states ride the step record across rollouts and reset where an episode begins, and the
update's minibatches and agent orders are Mava's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

import harl
from harl.errors import ConfigError
from harl.policy.sable_policy import FIELDS, SablePolicy
from harl.update.objectives.sable import SableBatch, sable_batch, standardize
from harl.update.sable_values import sable_value_loss

PIPELINE = Path(__file__).parents[2] / "pipelines" / "sable_mpe_torch_spread.toml"
SMALL = ["collector.n_envs=4", "collector.rollout_length=40", "updater.objective.embed_dim=16",
         "run.device=\"cpu\"", "updater.objective.minibatches=2"]


@contextmanager
def stages(*extra: str) -> Iterator[Any]:
    with harl.build(PIPELINE, [*SMALL, *extra]) as built:
        yield built


def rollout(built: Any) -> SableBatch:
    built.collector.collect(built.buffer)
    built.returns.compute(built.buffer)
    return sable_batch(built.buffer, built.policy)


@pytest.mark.parametrize("memory", [True, False], ids=["rec", "ff"])
@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "box"])
def test_training_recomputes_what_collection_recorded(memory: bool, continuous: bool) -> None:
    """Over two rollouts (the second from carried states, episodes of 25 steps ending mid-rollout),
    the update's call gives the recorded log-probabilities (ratio 1) and values, agents in collection's order."""
    extra = (f"updater.objective.memory={str(memory).lower()}", f"env.continuous_actions={str(continuous).lower()}")
    with stages(*extra) as built:
        for _ in range(2):
            batch = rollout(built)
            assert batch.starts[:, 1:].any(1).all()  # an episode begins inside each rollout
            torch.testing.assert_close(built.updater.learner.ratio(batch), torch.ones_like(batch.old_log_probs),
                                       atol=2e-6, rtol=0)
            units = batch if memory else batch.single_steps()
            hidden = units.hidden if units.hidden is not None else built.policy.zero_hidden(units.obs.shape[0])
            out = built.policy.evaluate(units.obs, units.actions, hidden, units.starts, units.legal)
            torch.testing.assert_close(out.values.reshape(batch.old_values.shape), batch.old_values,
                                       atol=2e-5, rtol=1e-5)
            built.updater.update(built.buffer, 0.0)


def test_states_carry_over_rollouts_and_reset_at_episode_starts() -> None:
    with stages() as built:
        rollout(built)
        last = {name: built.buffer.extras[name][-1].clone() for name in FIELDS}
        assert all(x.abs().sum() > 0 for x in last.values())
        batch = rollout(built)
        assert batch.hidden is not None
        for name, state in zip(FIELDS, batch.hidden, strict=True):
            torch.testing.assert_close(state, last[name])
        # a step that begins an episode acts as from zero states, whatever it carries
        policy: SablePolicy = built.policy
        obs = [o[0] for o in built.buffer.obs]
        carried = {name: built.buffer.extras[name][5] for name in FIELDS}
        starts = torch.ones(4)
        from_states = policy.sample(obs, None, deterministic=True, starts=starts, carried=carried)
        from_zero = policy.sample(obs, None, deterministic=True, starts=starts)
        torch.testing.assert_close(from_states.values, from_zero.values)
        kept = policy.sample(obs, None, deterministic=True, starts=torch.zeros(4), carried=carried)
        assert not torch.allclose(kept.values, from_zero.values)


def test_the_feed_forward_variant_records_nothing() -> None:
    with stages("updater.objective.memory=false") as built:
        assert built.policy.record_fields == {} and built.buffer.extras == {}
        batch = rollout(built)
        assert batch.hidden is None
        assert built.policy.act([o[0] for o in built.buffer.obs], None, starts=None)[1] is None


def test_the_critic_bootstraps_from_the_states_the_last_step_left() -> None:
    with stages() as built:
        rollout(built)
        policy: SablePolicy = built.policy
        x = built.critic.reads([o[-1] for o in built.buffer.obs], None)
        assert policy.bootstrap_hidden is not None
        want = policy.encode_step(x, policy.bootstrap_hidden.encoder, torch.zeros(4, dtype=torch.bool))[0]
        torch.testing.assert_close(built.buffer.values[-1], want)
        zero = policy.encode_step(x, policy.zero_hidden(4).encoder, torch.ones(4, dtype=torch.bool))[0]
        assert not torch.allclose(want, zero)


@pytest.mark.parametrize("memory", [True, False], ids=["rec", "ff"])
def test_minibatches_and_agent_orders_are_mavas(memory: bool) -> None:
    """rec_sable: the envs split in two, each minibatch whole rollouts with their starting states;
    ff_sable: the single steps split in two.  One agent permutation per epoch for every field."""
    with stages(f"updater.objective.memory={str(memory).lower()}") as built:
        batch = rollout(built)
        learner = built.updater.learner
        state = learner.generator.get_state()
        mbs = learner.minibatches(batch)
        learner.generator.set_state(state)
        count = 4 if memory else 4 * 40
        perm = torch.randperm(count, generator=learner.generator)
        agents = torch.randperm(3, generator=learner.generator)
        units = batch if memory else batch.single_steps()
        for k, mb in enumerate(mbs):
            rows = perm[k * count // 2:(k + 1) * count // 2]
            assert mb.obs.shape[:3] == ((2, 40, 3) if memory else (80, 1, 3))
            torch.testing.assert_close(mb.obs, units.obs[rows][:, :, agents])
            torch.testing.assert_close(mb.actions, units.actions[rows][:, :, agents])
            torch.testing.assert_close(mb.advantages, units.advantages[rows][:, :, agents])
            assert (mb.starts == units.starts[rows]).all()
            if memory:
                assert mb.hidden is not None and batch.hidden is not None
                torch.testing.assert_close(mb.hidden.encoder, batch.hidden.encoder[rows])
            else:
                assert mb.hidden is None and mb.starts.all()


def test_the_loss_is_mavas_sum_of_terms() -> None:
    """loss = policy loss - 0.01 entropy + 0.5 value loss, each term from the update's own call."""
    with stages() as built:
        batch = rollout(built)
        learner, critic_loss = built.updater.learner, built.updater.critic_learner
        mb = learner.minibatches(batch)[0]
        loss, policy_loss, v_loss, entropy, _ = learner.loss(mb, critic_loss, critic_loss.value_loss_coef)
        assert mb.hidden is not None
        out = built.policy.evaluate(mb.obs, mb.actions, mb.hidden, mb.starts, mb.legal)
        ratio = (out.log_probs - mb.old_log_probs).exp()
        adv = standardize(mb.advantages)
        want_policy = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
        want_value = sable_value_loss(out.values, mb.old_values, mb.returns, 0.2)
        torch.testing.assert_close(policy_loss, want_policy)
        torch.testing.assert_close(v_loss, want_value)
        torch.testing.assert_close(entropy, out.entropy.mean())
        torch.testing.assert_close(loss, want_policy - 0.01 * out.entropy.mean() + 0.5 * want_value)


def test_a_recurrent_sable_without_episode_starts_is_refused() -> None:
    with stages() as built:
        with pytest.raises(ConfigError, match="episode-start mask"):
            built.policy.sample([o[0] for o in built.buffer.obs], None, starts=None)


def test_value_norm_option_works_in_the_normalisers_units() -> None:
    """``[critic] value_norm`` (not Mava's): collection stores denormalised encoder values; the loss is
    Mava's on normalize(R) after the statistics take in R, against the normalised old values."""
    with stages("critic.value_norm=true") as built:
        batch = rollout(built)
        critic, loss = built.critic, built.updater.critic_learner
        assert batch.hidden is not None
        out = built.policy.evaluate(batch.obs, batch.actions, batch.hidden, batch.starts, batch.legal)
        torch.testing.assert_close(critic.denormalize(out.values), batch.old_values, atol=2e-5, rtol=1e-5)
        mb = built.updater.learner.team_batch(built.buffer, loss)
        torch.testing.assert_close(mb.old_values, critic.normalize_targets(batch.old_values))
        state = {k: v.clone() for k, v in critic.normalizer.state_dict().items()}
        got = loss(out.values, mb)
        critic.normalizer.load_state_dict(state)
        critic.normalizer.update(mb.returns)
        want = sable_value_loss(out.values, mb.old_values, critic.normalize_targets(mb.returns), 0.2)
        torch.testing.assert_close(got, want)


def test_advantages_are_mavas_gae() -> None:
    """rec_sable.py:165-187 transcribed: backwards over the rollout, done_{t+1} = an episode ended at
    step t (a time limit too), delta = r_t + gamma v_{t+1} (1 - done_{t+1}) - v_t and
    gae_t = delta + gamma lambda (1 - done_{t+1}) gae_{t+1}, from (0, V(last state), its done)."""
    with stages() as built:
        rollout(built)
        b = built.buffer
        ended = (b.terminated | b.truncated).float().unsqueeze(-1)
        gae, next_value = torch.zeros_like(b.values[0]), b.values[-1]
        want = torch.zeros_like(b.advantages)
        for t in reversed(range(b.length)):
            delta = b.rewards[t] + 0.99 * next_value * (1 - ended[t]) - b.values[t]
            gae = delta + 0.99 * 0.95 * (1 - ended[t]) * gae
            want[t], next_value = gae, b.values[t]
        torch.testing.assert_close(b.advantages, want)
        torch.testing.assert_close(b.returns, want + b.values[:-1])
