"""The warm-up task: one F-16 flies to a heading, altitude and speed that change over time.

Each episode starts in trimmed level flight at 6 km and 250 m/s on a random heading and
draws a target: a heading up to ``max_heading_change_deg`` away, an altitude and a speed
within their own limits of the last target.  Every ``target_interval_s`` seconds the
aircraft must be within 10 degrees of the target heading, and then a new target is drawn
from the current one; missing it ends the episode (``terminated``), as does losing the aircraft
(``aircraft.lost``: LAG's LowAltitude, ExtremeState and Overload, and a stall where
``min_airspeed_mps`` is set), which also costs ``crash_penalty``.  Otherwise the episode is
truncated after ``max_episode_steps``.

The reward per step is the geometric mean of four Gaussian scores, heading error,
altitude error, speed error and roll (wings level once on course), so it lies in [0, 1]
and is 1 only on target.  The published task scores the same four errors; our scales
(10 deg, 100 m, 20 m/s, 0.5 rad) are wider than its (5 deg, 15 m, 24 m/s, 0.35 rad) so
that a turn under way already earns some reward, which a short training run needs.

Observation and state (16 numbers): the errors to the target (altitude / 1 km, heading /
pi, speed / 340 m/s), the fraction of the target's time left, and the aircraft's own
body-frame features (``aircraft.own_features``).  Episode metrics: the mean absolute
heading error (degrees), targets reached, and whether it crashed or missed a target.
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
from harl.envs.air_combat.scripted_pilot import wrap_angle
from harl.envs.air_combat.seeded import SeededEnv
from harl.envs.air_combat.tacview import TrackObject, aircraft_object, aircraft_uid
from harl.envs.protocol import EnvStep

SIM_RATE_HZ = 60.0
START_ALTITUDE, START_SPEED = 6000.0, 250.0
ALTITUDE_LIMITS, SPEED_LIMITS = (4500.0, 9000.0), (180.0, 320.0)
"""Targets stay inside these (m, m/s): well above the floor, inside the F-16's envelope."""
SCALES = (math.radians(10.0), 100.0, 20.0, 0.5)
"""Gaussian widths of the heading, altitude, speed and roll errors (rad, m, m/s, rad)."""
REACHED = math.radians(10.0)
OBS_SIZE = 4 + OWN_FEATURES


def tracking_score(errors: Sequence[float]) -> float:
    """Geometric mean of ``exp(-(error / scale)^2)`` over the four errors of ``SCALES``."""
    return math.exp(-sum((e / s) ** 2 for e, s in zip(errors, SCALES)) / len(SCALES))


class HeadingEnv(SeededEnv):
    """One aircraft, one agent (module docstring)."""

    n_agents = 1

    def __init__(self, config: AirCombatConfig) -> None:
        self.config = config
        self._aircraft = Aircraft(SIM_RATE_HZ)
        box = spaces.Box(-np.inf, np.inf, (OBS_SIZE,), np.float32)
        self.observation_spaces = [box]
        self.action_spaces = [action_space(config.action_type)]
        self.state_space = box
        self._rng = np.random.default_rng()
        self._steps_per_target = max(1, round(
            config.target_interval_s * SIM_RATE_HZ / config.sim_steps_per_step))
        self._target = np.zeros(3)  # heading, altitude, speed
        self._steps = self._deadline = self._reached = 0
        self._error_sum = 0.0
        self._state: FlightState | None = None
        self._flying = True

    def _draw_target(self) -> None:
        cfg, rng = self.config, self._rng
        heading, altitude, speed = self._target
        self._target = np.array([
            wrap_angle(heading + math.radians(rng.uniform(-1, 1) * cfg.max_heading_change_deg)),
            np.clip(altitude + rng.uniform(-1, 1) * cfg.max_altitude_change_m, *ALTITUDE_LIMITS),
            np.clip(speed + rng.uniform(-1, 1) * cfg.max_speed_change_mps, *SPEED_LIMITS),
        ])
        self._deadline = self._steps + self._steps_per_target

    def _errors(self, s: FlightState) -> tuple[float, float, float, float]:
        heading, altitude, speed = self._target
        return wrap_angle(heading - s.yaw), altitude - s.altitude, speed - s.airspeed, s.roll

    def _observe(self, s: FlightState) -> np.ndarray:
        heading_error, altitude_error, speed_error, _ = self._errors(s)
        time_left = (self._deadline - self._steps) / self._steps_per_target
        return np.array([altitude_error / 1000.0, heading_error / math.pi, speed_error / 340.0,
                         time_left, *own_features(s)], dtype=np.float32)

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, None]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        heading = self._rng.uniform(-math.pi, math.pi)
        self._aircraft.start(0.0, 0.0, START_ALTITUDE, heading, START_SPEED)
        self._steps = self._reached = 0
        self._error_sum = 0.0
        self._target = np.array([heading, START_ALTITUDE, START_SPEED])
        self._draw_target()
        self._state, self._flying = self._aircraft.read(), True
        obs = self._observe(self._state)
        return [obs], obs.copy(), None

    def track(self) -> tuple[float, list[TrackObject]]:
        """The sim time (s) and the aircraft now (``tacview``)."""
        assert self._state is not None, "track() before reset()"
        aircraft = aircraft_object(aircraft_uid("Red", 0), "agent_0", "Red", self._state, self._flying)
        return self._steps * self.config.sim_steps_per_step / SIM_RATE_HZ, [aircraft]

    def step(self, actions: Sequence[np.ndarray]) -> EnvStep:
        cfg = self.config
        self._aircraft.command(to_controls(actions[0], cfg.action_type))
        self._aircraft.advance(cfg.sim_steps_per_step)
        self._steps += 1
        s = self._aircraft.read()
        errors = self._errors(s)
        self._error_sum += abs(errors[0])
        event = lost(s, cfg.floor_altitude_m, cfg.overload_g, cfg.min_airspeed_mps)
        reward = 0.0 if event else tracking_score(errors)
        missed = False
        if event is not None:
            reward -= cfg.crash_penalty
        elif self._steps >= self._deadline:
            missed = abs(errors[0]) > REACHED
            if not missed:
                self._reached += 1
                self._draw_target()
        terminated = event is not None or missed
        truncated = not terminated and self._steps >= cfg.max_episode_steps
        info: dict[str, Any] = {}
        if terminated or truncated:
            info = {"heading_error_deg": math.degrees(self._error_sum / self._steps),
                    "targets_reached": float(self._reached), "crashed": float(event is not None),
                    "missed_target": float(missed)}
        self._flying = event is None
        if s.is_finite():
            self._state = s
        obs = self._observe(s) if s.is_finite() else np.zeros(OBS_SIZE, np.float32)
        return EnvStep([obs], obs.copy(), None, np.array([reward], np.float32), terminated,
                       truncated, info=info)
