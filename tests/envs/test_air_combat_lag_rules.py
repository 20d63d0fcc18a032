"""LAG's rules for losing an aircraft, each pinned by LAG's own expression computed by hand.

- What a lost aircraft is paid (PKU-MARL/HARL harl/envs/lag/JSBSim): ``MultipleCombatTask.get_reward``
  pays 0 to an aircraft no longer alive, a missile's ``shotdown()`` happens inside the sim steps, and
  ``MultipleCombatEnv.step`` pays before it checks terminations (so a crash is set after the
  rewards); each side gets the mean of its aircraft's rewards.  1v1 (``BaseEnv.step``) checks
  terminations first and ``SingleCombatTask.get_reward`` pays the lost aircraft once more, -200 included.
- When an aircraft is lost (termination_conditions/): LowAltitude ``h <= 2500 m``; Overload
  ``sim time > 10 s and (|nx| > 10 or |ny| > 10 or |nz + 1| > 10)``; ExtremeState (its catalog's
  ``update_detect_extreme_state``) ``eci speed >= 1e10 ft/s or |(p, q, r)| >= 1000 rad/s or
  h >= 1e10 ft or max(|nx|, |ny|, |nz|) > 10``; no stall limit.
"""

from __future__ import annotations

import math
from importlib.util import find_spec

import numpy as np
import pytest

from harl.envs.air_combat import AirCombatConfig, make_air_combat_env
from harl.envs.air_combat.aircraft import FEET, FlightState, lost
from harl.envs.air_combat.combat import ao_ta_range
from harl.envs.air_combat.missile import Missile
from harl.envs.air_combat.rewards import altitude_penalty, orientation_v2, range_v3

needs_jsbsim = pytest.mark.skipif(find_spec("jsbsim") is None,
                                  reason='the air-combat env flies JSBSim (pip install "harl[lag]")')
CENTRED = np.array([20, 20, 20, 15])
DIVE = np.array([20, 40, 20, 29])
"""Full nose-down elevator (JSBSim's elevator command is nose-down positive), full throttle."""


def _state(nz: float = -1.0, nx: float = 0.0, ny: float = 0.0, t: float = 0.0, altitude: float = 6000.0,
           rates: tuple[float, float, float] = (0.0, 0.0, 0.0), inertial_fps: float = 1000.0,
           airspeed: float = 250.0) -> FlightState:
    return FlightState(
        position=np.array([0.0, 0.0, altitude]), velocity=np.array([airspeed, 0.0, 0.0]), roll=0.0, pitch=0.0,
        yaw=0.0, body_velocity=np.array([airspeed, 0.0, 0.0]), airspeed=airspeed, rates=np.array(rates),
        load=max(abs(nx), abs(ny), abs(nz)), accelerations=np.array([nx, ny, nz]), sim_time=t,
        inertial_speed=inertial_fps * FEET)


def _lost(state: FlightState, min_airspeed: float = 0.0) -> str | None:
    return lost(state, floor=2500.0, overload_g=10.0, min_airspeed=min_airspeed)


class TestEndsOfAnAircraft:
    def test_overload_counts_only_after_ten_seconds(self) -> None:
        """|nz + 1| = 11 > 10 with |nz| = 10 (not above ExtremeState's 10): ignored at t = 5 s, lost at 11 s."""
        assert _lost(_state(nz=10.0, t=5.0)) is None
        assert _lost(_state(nz=10.0, t=10.0)) is None  # LAG's test is sim time > 10
        assert _lost(_state(nz=10.0, t=11.0)) == "overload"
        assert _lost(_state(ny=-10.5, t=5.0)) == "extreme"  # |ny| > 10 is ExtremeState's too
        assert _lost(_state(nz=-10.0, t=11.0)) is None  # a 10 g pull: |nz + 1| = 9, |nz| = 10

    def test_extreme_acceleration_from_the_start(self) -> None:
        """ExtremeState's ``max(|nx|, |ny|, |nz|) > 10`` holds at any time: a 10.5 g pull at t = 5 s
        (|nz + 1| = 9.5, no overload) ends the aircraft."""
        assert _lost(_state(nz=-10.5, t=5.0)) == "extreme"
        assert _lost(_state(nz=-10.5, t=0.0)) == "extreme"
        assert _lost(_state(nx=10.01, t=0.0)) == "extreme"
        assert _lost(_state(nz=-9.99, t=5.0)) is None

    def test_extreme_state_trigger_values(self) -> None:
        """Body rates of norm 1000 rad/s, 1e10 ft/s of inertial speed, 1e10 ft of altitude: >=."""
        assert _lost(_state(rates=(600.0, 800.0, 0.0))) == "extreme"  # |(p, q, r)| = 1000
        assert _lost(_state(rates=(600.0, 799.0, 0.0))) is None
        assert _lost(_state(inertial_fps=1e10)) == "extreme"
        assert _lost(_state(inertial_fps=0.99e10)) is None
        assert _lost(_state(altitude=1e10 * FEET)) == "extreme"

    def test_low_altitude_is_at_or_below_the_limit(self) -> None:
        """LowAltitude: ``h <= altitude_limit`` (2500 m)."""
        assert _lost(_state(altitude=2500.0)) == "crash"
        assert _lost(_state(altitude=2500.1)) is None

    def test_no_stall_limit_unless_asked(self) -> None:
        """LAG has no stall limit: 50 m/s flies on; ``min_airspeed_mps = 60`` (harl's old limit) ends it."""
        assert AirCombatConfig().min_airspeed_mps == 0.0
        assert _lost(_state(airspeed=50.0)) is None
        assert _lost(_state(airspeed=50.0), min_airspeed=60.0) == "stall"
        assert _lost(_state(airspeed=61.0), min_airspeed=60.0) is None

    @needs_jsbsim
    def test_sim_time_is_jsbsims_clock(self) -> None:
        """The clock Overload reads starts at 0 after the start and trim, 0.2 s per env step (12 at 60 Hz):
        past 10 s only after the 50th step (JSBSim's 600 sums of 1/60 give 10.000000000000076)."""
        env = make_air_combat_env(AirCombatConfig())
        env.reset(seed=0)
        for _ in range(50):
            env.step([np.zeros(4)])
        time = env._aircraft.read().sim_time
        assert time == pytest.approx(10.0) and time > 10.0


def _posture_by_hand(env: object, k: int) -> float:
    """LAG's PostureReward before its potential: 15 x sum over the opponents of orientation v2 x range v3."""
    states = env._states  # type: ignore[attr-defined]
    enemies = range(2, 4) if k < 2 else range(2)
    total = 0.0
    for j in enemies:
        ao, ta, r, _ = ao_ta_range(states[k].position, states[k].velocity, states[j].position, states[j].velocity)
        total += orientation_v2(ao, ta) * range_v3(r / 1000.0)
    return 15.0 * total


def _flying_reward_by_hand(env: object, k: int, potential_before: float) -> float:
    """A flying 2v2 aircraft's step reward without missiles inbound: posture's change, altitude."""
    s = env._states[k]  # type: ignore[attr-defined]
    return _posture_by_hand(env, k) - potential_before + altitude_penalty(s.altitude, s.velocity[2])


@needs_jsbsim
class TestLostAircraftIn2v2:
    def _shoot_down_red_1(self, penalty: bool) -> tuple[object, np.ndarray, np.ndarray]:
        """2v2 self-play: a blue_0 missile 100 m behind red_1 hits it in the step's first sim step."""
        env = make_air_combat_env(AirCombatConfig(task="2v2_noweapon_selfplay", action_type="multidiscrete",
                                                  lost_aircraft_penalty=penalty))
        env.reset(seed=0)
        env.step([CENTRED] * 4)
        red_1 = env._states[1]
        behind = red_1.position - 100.0 * red_1.velocity / np.linalg.norm(red_1.velocity)
        env._missiles.append(Missile(2, 1, behind, red_1.velocity * 3.0, red_1.pitch, red_1.yaw, 1 / 60))
        before = env._potential.copy()
        step = env.step([CENTRED] * 4)
        assert env._alive.tolist() == [True, False, True, True] and not step.terminated
        return env, step.rewards, before

    def test_shot_down_is_paid_nothing_and_the_side_gets_the_mean(self) -> None:
        """LAG's 2v2: the shot-down red_1 is paid 0; red_0 its flying reward; the red side's reward (the
        mean LAG hands each red aircraft, and harl's EP critic's team reward) is (red_0's + 0) / 2;
        the shooter blue_0 gets +200 on its own reward (EventDrivenReward as a potential: once)."""
        env, rewards, before = self._shoot_down_red_1(penalty=False)
        red_0 = _flying_reward_by_hand(env, 0, before[0])
        assert rewards[1] == 0.0
        assert rewards[0] == pytest.approx(red_0, rel=1e-5, abs=1e-4)
        assert np.mean(rewards[:2]) == pytest.approx((red_0 + 0.0) / 2, rel=1e-5, abs=1e-4)
        assert rewards[2] == pytest.approx(_flying_reward_by_hand(env, 2, before[2]) + 200.0, rel=1e-5, abs=1e-4)
        assert rewards[3] == pytest.approx(_flying_reward_by_hand(env, 3, before[3]), rel=1e-5, abs=1e-4)

    def test_the_option_pays_harls_old_penalty(self) -> None:
        """``lost_aircraft_penalty = true``: the shot-down aircraft pays -200 on its step's reward."""
        env, rewards, before = self._shoot_down_red_1(penalty=True)
        assert rewards[1] == pytest.approx(_flying_reward_by_hand(env, 1, before[1]) - 200.0, rel=1e-5, abs=1e-4)

    @pytest.mark.parametrize("penalty", [False, True])
    def test_a_crash_is_paid_its_step_without_the_penalty(self, penalty: bool) -> None:
        """red_1 dives through the floor: LAG checks the crash after paying, so the crashing step pays its
        posture change and altitude penalty and no -200; then 0.  The option adds the -200."""
        env = make_air_combat_env(AirCombatConfig(task="2v2_noweapon_selfplay", action_type="multidiscrete",
                                                  floor_altitude_m=5900.0, safe_altitude_m=7000.0,
                                                  lost_aircraft_penalty=penalty))
        env.reset(seed=0)
        for _ in range(100):
            before = env._potential.copy()
            step = env.step([CENTRED, DIVE, CENTRED, CENTRED])
            if not env._alive[1]:
                break
        assert env._alive.tolist() == [True, False, True, True]
        assert env._states[1].altitude <= 5900.0
        expected = _flying_reward_by_hand(env, 1, before[1]) - (200.0 if penalty else 0.0)
        assert step.rewards[1] == pytest.approx(expected, rel=1e-5, abs=1e-4)
        assert step.rewards[0] == pytest.approx(_flying_reward_by_hand(env, 0, before[0]), rel=1e-5, abs=1e-4)
        assert env.step([CENTRED] * 4).rewards[1] == 0.0

    def test_1v1_keeps_the_penalty(self) -> None:
        """LAG's 1v1 (dones first, then SingleCombatTask's last payment): a crash pays -200 on top."""
        env = make_air_combat_env(AirCombatConfig(task="1v1_noweapon_selfplay", action_type="multidiscrete",
                                                  floor_altitude_m=5900.0, safe_altitude_m=7000.0))
        env.reset(seed=0)
        for _ in range(100):
            before = env._potential.copy()
            step = env.step([DIVE, CENTRED])
            if not env._alive[0]:
                break
        s, blue = env._states
        ao, ta, r, _ = ao_ta_range(s.position[:3], s.velocity, blue.position, blue.velocity)
        posture = env.spec.posture_scale * orientation_v2(ao, ta) * range_v3(r / 1000.0)
        expected = posture - before[0] + altitude_penalty(s.altitude, s.velocity[2]) - 200.0
        assert step.terminated and step.rewards[0] == pytest.approx(expected, rel=1e-5, abs=1e-4)
        assert math.isfinite(step.rewards[1])
