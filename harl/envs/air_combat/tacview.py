"""Watching an air-combat episode: its aircraft and missiles frame by frame, as a Tacview file or a picture.

Each air-combat env's ``track()`` gives the time (s) and a ``TrackObject`` per aircraft and per
missile launched so far; ``harl render RUN --format acmi`` (or ``png3d``) plays one evaluation
episode and hands every frame, the reset's first, to a ``Recording``:

- ``write_acmi``: Tacview's ACMI 2.1 text format, as LAG's ``render(mode="txt")`` writes it: the
  header (``FileType=text/acmi/tacview``, ``FileVersion=2.1``, ``0,ReferenceTime=...``), then per
  frame ``#<seconds>`` and one ``<id>,T=<lon>|<lat>|<alt>|<roll>|<pitch>|<yaw>,Name=...,Color=...``
  line per flying object (degrees and metres).  An object leaving the fight gets a ``-<id>``
  line and an explosion object (``Type=Misc+Explosion``) where it ended, removed a second later;
  a missile ending, hit or miss, explodes, as LAG's do.  Open the file in Tacview (free edition).
- ``draw_png3d``: every track in one 3-D matplotlib picture (east, north, altitude in km), no
  Tacview needed (``pip install "harl[plot]"``).

Positions are harl's flat local frame (``aircraft``), turned back into latitude and longitude
around its reference point: the inverse of how they were read from JSBSim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import attrs

from harl.envs.air_combat.aircraft import (
    _M_PER_DEG_LAT,
    _M_PER_DEG_LON,
    REFERENCE_LAT_DEG,
    REFERENCE_LON_DEG,
    FlightState,
)
from harl.errors import MissingExtraError

REFERENCE_TIME = "2020-04-01T00:00:00Z"
"""The recording's ``ReferenceTime`` (LAG's)."""
EXPLOSION_SECONDS = 1.0
EXPLOSION_RADIUS_M = 300.0
"""The explosion object's radius: the missile's kill radius (LAG's ``Radius``)."""
COLORS = {"Red": ("#d62728", "#ff7f0e"), "Blue": ("#1f77b4", "#17becf")}
"""A side's line colours, its first aircraft's first (missiles take the first)."""


@attrs.frozen
class TrackObject:
    """One aircraft or missile at one instant."""

    uid: str
    """Tacview object id, hexadecimal: ``A0100`` for red_0, ``B0200`` for blue_1, the shooter's id and
    a digit for a missile."""
    name: str
    """The agent's name for an aircraft (``red_0``), ``AIM-9L`` for a missile."""
    kind: str
    """``aircraft`` or ``missile``."""
    color: str
    """``Red`` or ``Blue``."""
    position: tuple[float, float, float]
    """(north, east, up) in metres, harl's local frame."""
    attitude: tuple[float, float, float]
    """(roll, pitch, yaw) in radians; a missile's roll is 0."""
    alive: bool
    """Flying; False from the frame it is lost (shot down, crashed) or, for a missile, has ended."""

    @property
    def lon_lat_alt(self) -> tuple[float, float, float]:
        north, east, up = self.position
        return REFERENCE_LON_DEG + east / _M_PER_DEG_LON, REFERENCE_LAT_DEG + north / _M_PER_DEG_LAT, up


def aircraft_uid(side: str, index: int) -> str:
    """``A0100`` for red aircraft 0, ``B0200`` for blue aircraft 1 (LAG's ids)."""
    return f"{'A' if side == 'Red' else 'B'}{index + 1:02d}00"


def aircraft_object(uid: str, name: str, color: str, state: FlightState, alive: bool) -> TrackObject:
    north, east, up = (float(x) for x in state.position)
    return TrackObject(uid, name, "aircraft", color, (north, east, up),
                       (float(state.roll), float(state.pitch), float(state.yaw)), alive)


class Recording:
    """An episode's frames: ``add(time, objects)`` after the reset and after every step."""

    def __init__(self) -> None:
        self.frames: list[tuple[float, list[TrackObject]]] = []

    def add(self, time: float, objects: Sequence[TrackObject]) -> None:
        self.frames.append((float(time), list(objects)))

    def acmi_lines(self, title: str = "") -> list[str]:
        """The ACMI 2.1 text, a line each (module docstring)."""
        lines = ["FileType=text/acmi/tacview", "FileVersion=2.1", f"0,ReferenceTime={REFERENCE_TIME}",
                 "0,DataSource=harl"]
        if title:
            lines.append(f"0,Title={_escape(title)}")
        gone: set[str] = set()
        explosions: dict[str, float] = {}  # explosion id -> the time it goes
        for time, objects in self.frames:
            lines.append(f"#{time:.2f}")
            for uid, until in list(explosions.items()):
                if time >= until:
                    lines.append(f"-{uid}")
                    del explosions[uid]
            for obj in objects:
                if obj.uid in gone:
                    continue
                lon, lat, alt = obj.lon_lat_alt
                roll, pitch, yaw = (math.degrees(a) for a in obj.attitude)
                where = f"T={lon:.7f}|{lat:.7f}|{alt:.1f}|{roll:.1f}|{pitch:.1f}|{yaw % 360.0:.1f}"
                if obj.alive:
                    what = ("Type=Air+FixedWing,Name=F-16,CallSign=" + _escape(obj.name)
                            if obj.kind == "aircraft" else "Type=Weapon+Missile,Name=AIM-9L")
                    lines.append(f"{obj.uid},{where},{what},Color={obj.color}")
                else:
                    gone.add(obj.uid)
                    boom = f"E{obj.uid}"
                    lines.append(f"-{obj.uid}")
                    lines.append(f"{boom},{where},Type=Misc+Explosion,Color={obj.color},"
                                 f"Radius={EXPLOSION_RADIUS_M:.0f}")
                    explosions[boom] = time + EXPLOSION_SECONDS
        return lines

    def write_acmi(self, path: Path, title: str = "") -> None:
        """The ACMI text file (UTF-8 with a byte-order mark, as LAG's and Tacview's own)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(self.acmi_lines(title)) + "\n", encoding="utf-8-sig")

    def tracks(self) -> dict[str, tuple[TrackObject, list[tuple[float, float, float]], bool]]:
        """Each object's first sight, its flying positions (east, north, up in km) and whether it was lost."""
        out: dict[str, tuple[TrackObject, list[tuple[float, float, float]], bool]] = {}
        for _, objects in self.frames:
            for obj in objects:
                first, points, ended = out.get(obj.uid, (obj, [], False))
                if ended:
                    continue
                north, east, up = obj.position
                points.append((east / 1000.0, north / 1000.0, up / 1000.0))
                out[obj.uid] = (first, points, not obj.alive)
        return out

    def draw_png3d(self, path: Path, title: str = "") -> None:
        """Every track in one 3-D picture: aircraft solid (a dot at the start, a cross where lost),
        missiles dashed in their side's colour (a star where they ended)."""
        try:
            from matplotlib.figure import Figure
        except ImportError as exc:
            raise MissingExtraError("harl render --format png3d", "plot", "matplotlib") from exc
        figure = Figure(figsize=(6.4, 5.2), dpi=90)
        axes = figure.add_subplot(projection="3d")
        planes: dict[str, int] = {}
        missiles = False
        for first, points, ended in self.tracks().values():
            east, north, up = zip(*points)
            shades = COLORS.get(first.color, ("tab:gray", "tab:brown"))
            if first.kind == "aircraft":
                color = shades[planes.get(first.color, 0) % len(shades)]
                planes[first.color] = planes.get(first.color, 0) + 1
                axes.plot(east, north, up, color=color, linewidth=1.6,
                          label=first.name + (" (lost)" if ended else ""))
                axes.scatter(east[:1], north[:1], up[:1], color=color, marker="o", s=18)
                if ended:
                    axes.scatter(east[-1:], north[-1:], up[-1:], color=color, marker="x", s=50)
            else:
                axes.plot(east, north, up, color=shades[0], linewidth=0.9, linestyle="--", alpha=0.8,
                          label=None if missiles else "missiles")
                missiles = True
                if ended:
                    axes.scatter(east[-1:], north[-1:], up[-1:], color=shades[0], marker="*", s=40)
        axes.set_xlabel("east (km)")
        axes.set_ylabel("north (km)")
        axes.set_zlabel("altitude (km)")
        if title:
            axes.set_title(title, fontsize=9)
        axes.legend(loc="upper left", fontsize=8)
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path)


def _escape(text: str) -> str:
    """ACMI text values escape commas (they separate properties)."""
    return text.replace(",", "\\,")
