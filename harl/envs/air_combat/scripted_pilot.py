"""The opponents' pilot: a small proportional autopilot, no learning.

It flies toward a desired heading and altitude the way a simple autopilot does: bank
in proportion to the heading error, pull in proportion to the pitch error (plus the extra
pull a banked turn needs to hold altitude), and hold a cruise speed with the throttle.
``pursue`` points it at a target aircraft (pure pursuit, matching the target's altitude
within safe limits); ``cruise`` keeps a fixed heading and altitude.
"""

from __future__ import annotations

import math

import numpy as np

from harl.envs.air_combat.aircraft import FlightState

MAX_BANK = math.radians(70.0)
MAX_CLIMB_ANGLE = math.radians(25.0)
CRUISE_SPEED = 250.0
"""m/s, about Mach 0.8 at the engagement altitude."""


def wrap_angle(angle: float) -> float:
    """An angle in (-pi, pi]."""
    return math.atan2(math.sin(angle), math.cos(angle))


def autopilot(me: FlightState, heading: float, altitude: float) -> np.ndarray:
    """Stick and throttle that turn ``me`` toward ``heading`` (rad) and ``altitude`` (m)."""
    heading_error = wrap_angle(heading - me.yaw)
    bank = float(np.clip(2.0 * heading_error, -MAX_BANK, MAX_BANK))
    p, q, _ = me.rates
    aileron = 1.5 * (bank - me.roll) - 0.3 * p
    climb = float(np.clip((altitude - me.altitude) / 1500.0, -1.0, 1.0)) * MAX_CLIMB_ANGLE
    # JSBSim's elevator command is nose-down positive; a banked turn needs 1/cos(bank) g.
    turn_pull = 1.0 / max(math.cos(me.roll), 0.35) - 1.0
    elevator = -(3.0 * (climb - me.pitch) - 0.5 * q + 0.3 * turn_pull)
    throttle = 0.6 + 0.02 * (CRUISE_SPEED - me.airspeed)
    return np.clip([aileron, elevator, 0.0, throttle], [-1.0, -1.0, -1.0, 0.4], [1.0, 1.0, 1.0, 0.9])


def pursue(me: FlightState, target: FlightState, floor: float) -> np.ndarray:
    """Point at ``target``, matching its altitude but staying 1.5 km above ``floor``."""
    north, east, _ = target.position - me.position
    altitude = max(target.altitude, floor + 1500.0)
    return autopilot(me, math.atan2(east, north), altitude)


def cruise(me: FlightState, heading: float, altitude: float) -> np.ndarray:
    """Hold a heading and an altitude."""
    return autopilot(me, heading, altitude)
