"""Relative geometry of two aircraft: the angles that decide who is on whose tail.

For an ego aircraft and a target, with the line of sight pointing from ego to target:

- ``ao`` (aspect off the nose): the angle between ego's velocity and the line of sight;
  0 when ego points straight at the target.
- ``ta`` (tail angle): the angle between the target's velocity and the line of sight;
  0 when the target flies straight away from ego, i.e. ego sits on its tail.

``ao = ta = 0`` is the attacker's ideal; ``ao = ta = pi`` is ego with the target on its
own tail; head-on passes have ``ao = 0, ta = pi``.
"""

from __future__ import annotations

import math

import numpy as np

from harl.envs.air_combat.aircraft import FlightState


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    if norm < 1e-9:
        return 0.0
    return math.acos(max(-1.0, min(1.0, float(a @ b) / norm)))


def aspect(ego: FlightState, target: FlightState) -> tuple[float, float, float]:
    """``(ao, ta, range_m)`` of ``target`` seen from ``ego`` (module docstring)."""
    sight = target.position - ego.position
    return _angle(ego.velocity, sight), _angle(target.velocity, sight), float(np.linalg.norm(sight))


def orientation_score(ao: float, ta: float) -> float:
    """In [-1, 1]: 1 on the target's tail pointing at it, -1 with the target on ego's tail."""
    return 1.0 - (ao + ta) / math.pi


def range_score(range_m: float, sound_range_m: float, falloff_m: float) -> float:
    """1 within ``sound_range_m``, then decaying exponentially over ``falloff_m``."""
    return math.exp(-max(range_m - sound_range_m, 0.0) / falloff_m)


def heading_frame(ego: FlightState, vector: np.ndarray) -> tuple[float, float, float]:
    """A (north, east, up) vector as (forward, right, up) along ego's horizontal heading."""
    c, s = math.cos(ego.yaw), math.sin(ego.yaw)
    north, east, up = vector
    return c * north + s * east, -s * north + c * east, up


RELATIVE_FEATURES = 10
"""Length of ``relative_features``."""


def relative_features(ego: FlightState, other: FlightState, alive: bool) -> list[float]:
    """Another aircraft seen from ego, each O(1): position (10 km) and velocity (340 m/s)
    in ego's heading frame, ``ao / pi``, ``ta / pi``, range (10 km) and whether it flies."""
    ao, ta, distance = aspect(ego, other)
    forward, right, up = heading_frame(ego, other.position - ego.position)
    v_forward, v_right, v_up = heading_frame(ego, other.velocity - ego.velocity)
    return [forward / 1e4, right / 1e4, up / 1e4, v_forward / 340.0, v_right / 340.0,
            v_up / 340.0, ao / math.pi, ta / math.pi, distance / 1e4, float(alive)]
