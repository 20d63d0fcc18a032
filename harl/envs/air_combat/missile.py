"""An air-to-air missile: launch, proportional-navigation guidance, burn and coast, the kill radius.

The facts are those of LAG's (and HARL's) AIM-9L model (``MissileSimulator``), restated in
harl's units (metres, seconds, radians, the (north, east, up) frame of ``aircraft``):

- launch: the missile takes the launching aircraft's position and velocity; its flight-path
  pitch and heading start at the aircraft's pitch and yaw (its roll is always 0);
- guidance (``pn_overload``): proportional navigation in the horizontal plane (``ny``, from
  the line of sight's azimuth rate) and the vertical one (``nz``, from its elevation rate,
  plus the 1 g that holds level flight), with a gain ``K = 3 (t_max - t) / t_max`` that fades
  over the missile's life, each overload clipped to ``MAX_OVERLOAD`` g;
- flight (``advance``): a point mass under thrust, drag and gravity, integrated by explicit
  Euler at the aircraft's sim rate (60 Hz).  The motor burns for ``BURN_TIME`` s at a
  specific impulse ``ISP`` and mass flow ``MASS_FLOW`` (7,063 N) and the missile loses mass
  as it burns; then it coasts.  Drag is ``0.5 cD S rho v^2`` with an exponential atmosphere
  and a cross-section that grows with the turn rate (the body presented to the flow);
- end (``Missile.step``): a hit when the target is within ``KILL_RADIUS`` (and still flying);
  a miss after ``LIFETIME`` s, below ``MIN_SPEED``, when the range has grown at every step of
  the last 5 s, or when the target is already down.

Everything here is plain floats (``math``): a missile steps 60 times per env step.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Any

Vector = Sequence[float] | Any
"""Three numbers (north, east, up): a list, a tuple or a numpy array."""

G = 9.81
"""m/s^2, as in LAG's model."""
LIFETIME = 60.0
"""s: a missile still flying after this has missed."""
BURN_TIME = 3.0
"""s of motor burn; then the missile coasts."""
ISP = 120.0
"""s, average specific impulse while burning."""
MASS_FLOW = 6.0
"""kg/s burnt while the motor runs."""
LAUNCH_MASS = 84.0
"""kg."""
LENGTH, DIAMETER = 2.87, 0.127
"""m."""
DRAG_COEFFICIENT = 0.4
NAV_GAIN = 3.0
"""The proportional-navigation constant at launch (it fades linearly to 0 at ``LIFETIME``)."""
MAX_OVERLOAD = 30.0
"""g, the limit of each commanded overload (lateral and normal)."""
KILL_RADIUS = 300.0
"""m: the target within this range is hit."""
MIN_SPEED = 150.0
"""m/s: a missile slower than this has missed."""
OPENING_WINDOW_S = 5.0
"""s: a missile whose range has grown at every step of this long has missed."""
THRUST = G * ISP * MASS_FLOW
"""N while the motor burns (7,063.2 N)."""

FLYING, HIT, MISSED = "flying", "hit", "missed"


def nav_gain(t: float) -> float:
    """The proportional-navigation gain ``K`` at ``t`` s after launch."""
    return max(NAV_GAIN * (LIFETIME - t) / LIFETIME, 0.0)


def air_density(altitude: float) -> float:
    """kg/m^3: LAG's exponential atmosphere, ``1.225 exp(-h / 9300)``."""
    return 1.225 * math.exp(-altitude / 9300.0)


def cross_section(pitch_rate: float, turn_rate: float) -> float:
    """m^2: the nose's disc plus the side presented by turning (rates of the last step, rad/s)."""
    return (math.pi * (DIAMETER / 2.0) ** 2
            + math.hypot(math.sin(pitch_rate), math.sin(turn_rate)) * DIAMETER * LENGTH)


def pn_overload(position: Vector, velocity: Vector, target_position: Vector, target_velocity: Vector,
                gain: float) -> tuple[float, float, float]:
    """``(ny, nz, range_m)``: the lateral and normal overloads (g) proportional navigation asks.

    ``ny = K v / g cos(theta) dbeta`` turns the missile in azimuth at ``K`` times the line of
    sight's azimuth rate ``dbeta``; ``nz = K v / g deps + cos(theta)`` pitches it at ``K`` times
    the elevation rate ``deps``, plus the 1 g (``cos(theta)``) that holds its flight path
    against gravity.  ``theta`` is the missile's flight-path angle; both overloads are clipped to
    ``MAX_OVERLOAD``.
    """
    x, y, z = position
    vx, vy, vz = velocity
    dx, dy, dz = target_position[0] - x, target_position[1] - y, target_position[2] - z
    dvx, dvy, dvz = target_velocity[0] - vx, target_velocity[1] - vy, target_velocity[2] - vz
    speed = math.sqrt(vx * vx + vy * vy + vz * vz)
    theta = math.asin(max(-1.0, min(1.0, vz / speed)))
    horizontal_sq = max(dx * dx + dy * dy, 1e-12)
    horizontal = math.sqrt(horizontal_sq)
    range_sq = horizontal_sq + dz * dz
    azimuth_rate = (dvy * dx - dvx * dy) / horizontal_sq
    elevation_rate = (dvz * horizontal_sq - dz * (dx * dvx + dy * dvy)) / (range_sq * horizontal)
    ny = gain * speed / G * math.cos(theta) * azimuth_rate
    nz = gain * speed / G * elevation_rate + math.cos(theta)
    clip = MAX_OVERLOAD
    return max(-clip, min(clip, ny)), max(-clip, min(clip, nz)), math.sqrt(range_sq)


class Missile:
    """One missile in flight from ``shooter`` (an aircraft index) at ``target`` (module docstring)."""

    def __init__(self, shooter: int, target: int, position: Vector, velocity: Vector,
                 pitch: float, yaw: float, dt: float) -> None:
        self.shooter, self.target, self.dt = shooter, target, dt
        self.position = [float(v) for v in position]
        self.velocity = [float(v) for v in velocity]
        self.pitch, self.yaw = float(pitch), float(yaw)
        self.t = 0.0
        self.mass = LAUNCH_MASS
        self.status = FLYING
        self._rates = (0.0, 0.0)  # pitch and turn rates of the last step
        self._previous_range = math.inf
        self._opening: deque[bool] = deque(maxlen=round(OPENING_WINDOW_S / dt))
        self._opening_steps = 0  # how many of ``_opening`` are True

    @property
    def flying(self) -> bool:
        return self.status == FLYING

    @property
    def speed(self) -> float:
        vx, vy, vz = self.velocity
        return math.sqrt(vx * vx + vy * vy + vz * vz)

    def step(self, target_position: Vector, target_velocity: Vector,
             target_alive: bool) -> str:
        """One sim step against the target's current state; the status after it."""
        self.t += self.dt
        ny, nz, distance = pn_overload(self.position, self.velocity, target_position, target_velocity,
                                       nav_gain(self.t))
        if len(self._opening) == self._opening.maxlen:
            self._opening_steps -= self._opening[0]
        opening = distance > self._previous_range
        self._opening.append(opening)
        self._opening_steps += opening
        self._previous_range = distance
        if distance < KILL_RADIUS and target_alive:
            self.status = HIT
        elif (self.t > LIFETIME or self.speed < MIN_SPEED or not target_alive
              or self._opening_steps >= self._opening.maxlen):  # type: ignore[operator]
            self.status = MISSED
        else:
            self.advance(ny, nz)
        return self.status

    def advance(self, ny: float, nz: float) -> None:
        """Move, then turn and accelerate under the commanded overloads (explicit Euler)."""
        dt = self.dt
        speed = self.speed
        (x, y, z), (vx, vy, vz) = self.position, self.velocity
        self.position = [x + dt * vx, y + dt * vy, z + dt * vz]
        burning = self.t < BURN_TIME
        thrust = THRUST if burning else 0.0
        drag = 0.5 * DRAG_COEFFICIENT * cross_section(*self._rates) * air_density(self.position[2]) * speed ** 2
        nx = (thrust - drag) / (self.mass * G)
        theta, phi = self.pitch, self.yaw
        dv = G * (nx - math.sin(theta))
        turn_rate = G / speed * (ny / math.cos(theta))
        pitch_rate = G / speed * (nz - math.cos(theta))
        self._rates = (pitch_rate, turn_rate)
        speed += dt * dv
        self.yaw = phi + dt * turn_rate
        self.pitch = theta + dt * pitch_rate
        c = math.cos(self.pitch)
        self.velocity = [speed * c * math.cos(self.yaw), speed * c * math.sin(self.yaw),
                         speed * math.sin(self.pitch)]
        if burning:
            self.mass -= dt * MASS_FLOW
