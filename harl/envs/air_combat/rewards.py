"""LAG's combat rewards as plain functions (the facts of HARL's ``reward_functions``, harl's units).

- ``posture``: orientation times range (LAG's ``v2`` orientation and ``v3`` range); the tasks
  pay its change per step times a scale (a potential), summed over the opponents;
- ``altitude_penalty``: in [-2, 0]: sinking below the safe altitude costs up to 1 (in
  proportion to the sink rate), being below the danger altitude costs between 1 and 2 (more
  the lower);
- ``missile_posture``: while a missile is inbound, the speed it has lost since it was first
  seen (Mach, times a scale) rewards flying away from it and softens flying towards it;
- events (in ``combat``): +200 to the shooter the step its missile hits, -10 per launch where the
  task charges for shots, and in 1v1 -200 the step an aircraft is shot down or crashes (LAG's 2v2
  pays a lost aircraft nothing: ``combat``'s docstring).
"""

from __future__ import annotations

import math

MACH = 340.0
"""m/s: LAG's unit of speed in observations and rewards."""


def orientation_v2(ao: float, ta: float) -> float:
    """LAG's ``v2`` orientation score: ``1 / (50 AO / pi + 2) + 1/2 + min(atanh(1 - max(2 TA / pi, 1e-4)) / 2pi, 0) + 1/2``.

    About 1.5 pointing at the opponent's tail, near 0 with it on ego's tail.  At ``TA = pi``
    exactly LAG's ``atanh(-1)`` is -inf; harl stops the argument at ``-1 + 1e-9`` (-1.65).
    """
    tail = math.atanh(max(1.0 - max(2.0 * ta / math.pi, 1e-4), -1.0 + 1e-9)) / (2.0 * math.pi)
    return 1.0 / (50.0 * ao / math.pi + 2.0) + 0.5 + min(tail, 0.0) + 0.5


def range_v3(range_km: float) -> float:
    """LAG's ``v3`` range score: 1 within 5 km, then ``clip(-0.032 R^2 + 0.284 R + 0.38, 0, 1)``,
    plus ``min(exp(-0.16 R), 0.2)`` at every range."""
    near = 1.0 if range_km < 5.0 else min(max(-0.032 * range_km ** 2 + 0.284 * range_km + 0.38, 0.0), 1.0)
    return near + min(max(math.exp(-0.16 * range_km), 0.0), 0.2)


def posture(ao: float, ta: float, range_m: float) -> float:
    """One opponent's posture score: ``orientation_v2(ao, ta) * range_v3(range in km)``."""
    return orientation_v2(ao, ta) * range_v3(range_m / 1000.0)


def altitude_penalty(altitude_m: float, climb_rate_mps: float, safe_km: float = 4.0,
                     danger_km: float = 3.5, kv: float = 0.2) -> float:
    """LAG's altitude reward (``AltitudeReward``), in [-2, 0].

    Below ``safe_km``: ``-clip(vz / kv * (safe - z) / safe, 0, 1)`` with ``vz`` in Mach, as LAG
    writes it (its vertical velocity is positive downwards: a sinking aircraft pays).  Below
    ``danger_km``: ``clip(z / danger, 0, 1) - 2`` more.
    """
    z, sink = altitude_m / 1000.0, -climb_rate_mps / MACH
    penalty = 0.0
    if z <= safe_km:
        penalty -= min(max(sink / kv * (safe_km - z) / safe_km, 0.0), 1.0)
    if z <= danger_km:
        penalty += min(max(z / danger_km, 0.0), 1.0) - 2.0
    return penalty


def missile_posture(first_speed: float, speed: float, cos_angle: float, scale: float) -> float:
    """LAG's ``MissilePostureReward`` while a missile is inbound.

    ``drop = (first_speed - speed) / 340 * scale`` (the speed lost since the missile was first
    seen); ``cos_angle`` is the cosine between the missile's and ego's velocities.  Flying away
    (``cos_angle >= 0``) earns ``cos_angle * max(drop, 0)``; flying towards it costs
    ``cos_angle / (max(drop, 0) + 1)``.
    """
    drop = max((first_speed - speed) / MACH * scale, 0.0)
    if cos_angle < 0:
        return cos_angle / (drop + 1.0)
    return cos_angle * drop
