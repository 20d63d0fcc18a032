"""Two learning F-16s against two scripted ones, no weapons: win the posture fight.

The learners (agents 0 and 1) start side by side at 6 km altitude heading north; the
opponents start about 5.6 km north of them heading south (each start jittered by up to
500 m, 300 m of altitude and 15 degrees of heading).  The opponents are flown by
``scripted_pilot`` (pursuing the nearest learner, or cruising straight).

Reward of a flying learner, per step:

- posture: the best ``orientation_score * range_score`` over the flying opponents, in
  [-1, 1]: positive when pointing at an opponent's tail within ``sound_range_m``,
  negative with an opponent on its own tail;
- altitude safety: from 0 at ``safe_altitude_m`` down to -1 at the floor;
- events: ``-crash_penalty`` the step it is lost (``aircraft.lost``: LAG's LowAltitude,
  ExtremeState and Overload, and a stall where ``min_airspeed_mps`` is set).

A lost aircraft stops flying (its agent inactive, reward 0).  The episode terminates when
either side has no aircraft left and is truncated after ``max_episode_steps``.  The team's
reward is the mean of the two (harl's EP critic averages them).

Observation of a learner (42 numbers): its own body-frame features, then its partner and
the two opponents seen from it (``geometry.relative_features``).  State (52 numbers): all
four aircraft's position, velocity, attitude, airspeed and whether they fly.  Episode
metrics: mean posture, the share of a learner's flying steps in a firing position on an
opponent (``advantage``: nose within 30 degrees, on the target's rear hemisphere, within
the sound range) or with an opponent in that position on it (``threatened``), and the
aircraft each side lost.

The learners are the ``blue`` side (``agent_names`` ``blue_0``, ``blue_1``; ``agent_groups``
``{"blue": [...]}``); the scripted opponents are red and are not agents.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from harl.envs.air_combat.actions import action_space, to_controls
from harl.envs.air_combat.aircraft import OWN_FEATURES, Aircraft, FlightState, lost, own_features
from harl.envs.air_combat.config import AirCombatConfig
from harl.envs.air_combat.geometry import (
    RELATIVE_FEATURES,
    aspect,
    orientation_score,
    range_score,
    relative_features,
)
from harl.envs.air_combat.scripted_pilot import cruise, pursue
from harl.envs.air_combat.seeded import SeededEnv
from harl.envs.air_combat.tacview import TrackObject, aircraft_object, aircraft_uid
from harl.envs.protocol import EnvStep

SIM_RATE_HZ = 60.0
START_ALTITUDE, START_SPEED, START_SEPARATION = 6000.0, 250.0, 5560.0
WINGMAN_SPACING = 560.0
JITTER = (500.0, 300.0, math.radians(15.0))
"""Start jitter: horizontal position (m), altitude (m), heading (rad)."""
RANGE_FALLOFF = 5000.0
FIRING_AO, FIRING_TA = math.radians(30.0), math.radians(90.0)
N_LEARNERS = 2
STATE_FEATURES = 13
OBS_SIZE = OWN_FEATURES + 3 * RELATIVE_FEATURES


def state_features(s: FlightState, alive: bool) -> list[float]:
    """One aircraft's part of the global state, each O(1)."""
    return [*(s.position / 1e4), *(s.velocity / 340.0), math.sin(s.roll), math.cos(s.roll),
            math.sin(s.pitch), math.sin(s.yaw), math.cos(s.yaw), s.airspeed / 340.0, float(alive)]


class DogfightEnv(SeededEnv):
    """2 learners vs 2 scripted opponents (module docstring)."""

    n_agents = N_LEARNERS

    def __init__(self, config: AirCombatConfig) -> None:
        self.config = config
        self._aircraft = [Aircraft(SIM_RATE_HZ) for _ in range(2 * N_LEARNERS)]
        obs_box = spaces.Box(-np.inf, np.inf, (OBS_SIZE,), np.float32)
        self.observation_spaces = [obs_box] * N_LEARNERS
        self.action_spaces = [action_space(config.action_type) for _ in range(N_LEARNERS)]
        self.state_space = spaces.Box(-np.inf, np.inf, (4 * STATE_FEATURES,), np.float32)
        self.agent_names = [f"blue_{i}" for i in range(N_LEARNERS)]
        self.agent_groups = {"blue": list(self.agent_names)}
        """The learners' side; the scripted opponents (red) are not agents."""
        self._rng = np.random.default_rng()
        self._states: list[FlightState] = []
        self._alive = np.ones(4, dtype=bool)
        self._start_headings = np.zeros(4)
        self._steps = 0
        self._sums = np.zeros(3)  # posture, advantage, threatened, over flying learner-steps
        self._flying_steps = 0

    # --- observations -----------------------------------------------------------------

    def _observe(self) -> tuple[list[np.ndarray], np.ndarray]:
        s, alive = self._states, self._alive
        obs = []
        for i in range(N_LEARNERS):
            others = [1 - i, 2, 3]
            features = own_features(s[i])
            for k in others:
                features += relative_features(s[i], s[k], bool(alive[k]))
            obs.append(np.array(features, np.float32) if alive[i] else np.zeros(OBS_SIZE, np.float32))
        state = np.array([x for k in range(4) for x in state_features(s[k], bool(alive[k]))],
                         np.float32)
        return obs, state

    # --- episode ----------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, None]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        rng = self._rng
        spread, climb, turn = JITTER
        for k, aircraft in enumerate(self._aircraft):
            opponent = k >= N_LEARNERS
            north = (START_SEPARATION if opponent else 0.0) + rng.uniform(-spread, spread)
            east = (k % 2 - 0.5) * WINGMAN_SPACING + rng.uniform(-spread, spread)
            heading = (math.pi if opponent else 0.0) + rng.uniform(-turn, turn)
            self._start_headings[k] = heading
            aircraft.start(north, east, START_ALTITUDE + rng.uniform(-climb, climb), heading, START_SPEED)
        self._states = [aircraft.read() for aircraft in self._aircraft]
        self._alive[:] = True
        self._steps = self._flying_steps = 0
        self._sums[:] = 0.0
        obs, state = self._observe()
        return obs, state, None

    def _opponent_controls(self, k: int) -> np.ndarray:
        me = self._states[k]
        if self.config.opponent == "cruise":
            return cruise(me, self._start_headings[k], START_ALTITUDE)
        flying = [i for i in range(N_LEARNERS) if self._alive[i]]
        nearest = min(flying, key=lambda i: float(np.linalg.norm(self._states[i].position - me.position)))
        return pursue(me, self._states[nearest], self.config.floor_altitude_m)

    def _posture(self, i: int) -> tuple[float, bool, bool]:
        """Learner i's best posture score, whether it has a firing position, whether it is under one."""
        cfg, me = self.config, self._states[i]
        best, advantage, threatened = -1.0, False, False
        for k in range(N_LEARNERS, 4):
            if not self._alive[k]:
                continue
            ao, ta, distance = aspect(me, self._states[k])
            score = orientation_score(ao, ta) * range_score(distance, cfg.sound_range_m, RANGE_FALLOFF)
            best = max(best, score)
            in_range = distance < cfg.sound_range_m
            advantage |= in_range and ao < FIRING_AO and ta < FIRING_TA
            # The opponent's view of us: its nose angle is pi - ta, our tail angle pi - ao.
            threatened |= in_range and math.pi - ta < FIRING_AO and math.pi - ao < FIRING_TA
        return best, advantage, threatened

    def step(self, actions: Sequence[np.ndarray]) -> EnvStep:
        cfg = self.config
        flying = np.flatnonzero(self._alive).tolist()
        for k in flying:
            controls = (to_controls(actions[k], cfg.action_type) if k < N_LEARNERS
                        else self._opponent_controls(k))
            self._aircraft[k].command(controls)
            self._aircraft[k].advance(cfg.sim_steps_per_step)
        self._steps += 1
        rewards = np.zeros(N_LEARNERS, np.float32)
        for k in flying:
            state = self._aircraft[k].read()
            if state.is_finite():
                self._states[k] = state
            if lost(state, cfg.floor_altitude_m, cfg.overload_g, cfg.min_airspeed_mps) is not None:
                self._alive[k] = False
                if k < N_LEARNERS:
                    rewards[k] -= cfg.crash_penalty
        any_opponent = bool(self._alive[N_LEARNERS:].any())
        for i in range(N_LEARNERS):
            if not self._alive[i]:
                continue
            safety = -min(max((cfg.safe_altitude_m - self._states[i].altitude)
                              / (cfg.safe_altitude_m - cfg.floor_altitude_m), 0.0), 1.0)
            posture, advantage, threatened = self._posture(i) if any_opponent else (0.0, False, False)
            rewards[i] += posture + safety
            self._sums += (posture, advantage, threatened)
            self._flying_steps += 1
        terminated = not self._alive[:N_LEARNERS].any() or not any_opponent
        truncated = not terminated and self._steps >= cfg.max_episode_steps
        info: dict[str, Any] = {}
        if terminated or truncated:
            means = self._sums / max(self._flying_steps, 1)
            info = {"posture": float(means[0]), "advantage": float(means[1]),
                    "threatened": float(means[2]),
                    "learners_lost": float(N_LEARNERS - self._alive[:N_LEARNERS].sum()),
                    "opponents_lost": float(N_LEARNERS - self._alive[N_LEARNERS:].sum())}
        obs, state = self._observe()
        return EnvStep(obs, state, None, rewards, terminated, truncated,
                       active=self._alive[:N_LEARNERS].copy(), info=info)

    def track(self) -> tuple[float, list[TrackObject]]:
        """The sim time (s) and the four aircraft now (``tacview``): the learners blue, the scripted red."""
        objects = []
        for k, state in enumerate(self._states):
            color, index = ("Blue", k) if k < N_LEARNERS else ("Red", k - N_LEARNERS)
            objects.append(aircraft_object(aircraft_uid(color, index), f"{color.lower()}_{index}", color, state,
                                           bool(self._alive[k])))
        return self._steps * self.config.sim_steps_per_step / SIM_RATE_HZ, objects
