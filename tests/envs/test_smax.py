"""SMAXVectorEnv: jaxmarl's SMAX battles as one jitted VectorEnv, pinned to jaxmarl's own API.

Every test here uses one config and 8 envs, so JAX compiles the batched reset and step once
for the whole file (tracing SMAX's step takes seconds); the training test reuses them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from harl.envs.smax import SCENARIOS, SMAXConfig, SMAXVectorEnv, make_smax
from harl.envs.vector import make_vector_env
from harl.errors import ConfigError, MissingExtraError
from tests.train_briefly import train_briefly

jaxmarl = pytest.importorskip("jaxmarl", reason="SMAX tests need harl[smax] (jax and jaxmarl)")
jax = pytest.importorskip("jax")

CONFIG = SMAXConfig(scenario="3m", max_episode_steps=20)
"""Random play ends about half the 3m battles within 20 steps: both kinds of episode end occur."""
N_ENVS = 8
STOP = 4
"""jaxmarl's ``stop`` action: always available, the only one left to a dead unit."""


def _random_actions(avail: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
    """A uniformly random available action per agent and env."""
    return [np.argmax(np.where(a > 0, rng.gumbel(size=a.shape), -np.inf), axis=1) for a in avail]


def _stacked(values: dict, agents: list[str]) -> np.ndarray:
    return np.stack([np.asarray(values[a]) for a in agents])


class Reference:
    """jaxmarl's ``HeuristicEnemySMAX`` stepped one env at a time, drawing the adapter's keys:
    ``split(key) -> (key, sub)``, ``split(sub, n_envs)`` per vector step (and reset), then
    ``split(env_key) -> (step_key, reset_key)`` per env step."""

    def __init__(self, config: SMAXConfig, n_envs: int, seed: int) -> None:
        self.env = make_smax(config)
        self.n_envs = n_envs
        self.key = jax.random.PRNGKey(seed)
        self.states: list = []
        self.reset = self.env.reset  # jaxmarl jits these itself
        self.step_env = self.env.step_env
        self.avail = self.env.get_avail_actions

    def _keys(self) -> list:
        self.key, sub = jax.random.split(self.key)
        return list(jax.random.split(sub, self.n_envs))

    def observe(self, obs: dict, state) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        agents = self.env.agents
        return _stacked(obs, agents), np.asarray(obs["world_state"]), _stacked(self.avail(state), agents)

    def reset_all(self) -> list[tuple]:
        out = []
        self.states = []
        for key in self._keys():
            obs, state = self.reset(key)
            self.states.append(state)
            out.append(self.observe(obs, state))
        return out

    def step_all(self, actions: list[np.ndarray]) -> list[dict]:
        out = []
        for k, key in enumerate(self._keys()):
            step_key, reset_key = jax.random.split(key)
            acts = {a: int(actions[i][k]) for i, a in enumerate(self.env.agents)}
            obs, state, rewards, dones, _ = self.step_env(step_key, self.states[k], acts)
            record = {"final": self.observe(obs, state), "done": bool(dones["__all__"]),
                      "rewards": _stacked(rewards, self.env.agents),
                      "alive": np.asarray(getattr(state, "state", state).unit_alive)}  # base SMAX: unwrapped
            if record["done"]:
                obs, state = self.reset(reset_key)
            self.states[k] = state
            record["next"] = self.observe(obs, state)
            out.append(record)
        return out


@pytest.fixture(scope="module")
def venv() -> SMAXVectorEnv:
    env = make_vector_env(CONFIG, n_envs=N_ENVS, backend="subprocess", workers=2, seed=5)
    assert isinstance(env, SMAXVectorEnv)  # natively vectorised, whatever the backend asks
    return env


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_spaces_match_jaxmarl(scenario: str) -> None:
    """Per-agent spaces are jaxmarl's allies' spaces; the state is jaxmarl's world state."""
    config = SMAXConfig(scenario=scenario)
    venv = SMAXVectorEnv(config, n_envs=2)
    env = make_smax(config)
    assert venv.n_agents == env.num_allies == len(env.agents)
    for agent, obs_space, action_space in zip(env.agents, venv.observation_spaces, venv.action_spaces):
        assert obs_space.shape == env.observation_space(agent).shape and obs_space.dtype == np.float32
        assert action_space.n == env.action_space(agent).n == env.num_ally_actions
    assert venv.state_space.shape == (env.state_size,)


def test_reset_matches_jaxmarl(venv: SMAXVectorEnv) -> None:
    """A seeded reset gives jaxmarl's observations, world states and masks for the same keys."""
    obs, state, avail = venv.reset(seed=11)
    reference = Reference(CONFIG, N_ENVS, seed=11).reset_all()
    for k, (ref_obs, ref_state, ref_avail) in enumerate(reference):
        for i in range(venv.n_agents):
            np.testing.assert_allclose(obs[i][k], ref_obs[i], atol=1e-6)
            np.testing.assert_array_equal(avail[i][k], ref_avail[i])
        np.testing.assert_allclose(state[k], ref_state, atol=1e-5)
    assert obs[0].dtype == state.dtype == avail[0].dtype == np.float32
    assert state.shape == (N_ENVS, venv.state_space.shape[0])


def test_steps_match_jaxmarl_across_episode_ends(venv: SMAXVectorEnv) -> None:
    """30 vector steps of random valid actions equal jaxmarl's, through wins, losses and time limits.

    A battle that ends with one side wiped out is terminated; one cut at ``max_episode_steps`` with
    both sides standing is truncated; each reports its return, length and ``win``.
    """
    rng = np.random.default_rng(0)
    obs, state, avail = venv.reset(seed=3)
    reference = Reference(CONFIG, N_ENVS, seed=3)
    reference.reset_all()
    lengths = np.zeros(N_ENVS, dtype=int)
    returns = np.zeros(N_ENVS)
    kinds: set[str] = set()
    n_allies = venv.n_agents
    for _ in range(30):
        actions = _random_actions(avail, rng)
        for i in range(n_allies):
            assert (avail[i][np.arange(N_ENVS), actions[i]] == 1).all()
        step = venv.step(actions)
        expected = reference.step_all(actions)
        lengths += 1
        infos = iter(step.episode_infos)
        for k, ref in enumerate(expected):
            final_obs, final_state, final_avail = ref["final"]
            next_obs, next_state, next_avail = ref["next"]
            for i in range(n_allies):
                np.testing.assert_allclose(step.final_obs[i][k], final_obs[i], atol=1e-6)
                np.testing.assert_array_equal(step.final_avail[i][k], final_avail[i])
                np.testing.assert_allclose(step.obs[i][k], next_obs[i], atol=1e-6)
                np.testing.assert_array_equal(step.avail[i][k], next_avail[i])
            np.testing.assert_allclose(step.final_state[k], final_state, atol=1e-5)
            np.testing.assert_allclose(step.state[k], next_state, atol=1e-5)
            np.testing.assert_allclose(step.rewards[k], ref["rewards"], atol=1e-6)
            alive = ref["alive"]
            np.testing.assert_array_equal(step.active[k], alive[:n_allies])
            for i in np.flatnonzero(~alive[:n_allies]):  # a dead ally may only stop
                assert final_avail[i].tolist() == [float(j == STOP) for j in range(len(final_avail[i]))]
            returns[k] += ref["rewards"].mean()
            wiped_out = not alive[:n_allies].any() or not alive[n_allies:].any()
            assert step.terminated[k] == (ref["done"] and wiped_out)
            assert step.truncated[k] == (ref["done"] and not wiped_out)
            if ref["done"]:
                assert wiped_out or lengths[k] == CONFIG.max_episode_steps
                kinds.add("terminated" if wiped_out else "truncated")
                info = next(infos)
                assert info["length"] == lengths[k]
                assert info["return"] == pytest.approx(returns[k], rel=1e-5)
                assert info["win"] == float(alive[:n_allies].any() and not alive[n_allies:].any())
                assert "winner" not in info  # the heuristic's episodes as before enemy = "agents"
                lengths[k], returns[k] = 0, 0.0
            else:
                np.testing.assert_array_equal(step.final_state[k], step.state[k])
        assert next(infos, None) is None
        avail = step.avail
    assert kinds == {"terminated", "truncated"}


def test_restart_begins_the_saved_episodes_again(venv: SMAXVectorEnv) -> None:
    """``restart(episode_starts())`` rebuilds each env's starting state and the same key stream."""
    rng = np.random.default_rng(1)
    _, _, avail = venv.reset(seed=2)
    for _ in range(25):  # past some episode ends, so the starts differ from the seeded reset's
        avail = venv.step(_random_actions(avail, rng)).avail
    starts = venv.episode_starts()
    assert sum(s["steps"] for s in starts) > 0
    first_obs, first_state, first_avail = venv.restart(starts)
    actions = _random_actions(first_avail, rng)
    first = venv.step(actions)
    obs, state, _ = venv.restart(starts)
    again = venv.step(actions)
    np.testing.assert_array_equal(obs[0], first_obs[0])
    np.testing.assert_array_equal(state, first_state)
    np.testing.assert_array_equal(again.state, first.state)
    np.testing.assert_array_equal(again.rewards, first.rewards)


def test_rng_state_continues_the_stream(venv: SMAXVectorEnv) -> None:
    """An unseeded reset after ``set_rng_state`` repeats the one after ``get_rng_state``."""
    venv.reset(seed=4)
    saved = venv.get_rng_state()
    assert saved[1:] == [None] * (N_ENVS - 1)
    _, state, _ = venv.reset()
    venv.set_rng_state(saved)
    _, again, _ = venv.reset()
    np.testing.assert_array_equal(again, state)


def test_unknown_map_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match='env.scenario: SMAX has no map "3mm" \\(jaxmarl has: 3m, 2s3z, '):
        SMAXVectorEnv(SMAXConfig(scenario="3mm"), n_envs=2)


def test_missing_jaxmarl_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without jaxmarl the env kind asks for the ``smax`` extra."""
    monkeypatch.setitem(sys.modules, "jaxmarl.environments", None)
    with pytest.raises(MissingExtraError) as error:
        SMAXVectorEnv(SMAXConfig(), n_envs=2)
    assert str(error.value) == (
        'env kind "smax" needs: pip install "harl[smax]" (the optional package "jaxmarl" is not '
        "installed), then: pip install --no-deps jaxmarl==0.2.0 (its dependency gymnax would pin "
        "gymnasium < 1.4; SMAX needs only what the extra installs)")


def test_two_training_iterations_log_the_win_rate(tmp_path: Path) -> None:
    """HAPPO on 3m trains two iterations and evaluates: metrics.csv has an ``eval_win`` in [0, 1]."""
    pipeline = Path(__file__).parents[2] / "pipelines" / "happo_smax_3m.toml"
    overrides = ["logging.progress=false", f"env.max_episode_steps={CONFIG.max_episode_steps}",
                 f"collector.n_envs={N_ENVS}", "collector.rollout_length=25",
                 "evaluator.episodes=8", f"evaluator.n_envs={N_ENVS}"]
    result, rows = train_briefly(pipeline, overrides, tmp_path / "run")
    assert result.counters.env_steps == 2 * 25 * N_ENVS
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    assert 0.0 <= float(rows[-1]["eval_win"]) <= 1.0
    assert float(rows[0]["episodes"]) > 0


@pytest.mark.parametrize("scenario", ["3m", "2s3z"])
def test_state_norm_scales_positions_cooldowns_and_type_ids_into_0_1(scenario: str) -> None:
    """Each unit's x, y by the 32 x 32 map, its cooldown by the longest (2s3z's types: 1.87 s), the
    trailing type ids by the largest (5); health fractions, one-hots and teams are kept."""
    raw = SMAXVectorEnv(SMAXConfig(scenario=scenario, max_episode_steps=20), 4, seed=3)
    scaled = SMAXVectorEnv(SMAXConfig(scenario=scenario, max_episode_steps=20, state_norm=True), 4, seed=3)
    _, state, _ = raw.reset()
    _, normal, _ = scaled.reset()
    units = state.shape[1] // 12
    per_unit = [1.0, 1 / 32, 1 / 32, 1 / 1.87] + [1.0] * 6
    expected = np.concatenate([np.tile(per_unit, units), np.ones(units), np.full(units, 1 / 5)])
    np.testing.assert_allclose(normal, state * expected, rtol=1e-5)
    assert state.max() > 10 and 0.0 <= normal.min() and normal.max() <= 1.0


# ---------------------------------------------------------------------- enemy = "agents"

VERSUS = SMAXConfig(scenario="3m", max_episode_steps=20, enemy="agents")
"""Both armies as agents, each enemy's view mirrored (the default): what self-play on 3m uses."""
RAW_VERSUS = SMAXConfig(scenario="3m", max_episode_steps=20, enemy="agents", mirror_enemy=False)
"""Both armies as agents, as jaxmarl's base SMAX gives them."""
ALLIES = ["ally_0", "ally_1", "ally_2"]
ENEMIES = ["enemy_0", "enemy_1", "enemy_2"]


def test_both_armies_are_agents_with_one_space_a_side() -> None:
    """3m with enemy = "agents": six agents in jaxmarl's names and groups, each side's spaces alike,
    the world state as with the heuristic enemy; the default keeps the allies alone."""
    venv = SMAXVectorEnv(VERSUS, n_envs=2)
    assert venv.agent_names == ALLIES + ENEMIES and venv.n_agents == 6
    assert venv.agent_groups == {"ally": ALLIES, "enemy": ENEMIES}
    assert venv.observation_spaces[:3] == venv.observation_spaces[3:]
    assert venv.action_spaces[:3] == venv.action_spaces[3:]
    assert {space.n for space in venv.action_spaces} == {8}  # 5 moves, 3 targets
    default = SMAXVectorEnv(SMAXConfig(scenario="3m"), n_envs=2)
    assert default.agent_names == ALLIES and default.agent_groups == {"ally": ALLIES}
    assert default.observation_spaces == venv.observation_spaces[:3]
    assert default.state_space == venv.state_space


def test_uneven_map_gives_each_side_its_own_actions() -> None:
    """5m_vs_6m: an ally has 5 moves + 6 targets, an enemy 5 + 5, masks cut to each agent's own."""
    venv = SMAXVectorEnv(SMAXConfig(scenario="5m_vs_6m", enemy="agents"), n_envs=2)
    assert [space.n for space in venv.action_spaces] == [11] * 5 + [10] * 6
    _, _, avail = venv.reset(seed=0)
    assert [a.shape for a in avail] == [(2, 11)] * 5 + [(2, 10)] * 6


def test_versus_steps_match_jaxmarls_base_smax() -> None:
    """30 vector steps of random valid actions for all six units equal jaxmarl's ``SMAX`` stepped
    one env at a time: observations, masks, each agent's own side's reward, terminations; each
    ended episode reports each side's return and the ``winner``."""
    venv = SMAXVectorEnv(RAW_VERSUS, n_envs=N_ENVS, seed=5)
    rng = np.random.default_rng(0)
    _, _, avail = venv.reset(seed=3)
    reference = Reference(RAW_VERSUS, N_ENVS, seed=3)
    assert type(reference.env).__name__ == "SMAX"
    reference.reset_all()
    returns = np.zeros((N_ENVS, 2))
    winners: set[str] = set()
    for _ in range(30):
        actions = _random_actions(avail, rng)
        step = venv.step(actions)
        expected = reference.step_all(actions)
        infos = iter(step.episode_infos)
        for k, ref in enumerate(expected):
            final_obs, _, final_avail = ref["final"]
            next_obs, next_state, next_avail = ref["next"]
            for i in range(6):
                np.testing.assert_allclose(step.final_obs[i][k], final_obs[i], atol=1e-6)
                np.testing.assert_array_equal(step.final_avail[i][k], final_avail[i])
                np.testing.assert_allclose(step.obs[i][k], next_obs[i], atol=1e-6)
                np.testing.assert_array_equal(step.avail[i][k], next_avail[i])
            np.testing.assert_allclose(step.state[k], next_state, atol=1e-5)
            rewards = ref["rewards"]
            np.testing.assert_allclose(step.rewards[k], rewards, atol=1e-6)
            assert len(set(rewards[:3].tolist())) == len(set(rewards[3:].tolist())) == 1  # one per side
            alive = ref["alive"]
            np.testing.assert_array_equal(step.active[k], alive)
            returns[k] += rewards[0], rewards[3]
            if ref["done"]:
                info = next(infos)
                allies, enemies = alive[:3].any(), alive[3:].any()
                winner = "ally" if allies and not enemies else "enemy" if enemies and not allies else ""
                assert info["winner"] == winner
                assert info["win"] == float(winner == "ally")
                assert info["return"] == info["return_ally"] == pytest.approx(returns[k, 0], rel=1e-5)
                assert info["return_enemy"] == pytest.approx(returns[k, 1], rel=1e-5)
                winners.add(winner)
                returns[k] = 0.0
        assert next(infos, None) is None
        avail = step.avail
    assert winners == {""}  # random play against random play times out; won battles: the tests below


def _mirrored_battle(env, seed: int):
    """jaxmarl's 3m start with the enemies put where the allies' mirror images stand: enemy ``k``
    at ally ``2 - k``'s place reflected across the map's middle (x -> 32 - x)."""
    _, state = env.reset(jax.random.PRNGKey(seed))
    allies = np.asarray(state.unit_positions)[:3]
    enemies = np.stack([[env.map_width - x, y] for x, y in allies[::-1]])
    return state.replace(unit_positions=jax.numpy.asarray(np.concatenate([allies, enemies])))


def test_mirror_makes_a_mirrored_battle_look_the_same_from_both_sides() -> None:
    """In a left-right symmetric battle enemy ``k``'s mirrored observation and mask are ally
    ``2 - k``'s, and stay so after moves in every direction (an enemy's moves mirrored back)."""
    from harl.envs.smax import Mirror

    env = make_smax(RAW_VERSUS)
    mirror = Mirror.of(env, env.num_enemy_actions)
    state = _mirrored_battle(env, seed=0)

    def assert_symmetric(state) -> dict:
        obs, avail = env.get_obs(state), env.get_avail_actions(state)
        for k in range(3):
            ally, enemy = f"ally_{2 - k}", f"enemy_{k}"
            np.testing.assert_allclose(mirror.obs(np.asarray(obs[enemy])), np.asarray(obs[ally]), atol=1e-5)
            np.testing.assert_array_equal(mirror.masks(np.asarray(avail[enemy])), np.asarray(avail[ally]))
        return obs

    start = assert_symmetric(state)
    key = jax.random.PRNGKey(1)
    for move in [0, 1, 1, 2, 3, 4, 1, 1, 1]:  # north, east, east, south, west, stop, east x 3
        actions = {a: move for a in ALLIES} | {a: int(mirror.actions(move)) for a in ENEMIES}
        key, sub = jax.random.split(key)
        _, state, _, _, _ = env.step_env(sub, state, actions)
        obs = assert_symmetric(state)
    assert np.asarray(state.unit_alive).all()
    assert np.asarray(obs["ally_0"])[-9] > np.asarray(start["ally_0"])[-9] + 0.15  # own x: east, to the middle
    assert np.abs(np.asarray(obs["ally_0"])[:-10]).sum() > 0  # close enough to see the other side
    assert mirror.actions(np.arange(8)).tolist() == [0, 3, 2, 1, 4, 5, 6, 7]


def test_versus_reset_gives_the_enemies_a_mirrored_view() -> None:
    """mirror_enemy (the default): the allies see jaxmarl's observations, the enemies their mirror."""
    from harl.envs.smax import Mirror

    venv = SMAXVectorEnv(VERSUS, n_envs=N_ENVS)
    obs, state, avail = venv.reset(seed=11)
    reference = Reference(VERSUS, N_ENVS, seed=11)
    mirror = Mirror.of(reference.env, 8)
    for k, (ref_obs, ref_state, ref_avail) in enumerate(reference.reset_all()):
        for i in range(6):
            seen = ref_obs[i] if i < 3 else mirror.obs(ref_obs[i])
            np.testing.assert_allclose(obs[i][k], seen, atol=1e-6)
            np.testing.assert_array_equal(avail[i][k], ref_avail[i] if i < 3 else mirror.masks(ref_avail[i]))
        np.testing.assert_allclose(state[k], ref_state, atol=1e-5)
    # own x (the 9th feature from the end): jaxmarl's enemies start on the right, mirrored on the left
    assert (ref_obs[3][-9] > 0.5) and (obs[3][:, -9] < 0.5).all() and (obs[0][:, -9] < 0.5).all()


def _attack_or_advance(avail: np.ndarray) -> np.ndarray:
    """Shoot the first enemy in range, else move east (the enemy's side, in one's own view)."""
    can_shoot = avail[:, 5:] > 0
    return np.where(can_shoot.any(axis=1), 5 + np.argmax(can_shoot, axis=1), 1)


@pytest.mark.parametrize("attacker", ["ally", "enemy"])
def test_a_side_that_attacks_a_standing_side_wins(attacker: str) -> None:
    """One side advances and shoots while the other only stops: every battle ends with the
    attacker's ``winner`` (and ``win`` for an ally), the winner's return 2 (all the enemy's health
    and the won battle's 1), the loser's 0.  The enemies advance east in their mirrored view."""
    venv = SMAXVectorEnv(VERSUS, n_envs=N_ENVS)
    _, _, avail = venv.reset(seed=7)
    infos: list[dict] = []
    for _ in range(VERSUS.max_episode_steps):
        actions = [_attack_or_advance(a) if name.startswith(attacker) else np.full(N_ENVS, STOP)
                   for name, a in zip(venv.agent_names, avail)]
        step = venv.step(actions)
        infos += step.episode_infos
        avail = step.avail
        if len(infos) >= N_ENVS:
            break
    assert len(infos) >= N_ENVS
    for info in infos[:N_ENVS]:
        assert info["winner"] == attacker and info["win"] == float(attacker == "ally")
        assert info[f"return_{attacker}"] == pytest.approx(2.0, abs=1e-4)
        assert info[f"return_{'enemy' if attacker == 'ally' else 'ally'}"] == 0.0
        assert info["length"] < VERSUS.max_episode_steps
