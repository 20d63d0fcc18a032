"""Agent names and groups (harl.envs.names) on envs and vector envs; mpe2's competitive scenarios."""

from __future__ import annotations

import numpy as np
import pytest

from harl.envs.mpe import MPEConfig, make_mpe_env
from harl.envs.names import agent_groups, agent_names, groups_by_prefix
from harl.envs.vector import make_vector_env
from tests.fakes.counting import CountingConfig

pytest.importorskip("mpe2")

TAG_NAMES = ["adversary_0", "adversary_1", "adversary_2", "agent_0"]
TAG_GROUPS = {"adversary": ["adversary_0", "adversary_1", "adversary_2"], "agent": ["agent_0"]}


@pytest.mark.parametrize("backend", ["inline", "subprocess"])
def test_simple_tag_names_and_groups_through_vector_envs(backend: str) -> None:
    """The env's names and sides reach the vector env (a subprocess one asks its workers)."""
    venv = make_vector_env(MPEConfig(scenario="simple_tag"), 2, backend=backend, workers=1)
    try:
        assert agent_names(venv) == TAG_NAMES
        assert agent_groups(venv) == TAG_GROUPS
    finally:
        venv.close()


@pytest.mark.parametrize("backend", ["inline", "subprocess"])
def test_defaults_where_an_env_declares_none(backend: str) -> None:
    venv = make_vector_env(CountingConfig(), 2, backend=backend, workers=1)
    try:
        assert agent_names(venv) == ["agent_0", "agent_1", "agent_2"]
        assert agent_groups(venv) == {}
    finally:
        venv.close()


def test_cooperative_mpe_is_one_side() -> None:
    env = make_mpe_env(MPEConfig(scenario="simple_speaker_listener"))
    assert env.agent_names == ["speaker_0", "listener_0"]
    assert env.agent_groups == {"agent": ["speaker_0", "listener_0"]}


def test_world_comm_leader_is_an_adversary() -> None:
    env = make_mpe_env(MPEConfig(scenario="simple_world_comm", num_good=1, num_adversaries=2))
    assert env.agent_groups == {"adversary": ["leadadversary_0", "adversary_0"], "agent": ["agent_0"]}


def test_pettingzoo_parallel_env_groups_by_prefix() -> None:
    """A PettingZoo parallel env: possible_agents, grouped by the part before the last ``_``."""
    pytest.importorskip("pettingzoo")
    from harl.envs.pettingzoo import PettingZooConfig

    config = PettingZooConfig(factory="mpe2.simple_tag_v3:parallel_env", kwargs={"num_obstacles": 1})
    for backend in ("inline", "subprocess"):
        venv = make_vector_env(config, 2, backend=backend, workers=1)
        try:
            assert agent_names(venv) == TAG_NAMES
            assert agent_groups(venv) == TAG_GROUPS
        finally:
            venv.close()


def test_groups_by_prefix() -> None:
    assert groups_by_prefix(["piston_0", "piston_1"]) == {"piston": ["piston_0", "piston_1"]}
    assert groups_by_prefix(["walker", "first_0", "red_team_1"]) == {
        "walker": ["walker"], "first": ["first_0"], "red_team": ["red_team_1"]}


class _Declares:
    n_agents = 2

    def __init__(self, names: list[str], groups: dict[str, list[str]]) -> None:
        self.agent_names, self.agent_groups = names, groups


def test_inconsistent_declarations_are_named() -> None:
    with pytest.raises(ValueError, match="1 names for 2 agents"):
        agent_names(_Declares(["a"], {}))
    with pytest.raises(ValueError, match="repeats"):
        agent_names(_Declares(["a", "a"], {}))
    with pytest.raises(ValueError, match=r"agent_groups\['x'\] names agents it does not have: \['c'\]"):
        agent_groups(_Declares(["a", "b"], {"x": ["c"]}))
    assert agent_groups(_Declares(["a", "b"], {"x": ["b", "a"]})) == {"x": ["a", "b"]}  # agent order


# --------------------------------------------------------------------------- simple_tag


def _tag_with_one_touch(team_reward: bool, continuous: bool = False):
    """simple_tag with adversary_0 touching the prey (0.05 apart; touching below 0.125), the
    other adversaries and the obstacles far away, all at rest."""
    env = make_mpe_env(MPEConfig(scenario="simple_tag", team_reward=team_reward, max_episode_steps=1,
                                 continuous_actions=continuous))
    env.reset(seed=0)
    world = env._world
    places = {"adversary_0": (0.05, 0.0), "adversary_1": (-0.8, -0.8), "adversary_2": (0.8, -0.8),
              "agent_0": (0.0, 0.0)}
    for agent in world.agents:
        agent.state.p_pos = np.array(places[agent.name], dtype=float)
        agent.state.p_vel = np.zeros(2)
    for landmark, where in zip(world.landmarks, [(-0.6, 0.6), (0.6, 0.6)]):
        landmark.state.p_pos = np.array(where, dtype=float)
    noop = [np.zeros(5, np.float32) if continuous else np.array([0]) for _ in range(4)]
    return env, env.step(noop)


def test_simple_tag_spaces() -> None:
    env = make_mpe_env(MPEConfig(scenario="simple_tag", continuous_actions=False))
    assert [s.shape for s in env.observation_spaces] == [(16,), (16,), (16,), (14,)]
    assert [int(s.n) for s in env.action_spaces] == [5, 5, 5, 5]
    assert env.state_space.shape == (62,)
    bigger = make_mpe_env(MPEConfig(scenario="simple_tag", num_good=2, num_adversaries=2, num_obstacles=1))
    assert bigger.agent_names == ["adversary_0", "adversary_1", "agent_0", "agent_1"]
    assert [s.shape for s in bigger.observation_spaces] == [(16,), (16,), (14,), (14,)]


@pytest.mark.parametrize("continuous", [False, True])
def test_simple_tag_collision_rewards_captures_and_side_returns(continuous: bool) -> None:
    """Own rewards: every adversary +10 for the one touching pair (mpe2 counts each pair for each
    adversary), the prey -10; the episode's info counts one capture and each side's return."""
    _, step = _tag_with_one_touch(team_reward=False, continuous=continuous)
    np.testing.assert_array_equal(step.rewards, [10.0, 10.0, 10.0, -10.0])
    assert step.truncated
    assert step.info == {"captures": 1.0, "return_adversary": 10.0, "return_agent": -10.0}


def test_simple_tag_team_reward_sums_within_each_side() -> None:
    _, step = _tag_with_one_touch(team_reward=True)
    np.testing.assert_array_equal(step.rewards, [30.0, 30.0, 30.0, -10.0])
    assert step.info["return_adversary"] == 10.0  # own rewards, mean over the side


def test_captures_count_pairs_over_the_episode() -> None:
    """Two adversaries on the prey for two steps: 2 pairs x 2 steps."""
    env = make_mpe_env(MPEConfig(scenario="simple_tag", team_reward=False, max_episode_steps=2, continuous_actions=False))
    env.reset(seed=0)
    places = {"adversary_0": (0.05, 0.0), "adversary_1": (-0.05, 0.0), "adversary_2": (0.8, -0.8),
              "agent_0": (0.0, 0.0)}
    for agent in env._world.agents:
        agent.state.p_pos = np.array(places[agent.name], dtype=float)
        agent.state.p_vel = np.zeros(2)
    for landmark, where in zip(env._world.landmarks, [(-0.6, 0.6), (0.6, 0.6)]):
        landmark.state.p_pos = np.array(where, dtype=float)
    noop = [np.array([0])] * 4
    first = env.step(noop)
    assert first.info == {}  # only the episode's last step reports
    np.testing.assert_array_equal(first.rewards, [20.0, 20.0, 20.0, -20.0])
    second = env.step(noop)
    touching = int(second.rewards[0] // 10)  # the contact force may have pushed them apart by now
    assert second.info["captures"] == 2.0 + touching


def test_episode_infos_reach_the_vector_env() -> None:
    venv = make_vector_env(MPEConfig(scenario="simple_tag", max_episode_steps=3, continuous_actions=False), 2)
    try:
        venv.reset()
        for _ in range(3):
            step = venv.step([np.zeros(2, np.int64)] * 4)
        assert len(step.episode_infos) == 2
        assert {"captures", "return_adversary", "return_agent", "return", "length"} <= set(step.episode_infos[0])
    finally:
        venv.close()


def test_cooperative_scenarios_report_no_side_metrics() -> None:
    """simple_spread's episodes keep today's info (nothing but return and length downstream)."""
    env = make_mpe_env(MPEConfig(max_episode_steps=1))
    env.reset(seed=0)
    assert env.step([np.full(5, 0.5, np.float32)] * 3).info == {}


@pytest.mark.parametrize("scenario", ["simple_adversary", "simple_push", "simple_world_comm"])
def test_other_competitive_scenarios_sum_each_side(scenario: str) -> None:
    own = make_mpe_env(MPEConfig(scenario=scenario, team_reward=False, continuous_actions=False))
    team = make_mpe_env(MPEConfig(scenario=scenario, continuous_actions=False))
    own.reset(seed=4)
    team.reset(seed=4)
    actions = [np.array([1])] * own.n_agents
    individual = own.step(actions).rewards
    summed = team.step(actions).rewards
    for members in own.agent_groups.values():
        idx = [own.agent_names.index(m) for m in members]
        np.testing.assert_allclose(summed[idx], individual[idx].sum(), rtol=1e-6)
    assert len(own.agent_groups) == 2


# --------------------------------------------------------------------------- other envs


@pytest.mark.parametrize("scenario", ["simple_spread", "simple_reference", "simple_speaker_listener"])
def test_torch_mpe_names_match_mpe2(scenario: str) -> None:
    pytest.importorskip("torch")
    from harl.envs.mpe_torch.config import MPETorchConfig
    from harl.envs.mpe_torch.vector import MPETorchVectorEnv

    venv = MPETorchVectorEnv(MPETorchConfig(scenario=scenario), 2)
    env = make_mpe_env(MPEConfig(scenario=scenario))
    assert agent_names(venv) == env.agent_names
    assert agent_groups(venv) == env.agent_groups == {"agent": env.agent_names}


def test_smax_names_are_jaxmarls_allies() -> None:
    pytest.importorskip("jaxmarl")
    from harl.envs.smax import SMAXConfig, SMAXVectorEnv

    venv = SMAXVectorEnv(SMAXConfig(scenario="3m"), 2)
    assert agent_names(venv) == ["ally_0", "ally_1", "ally_2"]
    assert agent_groups(venv) == {"ally": ["ally_0", "ally_1", "ally_2"]}


def test_air_combat_dogfight_learners_are_blue() -> None:
    pytest.importorskip("jsbsim", reason="the air-combat env flies JSBSim's F-16 (pip install harl[lag])")
    from harl.envs.air_combat.config import AirCombatConfig
    from harl.envs.air_combat.dogfight import DogfightEnv

    env = DogfightEnv(AirCombatConfig(task="2v2_noweapon"))
    assert agent_names(env) == ["blue_0", "blue_1"]
    assert agent_groups(env) == {"blue": ["blue_0", "blue_1"]}
