"""Attention over entities (harl.nets.entity): invariance, equivariance, masks, other maps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.errors import ConfigError
from harl.nets.entity import (
    EntityEncoder,
    EntityGroup,
    EntityLayout,
    entity_layout,
    load_for_other_map,
    retarget,
    with_entity_layout,
)
from harl.policy.config import PolicyConfig
from harl.policy.on_policy import OnPolicyActors

UNIT, OWN = 4, 3


def layout(allies: int, enemies: int) -> EntityLayout:
    """SMAX's shape in small: other allies, enemies, own; health first; attack k is action 5 + k."""
    groups = (EntityGroup("ally", 0, allies, UNIT), EntityGroup("enemy", allies * UNIT, enemies, UNIT),
              EntityGroup("own", (allies + enemies) * UNIT, 1, OWN))
    return EntityLayout(groups, (allies + enemies) * UNIT + OWN, targets="enemy", target_offset=5, presence=0)


def observations(n: int, allies: int, enemies: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, (allies + enemies) * UNIT + OWN, generator=g)
    x[:, :-OWN].view(n, -1, UNIT)[..., 0] = torch.rand(n, allies + enemies, generator=g) + 0.1  # every unit there
    return x


def blocks(x: torch.Tensor, allies: int, enemies: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = x.shape[0]
    units = x[:, :-OWN].view(n, allies + enemies, UNIT)
    return units[:, :allies], units[:, allies:], x[:, -OWN:]


def join(a: torch.Tensor, e: torch.Tensor, own: torch.Tensor) -> torch.Tensor:
    return torch.cat([a.reshape(a.shape[0], -1), e.reshape(e.shape[0], -1), own], -1)


def encoder(allies: int = 2, enemies: int = 3, **kw: object) -> EntityEncoder:
    torch.manual_seed(0)
    return EntityEncoder(layout(allies, enemies), [16, 16], **kw)  # type: ignore[arg-type]


def team(allies: int, enemies: int) -> OnPolicyActors:
    """A shared actor with the entity encoder and its target head, for agents of ``layout(allies, enemies)``."""
    torch.manual_seed(0)
    space = with_entity_layout(spaces.Box(-1, 1, (layout(allies, enemies).size,), np.float32), layout(allies, enemies))
    config = PolicyConfig(hidden_sizes=(16, 16), encoder="entity", share_parameters=True)
    return OnPolicyActors([space] * (allies + 1), [spaces.Discrete(5 + enemies)] * (allies + 1), config)


class TestSymmetry:
    def test_features_invariant_to_order_within_a_group(self) -> None:
        """Permuting the allies or the enemies leaves the features unchanged."""
        net = encoder()
        x = observations(5, 2, 3)
        a, e, own = blocks(x, 2, 3)
        y = join(a[:, [1, 0]], e[:, [2, 0, 1]], own)
        torch.testing.assert_close(net(y), net(x))

    def test_not_invariant_across_groups(self) -> None:
        """An ally and an enemy with the same features are told apart (one embedding per group)."""
        net = encoder(2, 2)
        x = observations(4, 2, 2)
        a, e, own = blocks(x, 2, 2)
        assert not torch.allclose(net(join(e, a, own)), net(x))

    def test_entity_outputs_equivariant(self) -> None:
        """Each entity's output moves with its entity."""
        net = encoder()
        x = observations(5, 2, 3)
        a, e, own = blocks(x, 2, 3)
        _, out, _ = net.tokens(x)
        _, out_p, _ = net.tokens(join(a, e[:, [2, 0, 1]], own))
        torch.testing.assert_close(out_p[:, 2:5], out[:, 2:5][:, [2, 0, 1]])
        torch.testing.assert_close(out_p[:, :2], out[:, :2])

    def test_attack_logits_follow_their_enemy(self) -> None:
        """The actor's logits: moves unchanged, attack k + 5 follows enemy k when the enemies are permuted."""
        actor = team(2, 3).actor(0)
        x = observations(6, 2, 3)
        a, e, own = blocks(x, 2, 3)
        (logits,) = actor.distribution(x, None)
        (perm,) = actor.distribution(join(a, e[:, [1, 2, 0]], own), None)
        torch.testing.assert_close(perm[:, :5], logits[:, :5])
        torch.testing.assert_close(perm[:, 5:], logits[:, 5:][:, [1, 2, 0]])


class TestMasks:
    def test_absent_entity_changes_nothing(self) -> None:
        """A unit whose health is 0 is absent: any other values in its block leave every output as it was."""
        net = encoder()
        x = observations(5, 2, 3)
        x[:, 4:8] = 0.0  # ally 1 absent
        x[:, 12:16] = 0.0  # enemy 1 absent
        y = x.clone()
        y[:, 5:8] = torch.randn(5, 3)
        y[:, 13:16] = 7.0
        out_x, ent_x, present = net.tokens(x)
        out_y, ent_y, _ = net.tokens(y)
        torch.testing.assert_close(out_y, out_x)
        torch.testing.assert_close(ent_y, ent_x)
        assert present[:, [1, 3]].sum() == 0 and bool(present[:, [0, 2, 4]].all())
        assert torch.equal(ent_x[:, [1, 3]], torch.zeros(5, 2, 16))

    def test_absent_target_logit_does_not_move(self) -> None:
        """An absent enemy's attack logit is the same whatever its block holds."""
        actor = team(2, 3).actor(0)
        x = observations(4, 2, 3)
        x[:, 8:12] = 0.0  # enemy 0 absent
        y = x.clone()
        y[:, 9:12] = 3.0
        torch.testing.assert_close(actor.distribution(y, None)[0], actor.distribution(x, None)[0])

    def test_matches_the_network_without_the_absent_entity(self) -> None:
        """Absent units are as if the map had none: 2 allies with one absent = the same weights on 1 ally."""
        net = encoder(2, 3)
        x = observations(3, 2, 3)
        a, e, own = blocks(x, 2, 3)
        x[:, 4:8] = 0.0
        fewer = join(a[:, :1], e, own)
        small = EntityEncoder(layout(1, 3), [16, 16])
        small.load_state_dict(net.state_dict())
        torch.testing.assert_close(small(fewer), net(x))

    def test_nobody_there(self) -> None:
        """Every entity absent (a battle's end): finite features from the summary token alone."""
        net = encoder()
        out = net(torch.zeros(2, layout(2, 3).size))
        assert torch.isfinite(out).all()


class TestOtherMaps:
    def test_weights_do_not_depend_on_the_counts(self) -> None:
        """A network for 2 allies and 3 enemies has the parameters of one for 4 and 6."""
        small, large = team(2, 3), team(4, 6)
        shapes = {k: v.shape for k, v in small.state_dict().items()}
        assert shapes == {k: v.shape for k, v in large.state_dict().items()}

    def test_small_map_network_acts_on_a_large_map(self) -> None:
        """An actor built for 2 v 3 units, retargeted, acts on 4 v 6 observations as one built for them
        with its weights."""
        small, large = team(2, 3), team(4, 6)
        large.load_state_dict(small.state_dict())
        assert retarget(small, layout(4, 6)) == 1
        x = observations(7, 4, 6)
        avail = torch.ones(7, 11)
        avail[:, 7] = 0
        torch.testing.assert_close(small.actor(0).distribution(x, avail)[0], large.actor(0).distribution(x, avail)[0])
        actions, _ = small.act([x] * 5, [avail] * 5, deterministic=False)
        assert actions[0].shape == (7, 1) and int(actions[0].max()) <= 10 and bool((actions[0] != 7).all())

    def test_retarget_refuses_other_groups(self) -> None:
        """A layout whose blocks are wider is not the same kind of observation."""
        other = EntityLayout((EntityGroup("ally", 0, 2, UNIT + 1),), 2 * UNIT + 2)
        with pytest.raises(ValueError, match="the entity groups differ"):
            encoder().retarget(other)


class TestBuild:
    def test_space_without_layout(self) -> None:
        """encoder = "entity" on a plain Box names the key and the fix."""
        config = PolicyConfig(encoder="entity")
        with pytest.raises(ConfigError) as err:
            OnPolicyActors([spaces.Box(-1, 1, (6,), np.float32)], [spaces.Discrete(3)], config, "p.toml")
        assert str(err.value) == (
            'p.toml: policy.encoder: "entity" reads observations the env splits into entities (its spaces carry an '
            "entity_layout: SMAX's do), but this input (6,) has none; set policy.encoder = \"mlp\" (or \"auto\")")

    def test_recurrent_refused_with_target_head(self) -> None:
        """A GRU between the encoder and the target head is refused in one sentence naming the key."""
        space = with_entity_layout(spaces.Box(-1, 1, (layout(2, 3).size,), np.float32), layout(2, 3))
        config = PolicyConfig(encoder="entity", recurrent="naive")
        with pytest.raises(ConfigError, match='policy.recurrent: "naive"'):
            OnPolicyActors([space], [spaces.Discrete(8)], config)

    def test_other_action_space_takes_the_usual_head(self) -> None:
        """A Box action (no targets to score) gets the usual Gaussian head on the features."""
        space = with_entity_layout(spaces.Box(-1, 1, (layout(2, 3).size,), np.float32), layout(2, 3))
        team_ = OnPolicyActors([space], [spaces.Box(-1, 1, (2,), np.float32)], PolicyConfig(encoder="entity"))
        actions, _ = team_.act([observations(3, 2, 3)], None)
        assert actions[0].shape == (3, 2)

    def test_off_policy_prefix(self) -> None:
        """Off-policy actors read the entities through the encoder before their MLP (its width out)."""
        from harl.nets.plain import off_policy_encoder

        space = with_entity_layout(spaces.Box(-1, 1, (layout(2, 3).size,), np.float32), layout(2, 3))
        net, width = off_policy_encoder(space, "entity", "auto", 32, "relu", "policy", "p.toml")
        assert isinstance(net, EntityEncoder) and width == 32
        assert net(observations(4, 2, 3)).shape == (4, 32)

    def test_layout_survives_pickling(self) -> None:
        """The layout rides on the space through a pickle (subprocess env workers send spaces)."""
        import pickle

        space = with_entity_layout(spaces.Box(-1, 1, (layout(2, 3).size,), np.float32), layout(2, 3))
        assert entity_layout(pickle.loads(pickle.dumps(space))) == layout(2, 3)


def test_v_critic_entity_encoder() -> None:
    """[critic] encoder = "entity": EP one value per state, FP one per agent (the id joins the summary token)."""
    from harl.update.v_critic import VCritic, VCriticConfig

    state = EntityLayout((EntityGroup("ally", 0, 3, UNIT), EntityGroup("enemy", 3 * UNIT, 3, UNIT)), 6 * UNIT,
                         presence=0)
    space = with_entity_layout(spaces.Box(-np.inf, np.inf, (state.size,), np.float32), state)
    x = torch.randn(5, state.size)
    ep = VCritic(state.size, 3, VCriticConfig(encoder="entity", hidden_sizes=(16, 16)), state_space=space)
    fp = VCritic(state.size, 3, VCriticConfig(encoder="entity", state_type="FP", hidden_sizes=(16, 16)),
                 state_space=space)
    assert ep.value(x).shape == (5,) and fp.value(x).shape == (5, 3)
    perm = x.view(5, 6, UNIT)[:, [2, 0, 1, 3, 4, 5]].reshape(5, -1)
    torch.testing.assert_close(ep.value(perm), ep.value(x))


@pytest.fixture(scope="module")
def envs() -> dict[str, object]:
    """SMAX 3m and 5m_vs_6m, two envs each."""
    pytest.importorskip("jaxmarl")
    from harl.envs.smax import SMAXConfig, SMAXVectorEnv

    return {m: SMAXVectorEnv(SMAXConfig(scenario=m), 2, 0) for m in ("3m", "5m_vs_6m")}


def test_checkpoint_of_one_map_loads_into_another() -> None:
    """A V critic saved with 3 agents loads into one for 5: the parameters, not its one-hot id buffer;
    a parameter of another shape is still an error."""
    from harl.update.v_critic import VCritic, VCriticConfig

    def critic(allies: int) -> VCritic:
        state = EntityLayout((EntityGroup("ally", 0, allies, UNIT), EntityGroup("enemy", allies * UNIT, 3, UNIT)),
                             (allies + 3) * UNIT, presence=0)
        space = with_entity_layout(spaces.Box(-np.inf, np.inf, (state.size,), np.float32), state)
        config = VCriticConfig(encoder="entity", hidden_sizes=(16, 16))
        return VCritic(state.size, allies, config, state_space=space)

    small, large = critic(3), critic(5)
    assert load_for_other_map(large, small.state_dict()) == ["agent_ids"]
    assert torch.equal(large.agent_ids, torch.eye(5))
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(small.named_parameters(), large.named_parameters()))
    wider = {**small.state_dict(), "out.weight": torch.zeros(1, 17)}
    with pytest.raises(RuntimeError, match="size mismatch"):
        load_for_other_map(large, wider)


@pytest.mark.slow
class TestSMAX:
    """The layouts of jaxmarl's observations, read from jaxmarl's own env (needs the smax extra; compiles two maps)."""

    def test_layout_matches_jaxmarl(self, envs: dict[str, object]) -> None:
        """Ally i's other-unit blocks are jaxmarl's _observe_features of the other units in index order."""
        env = envs["5m_vs_6m"]
        obs, _, _ = env.reset()  # type: ignore[attr-defined]
        lay = env.entity_layouts[1]  # type: ignore[attr-defined]
        assert [(g.name, g.count, g.width) for g in lay.groups] == [("ally", 4, 13), ("enemy", 6, 13), ("own", 1, 10)]
        assert lay.size == obs[1].shape[1] == 140 and lay.target_offset == 5
        own = obs[1][:, 130:]
        assert np.allclose(own[:, 0], 1.0)  # full health at the start
        ally0 = obs[1][:, 0:13]  # ally 0 seen by ally 1: close at the start, full health, a marine
        assert np.allclose(ally0[:, 0], 1.0)
        state = env.state_space.entity_layout  # type: ignore[attr-defined]
        assert [(g.name, g.count, g.width) for g in state.groups] == [("ally", 5, 10), ("enemy", 6, 10)]

    def test_3m_network_on_5m_vs_6m(self, envs: dict[str, object]) -> None:
        """A team built on 3m's spaces, retargeted, acts on 5m_vs_6m's observations within its masks."""
        small, large = envs["3m"], envs["5m_vs_6m"]
        config = PolicyConfig(hidden_sizes=(16, 16), encoder="entity", share_parameters=True)
        net = OnPolicyActors(small.observation_spaces, small.action_spaces, config)  # type: ignore[attr-defined]
        assert retarget(net, large.entity_layouts[0]) == 1  # type: ignore[attr-defined]
        obs, _, avail = large.reset()  # type: ignore[attr-defined]
        for _ in range(3):
            actions, _ = net.act([torch.as_tensor(o) for o in obs], [torch.as_tensor(a) for a in avail], False)
            for a, m in zip(actions, avail):
                assert bool(m[np.arange(2), a[:, 0].long().numpy()].all())
            step = large.step([a[:, 0].numpy() for a in actions])  # type: ignore[attr-defined]
            obs, avail = step.obs, step.avail
