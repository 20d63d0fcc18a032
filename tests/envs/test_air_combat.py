"""Air combat on JSBSim: the heading task, the 2v2 dogfight, and the pure helpers they use."""

from __future__ import annotations

import math
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces

from harl.envs.air_combat import AirCombatConfig, make_air_combat_env
from harl.envs.air_combat.actions import to_controls
from harl.envs.air_combat.aircraft import FlightState
from harl.envs.air_combat.geometry import aspect, orientation_score, range_score
from harl.envs.air_combat.heading import tracking_score
from harl.envs.air_combat.scripted_pilot import pursue
from harl.errors import MissingExtraError
from harl.settings import InvalidSetting
from tests.train_briefly import train_briefly

PIPELINES = Path(__file__).parent.parent.parent / "pipelines"
needs_jsbsim = pytest.mark.skipif(find_spec("jsbsim") is None,
                                  reason='air combat tests need harl[lag] (pip install jsbsim)')


def _flight(north: float, east: float, heading_deg: float, speed: float = 250.0,
            altitude: float = 6000.0) -> FlightState:
    """A level aircraft at a position, flying along a heading."""
    yaw = math.radians(heading_deg)
    return FlightState(
        position=np.array([north, east, altitude]),
        velocity=np.array([math.cos(yaw), math.sin(yaw), 0.0]) * speed,
        roll=0.0, pitch=0.0, yaw=yaw, body_velocity=np.array([speed, 0.0, 0.0]),
        airspeed=speed, rates=np.zeros(3), load=1.0,
    )


class TestPureHelpers:
    def test_actions_map_to_stick_and_throttle(self) -> None:
        """A centred action is centred stick at mid throttle; both variants span the same ranges."""
        np.testing.assert_allclose(to_controls(np.zeros(4), "continuous"), [0, 0, 0, 0.65])
        np.testing.assert_allclose(to_controls(np.array([-3, 3, 0.5, 1]), "continuous"), [-1, 1, 0.5, 0.9])
        np.testing.assert_allclose(to_controls(np.array([0, 40, 20, 29]), "multidiscrete"),
                                   [-1, 1, 0, 0.9])
        np.testing.assert_allclose(to_controls(np.array([10, 30, 21, 0]), "multidiscrete"),
                                   [-0.5, 0.5, 0.05, 0.4])

    def test_posture_geometry(self) -> None:
        """On the tail scores 1, head-on 0, with the opponent on our tail -1; range counts beyond 3 km."""
        ego = _flight(0, 0, 0)
        ao, ta, distance = aspect(ego, _flight(2000, 0, 0))  # ahead, flying away
        assert (ao, ta, distance) == pytest.approx((0, 0, 2000))
        assert orientation_score(ao, ta) == pytest.approx(1.0)
        assert orientation_score(*aspect(ego, _flight(2000, 0, 180))[:2]) == pytest.approx(0.0)
        assert orientation_score(*aspect(ego, _flight(-2000, 0, 0))[:2]) == pytest.approx(-1.0)
        ao, _, _ = aspect(ego, _flight(1000, 1000, 0))  # 45 degrees off the nose
        assert ao == pytest.approx(math.pi / 4)
        assert range_score(2500, 3000, 5000) == 1.0
        assert range_score(8000, 3000, 5000) == pytest.approx(math.exp(-1))

    def test_scripted_pilot_turns_and_climbs_toward_its_target(self) -> None:
        """A target off the right wing and above: roll right, pull up (JSBSim: negative elevator)."""
        aileron, elevator, _, _ = pursue(_flight(0, 0, 0), _flight(0, 3000, 0, altitude=7000), 2500)
        assert aileron > 0.5 and elevator < 0
        aileron, _, _, _ = pursue(_flight(0, 0, 0), _flight(0, -3000, 0), 2500)
        assert aileron < -0.5

    def test_tracking_score(self) -> None:
        """1 exactly on target; each error at its scale costs a factor exp(-1/4)."""
        assert tracking_score((0, 0, 0, 0)) == 1.0
        assert tracking_score((math.radians(10), 0, 0, 0)) == pytest.approx(math.exp(-0.25))
        assert tracking_score((0, 100, 20, 0)) == pytest.approx(math.exp(-0.5))


class TestConfig:
    def test_unknown_task_is_refused(self) -> None:
        with pytest.raises(InvalidSetting, match="task: unknown air-combat task '3v3'; harl's names: heading, "):
            AirCombatConfig(task="3v3")

    def test_safe_altitude_must_be_above_the_floor(self) -> None:
        with pytest.raises(InvalidSetting, match="safe_altitude_m: expected a value above floor_altitude_m"):
            AirCombatConfig(floor_altitude_m=5000.0, safe_altitude_m=4000.0)

    def test_missing_jsbsim_names_the_extra(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without jsbsim, building an env says which extra to install."""
        monkeypatch.setitem(sys.modules, "jsbsim", None)
        with pytest.raises(MissingExtraError, match=r'pip install "harl\[lag\]"'):
            make_air_combat_env(AirCombatConfig())


@needs_jsbsim
class TestHeading:
    def test_spaces_state_and_seeded_reset(self) -> None:
        """One agent, 16 O(1) features; the same seed starts the same episode."""
        env = make_air_combat_env(AirCombatConfig())
        assert env.n_agents == 1
        assert env.observation_spaces[0].shape == env.state_space.shape == (16,)
        assert env.action_spaces[0] == spaces.Box(-1.0, 1.0, (4,), np.float32)
        obs, state, avail = env.reset(seed=3)
        assert avail is None and obs[0].dtype == np.float32
        np.testing.assert_array_equal(obs[0], state)
        assert np.all(np.abs(obs[0]) < 3.0)
        assert obs[0][3] == 1.0  # all of the first target's time left
        again, _, _ = env.reset(seed=3)
        np.testing.assert_array_equal(obs[0], again[0])
        step = env.step([np.zeros(4, np.float32)])
        assert 0.0 <= step.rewards[0] <= 1.0 and step.rewards.dtype == np.float32
        assert not step.terminated and not step.truncated and step.info == {}

    def test_multidiscrete_variant(self) -> None:
        env = make_air_combat_env(AirCombatConfig(action_type="multidiscrete"))
        assert env.action_spaces[0] == spaces.MultiDiscrete([41, 41, 41, 30])
        env.reset(seed=0)
        assert not env.step([np.array([20, 20, 20, 15])]).terminated

    def test_truncated_at_max_episode_steps(self) -> None:
        """A trimmed aircraft on a centred stick flies on until the time limit: truncated only."""
        env = make_air_combat_env(AirCombatConfig(max_episode_steps=5))
        env.reset(seed=1)
        ends = [env.step([np.zeros(4)]) for _ in range(5)]
        assert not any(s.terminated or s.truncated for s in ends[:4])
        assert ends[-1].truncated and not ends[-1].terminated
        assert set(ends[-1].info) == {"heading_error_deg", "targets_reached", "crashed", "missed_target"}
        assert ends[-1].info["crashed"] == 0.0

    def test_crash_terminates_with_the_penalty(self) -> None:
        """Full nose-down from 6 km with the floor at 5.9 km: terminated, reward -crash_penalty."""
        env = make_air_combat_env(AirCombatConfig(floor_altitude_m=5900.0, safe_altitude_m=6500.0))
        env.reset(seed=1)
        for _ in range(100):
            step = env.step([np.array([0.0, 1.0, 0.0, 1.0])])
            if step.terminated or step.truncated:
                break
        assert step.terminated and not step.truncated
        assert step.rewards[0] == -200.0 and step.info["crashed"] == 1.0

    def test_missing_a_target_terminates(self) -> None:
        """A target 10+ degrees away at the end of its time ends the episode, without a crash."""
        env = make_air_combat_env(AirCombatConfig(target_interval_s=0.2, max_heading_change_deg=180.0))
        obs, _, _ = env.reset(seed=0)
        assert abs(obs[0][1]) * 180 > 10  # this seed's first target is far off the nose
        step = env.step([np.zeros(4)])
        assert step.terminated and not step.truncated
        assert step.info["missed_target"] == 1.0 and step.info["crashed"] == 0.0


@needs_jsbsim
class TestDogfight:
    def test_spaces_and_state(self) -> None:
        """Two learners of 42 features, a 52-number state of all four aircraft."""
        env = make_air_combat_env(AirCombatConfig(task="2v2_noweapon", action_type="multidiscrete"))
        assert env.n_agents == 2
        assert [s.shape for s in env.observation_spaces] == [(42,), (42,)]
        assert env.state_space.shape == (52,)
        assert env.action_spaces == [spaces.MultiDiscrete([41, 41, 41, 30])] * 2
        obs, state, avail = env.reset(seed=2)
        assert avail is None and state.dtype == np.float32
        assert all(np.all(np.abs(o) < 3.0) for o in obs) and np.all(np.abs(state) < 3.0)
        # Each learner sees its partner about 560 m abeam and the opponents ~5.6 km ahead.
        partner, first_opponent = obs[0][12:22], obs[0][22:32]
        assert abs(partner[1]) * 1e4 == pytest.approx(560, abs=1000)
        assert first_opponent[0] * 1e4 == pytest.approx(5560, abs=1500)
        assert partner[-1] == first_opponent[-1] == 1.0  # both flying
        step = env.step([np.array([20, 20, 20, 15])] * 2)
        assert step.rewards.shape == (2,) and step.active.tolist() == [True, True]

    def test_truncated_with_episode_metrics(self) -> None:
        env = make_air_combat_env(AirCombatConfig(task="2v2_noweapon", max_episode_steps=3))
        env.reset(seed=0)
        steps = [env.step([np.zeros(4)] * 2) for _ in range(3)]
        assert [s.truncated for s in steps] == [False, False, True]
        assert not any(s.terminated for s in steps)
        assert set(steps[-1].info) == {"posture", "advantage", "threatened", "learners_lost",
                                       "opponents_lost"}
        assert steps[-1].info["learners_lost"] == 0.0
        # At 6 km there is no altitude cost, so a learner's reward is its posture, in [-1, 1].
        assert -1.0 <= steps[-1].rewards.min() and steps[-1].rewards.max() <= 1.0

    def test_learners_crashing_terminates_and_deactivates_them(self) -> None:
        """Both learners diving through the floor: each pays the penalty once, then inactive."""
        env = make_air_combat_env(AirCombatConfig(task="2v2_noweapon", floor_altitude_m=5600.0,
                                                  safe_altitude_m=7000.0))
        env.reset(seed=0)
        dive = np.array([0.0, 1.0, 0.0, 1.0])
        paid = np.zeros(2)
        for _ in range(100):
            step = env.step([dive, dive])
            paid += step.rewards <= -200.0
            if step.terminated or step.truncated:
                break
        assert step.terminated and not step.truncated
        assert step.active.tolist() == [False, False] and paid.tolist() == [1.0, 1.0]
        assert step.info["learners_lost"] == 2.0


@needs_jsbsim
@pytest.mark.parametrize("name", ["happo_air_combat_heading", "happo_air_combat_2v2"])
def test_pipeline_trains_two_iterations(name: str, tmp_path: Path) -> None:
    """A shipped pipeline with short episodes crosses episode ends and logs the env's metrics."""
    overrides = ["logging.progress=false", "env.max_episode_steps=15", "collector.rollout_length=20",
                 "collector.n_envs=2", "evaluator.episodes=2", "evaluator.n_envs=2"]
    result, rows = train_briefly(PIPELINES / f"{name}.toml", overrides, tmp_path / "run")
    assert result.counters.env_steps == 2 * 2 * 20
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    assert rows[-1]["train_return"] and rows[-1]["eval_return"]
    metric = "eval_heading_error_deg" if "heading" in name else "eval_posture"
    assert rows[-1][metric] != ""
