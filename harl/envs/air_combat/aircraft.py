"""One F-16 in JSBSim: start it trimmed, send it stick and throttle, read its flight state.

Positions are metres in a flat local frame (north, east, up) around a fixed reference
point, converted from JSBSim's latitude / longitude; over the few tens of kilometres of
an engagement the flat-earth error is far below what the rewards can see.  Everything
else the tasks need (attitude, body velocities, rates, load factor) is read from JSBSim
properties through cached property nodes, which is cheaper than a lookup by name.

jsbsim is optional (``pip install "harl[lag]"``): imported when an aircraft is built.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from harl.errors import MissingExtraError

FEET = 0.3048
"""Metres per foot (JSBSim works in feet)."""
EARTH_RADIUS_M = 6_371_000.0
REFERENCE_LAT_DEG, REFERENCE_LON_DEG = 60.0, 120.0
"""Origin of the local frame (any point works; this is where the published task flies)."""
_M_PER_DEG_LAT = EARTH_RADIUS_M * math.pi / 180.0
_M_PER_DEG_LON = _M_PER_DEG_LAT * math.cos(math.radians(REFERENCE_LAT_DEG))

_READ = {
    "lat": "position/lat-geod-deg", "lon": "position/long-gc-deg", "alt_ft": "position/h-sl-ft",
    "vn": "velocities/v-north-fps", "ve": "velocities/v-east-fps", "vd": "velocities/v-down-fps",
    "roll": "attitude/phi-rad", "pitch": "attitude/theta-rad", "yaw": "attitude/psi-rad",
    "u": "velocities/u-fps", "v": "velocities/v-fps", "w": "velocities/w-fps",
    "vt": "velocities/vt-fps", "vc": "velocities/vc-fps", "p": "velocities/p-rad_sec", "q": "velocities/q-rad_sec",
    "r": "velocities/r-rad_sec", "nx": "accelerations/n-pilot-x-norm",
    "ny": "accelerations/n-pilot-y-norm", "nz": "accelerations/n-pilot-z-norm",
    "eci_fps": "velocities/eci-velocity-mag-fps", "time": "simulation/sim-time-sec",
}
_CONTROLS = ("fcs/aileron-cmd-norm", "fcs/elevator-cmd-norm", "fcs/rudder-cmd-norm",
             "fcs/throttle-cmd-norm")


@attrs.frozen(eq=False)
class FlightState:
    """What the tasks read about one aircraft at one instant (SI units, radians)."""

    position: np.ndarray
    """(north, east, up) in metres; up is the altitude above sea level."""
    velocity: np.ndarray
    """(north, east, up) in m/s."""
    roll: float
    pitch: float
    yaw: float
    """Heading, radians clockwise from north."""
    body_velocity: np.ndarray
    """(u, v, w) in m/s: forward, right, down along the aircraft's axes."""
    airspeed: float
    """True airspeed, m/s."""
    rates: np.ndarray
    """Body angular rates (p, q, r), rad/s."""
    load: float
    """The largest pilot-station acceleration along any axis, in g."""
    calibrated_airspeed: float = 0.0
    """m/s (LAG's ``vc`` feature)."""
    accelerations: np.ndarray = attrs.field(factory=lambda: np.array([0.0, 0.0, -1.0]))
    """JSBSim's pilot-station accelerations ``(nx, ny, nz)`` in g, body axes: ``nz`` is -1 in
    level flight (the lift points up, the z axis down) and about -9 pulling 9 g."""
    sim_time: float = 0.0
    """Seconds JSBSim has flown since the start (``simulation/sim-time-sec``)."""
    inertial_speed: float = 0.0
    """m/s, JSBSim's ``velocities/eci-velocity-mag-fps`` (what LAG's ExtremeState watches)."""

    @property
    def altitude(self) -> float:
        return float(self.position[2])

    def is_finite(self) -> bool:
        return bool(np.isfinite(self.position).all() and np.isfinite(self.velocity).all())


def own_features(state: FlightState) -> list[float]:
    """The 12 body-frame numbers of an aircraft's own observation, each O(1)."""
    u, v, w = state.body_velocity / 340.0
    p, q, r = state.rates
    return [state.altitude / 5000.0, math.sin(state.roll), math.cos(state.roll),
            math.sin(state.pitch), math.cos(state.pitch), u, v, w, state.airspeed / 340.0,
            p, q, r]


OWN_FEATURES = 12
"""Length of ``own_features``."""


def import_jsbsim() -> Any:
    try:
        import jsbsim
    except ImportError as exc:
        raise MissingExtraError('env kind "air_combat"', "lag", "jsbsim") from exc
    return jsbsim


class Aircraft:
    """One JSBSim F-16, stepped ``advance(n)`` sim steps at a time."""

    def __init__(self, sim_rate_hz: float, model: str = "f16") -> None:
        self._jsbsim = import_jsbsim()
        self._jsbsim.FGJSBBase().debug_lvl = 0  # silences the start-up banner and trim reports
        self._dt = 1.0 / sim_rate_hz
        self._model = model
        self._load()

    def _load(self) -> None:
        fdm = self._jsbsim.FGFDMExec(self._jsbsim.get_default_root_dir())
        fdm.set_debug_level(0)
        if not fdm.load_model(self._model):
            raise RuntimeError(f'JSBSim could not load the aircraft model "{self._model}"')
        fdm.set_dt(self._dt)
        manager = fdm.get_property_manager()
        self._fdm = fdm
        self._read = {key: manager.get_node(name) for key, name in _READ.items()}
        self._controls = [manager.get_node(name) for name in _CONTROLS]

    def start(self, north: float, east: float, altitude: float, heading: float, speed: float) -> None:
        """Place the aircraft (metres, radians, m/s) in level flight, engine running, trimmed.

        Each start loads a fresh JSBSim instance (~10 ms): ``run_ic`` on a used one keeps
        the fuel burnt and the flight controls' filter states of the last episode, so
        episodes would depend on their predecessors.  Trimming sets the pitch trim so that
        a centred stick holds level flight; an untrimmable start (not seen at the tasks'
        speeds) keeps the untrimmed state.
        """
        self._load()
        fdm = self._fdm
        fdm["ic/lat-geod-deg"] = REFERENCE_LAT_DEG + north / _M_PER_DEG_LAT
        fdm["ic/long-gc-deg"] = REFERENCE_LON_DEG + east / _M_PER_DEG_LON
        fdm["ic/h-sl-ft"] = altitude / FEET
        fdm["ic/psi-true-deg"] = math.degrees(heading) % 360.0
        fdm["ic/u-fps"] = speed / FEET
        fdm.run_ic()
        fdm["propulsion/set-running"] = -1
        try:
            fdm.do_trim(1)
        except Exception:  # noqa: BLE001 - JSBSim raises its own TrimFailureError type
            pass

    def command(self, controls: np.ndarray) -> None:
        """Aileron, elevator, rudder in [-1, 1] and throttle in [0, 1], held until the next call."""
        for node, value in zip(self._controls, controls):
            node.set_double_value(float(value))

    def advance(self, sim_steps: int) -> None:
        run = self._fdm.run
        for _ in range(sim_steps):
            run()

    def kinematics(self) -> tuple[list[float], list[float]]:
        """Position and velocity ((north, east, up), metres and m/s) alone: what a missile steers by."""
        g = self._read
        position = [(g["lat"].get_double_value() - REFERENCE_LAT_DEG) * _M_PER_DEG_LAT,
                    (g["lon"].get_double_value() - REFERENCE_LON_DEG) * _M_PER_DEG_LON,
                    g["alt_ft"].get_double_value() * FEET]
        velocity = [g["vn"].get_double_value() * FEET, g["ve"].get_double_value() * FEET,
                    -g["vd"].get_double_value() * FEET]
        return position, velocity

    def read(self) -> FlightState:
        g = {key: node.get_double_value() for key, node in self._read.items()}
        position = np.array([(g["lat"] - REFERENCE_LAT_DEG) * _M_PER_DEG_LAT,
                             (g["lon"] - REFERENCE_LON_DEG) * _M_PER_DEG_LON, g["alt_ft"] * FEET])
        return FlightState(
            position=position,
            velocity=np.array([g["vn"], g["ve"], -g["vd"]]) * FEET,
            roll=g["roll"], pitch=g["pitch"], yaw=g["yaw"],
            body_velocity=np.array([g["u"], g["v"], g["w"]]) * FEET,
            airspeed=g["vt"] * FEET, calibrated_airspeed=g["vc"] * FEET,
            rates=np.array([g["p"], g["q"], g["r"]]),
            load=max(abs(g["nx"]), abs(g["ny"]), abs(g["nz"])),
            accelerations=np.array([g["nx"], g["ny"], g["nz"]]),
            sim_time=g["time"], inertial_speed=g["eci_fps"] * FEET,
        )


EXTREME_G = 10.0
"""LAG's ExtremeState: any pilot-station acceleration above this (g), from the first step."""
EXTREME_RATE = 1000.0
"""rad/s: ExtremeState's limit on the norm of the body rates (p, q, r)."""
EXTREME_SPEED, EXTREME_ALTITUDE = 1e10 * FEET, 1e10 * FEET
"""m/s and m: ExtremeState's 1e10 ft/s of inertial speed and 1e10 ft of altitude (a diverging integration)."""
OVERLOAD_AFTER_S = 10.0
"""LAG's Overload looks only once JSBSim's clock is past this (s): the trim transients of the start pass."""


def extreme_state(state: FlightState) -> bool:
    """LAG's ExtremeState (its catalog's ``detect_extreme_state``): inertial speed of 1e10 ft/s or
    more, body rates of norm 1000 rad/s or more, altitude of 1e10 ft or more, or an acceleration of
    more than 10 g along any axis (``max(|nx|, |ny|, |nz|) > 10``, from the first step)."""
    return bool(state.inertial_speed >= EXTREME_SPEED or float(np.linalg.norm(state.rates)) >= EXTREME_RATE
                or state.altitude >= EXTREME_ALTITUDE or state.load > EXTREME_G)


def overloaded(state: FlightState, limit_g: float) -> bool:
    """LAG's Overload: past 10 s of sim time, ``|nx| > limit``, ``|ny| > limit`` or ``|nz + 1| > limit``
    (``nz + 1``: the departure from level flight's -1)."""
    nx, ny, nz = state.accelerations
    return bool(state.sim_time > OVERLOAD_AFTER_S
                and (abs(nx) > limit_g or abs(ny) > limit_g or abs(nz + 1.0) > limit_g))


def lost(state: FlightState, floor: float, overload_g: float, min_airspeed: float = 0.0) -> str | None:
    """Why this aircraft is out of the fight, or None: LAG's ends of an aircraft, each task's.

    ``crash``: at or below ``floor`` (LAG's LowAltitude, ``<=``), or a state JSBSim could not
    integrate (not finite); ``extreme``: ``extreme_state``; ``overload``: ``overloaded`` with
    ``overload_g``; ``stall``: slower than ``min_airspeed`` (m/s) where that is above 0 (harl's
    own limit, off by default: LAG has none).
    """
    if not state.is_finite() or state.altitude <= floor:
        return "crash"
    if extreme_state(state):
        return "extreme"
    if overloaded(state, overload_g):
        return "overload"
    if min_airspeed > 0.0 and state.airspeed < min_airspeed:
        return "stall"
    return None
