"""Per-task score bounds: (random, best) returns that map a task's returns onto [0, 1].

Returns of different tasks live on different scales (MPE spread's -180..-60, a win rate's
0..1); aggregating across tasks needs each task's returns normalised, as
``(return - random) / (best - random)`` (Agarwal et al. 2021).  The user gives the bounds:
harl does not guess what "random" and "best" are for a task.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

from harl.config.loading import parse_toml
from harl.errors import HarlError


@attrs.frozen
class Bound:
    random: float
    """The return of a random (or untrained) policy: normalised to 0."""
    best: float
    """The best known return (a reference result): normalised to 1."""

    def normalise(self, value: float) -> float:
        return (value - self.random) / (self.best - self.random)


def _bound(where: str, low: object, high: object) -> Bound:
    try:
        lo, hi = float(low), float(high)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise HarlError(f"{where}: expected two numbers, random and best, got {low!r} and {high!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo == hi:
        raise HarlError(f"{where}: random ({lo:g}) and best ({hi:g}) must be finite and different")
    return Bound(lo, hi)


def parse_bounds(specs: Iterable[str]) -> dict[str, Bound]:
    """``TASK=RANDOM,BEST`` strings (``--bounds simple_spread=-180,-60``); TASK may be ``env/task``."""
    out = {}
    for spec in specs:
        task, sep, values = spec.partition("=")
        parts = values.split(",")
        if not sep or not task or len(parts) != 2:
            raise HarlError(f"--bounds {spec}: expected TASK=RANDOM,BEST, e.g. --bounds simple_spread=-180,-60")
        out[task.strip()] = _bound(f"--bounds {spec}", *parts)
    return out


def load_bounds(path: str | Path) -> dict[str, Bound]:
    """A TOML or JSON file mapping each task to ``{random = .., best = ..}`` or ``[random, best]``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise HarlError(f"{path}: malformed {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}") from None
    except OSError as exc:
        raise HarlError(f"{path}: cannot read the bounds file ({exc.strerror})") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise HarlError(f"{path}: malformed JSON: {exc}") from None
    else:
        data = parse_toml(text, str(path))  # a ConfigError (a HarlError) names the line and column
    out = {}
    for task, value in data.items():
        where = f"{path}: {task}"
        if isinstance(value, Mapping) and set(value) == {"random", "best"}:
            out[task] = _bound(where, value["random"], value["best"])
        elif isinstance(value, list) and len(value) == 2:
            out[task] = _bound(where, *value)
        else:
            raise HarlError(f"{where}: expected {{random = R, best = B}} or [R, B], got {value!r}")
    return out


def bound_for(bounds: Mapping[str, Bound], env: str, task: str) -> Bound | None:
    """The bound given for ``env/task``, else for ``task``."""
    return bounds.get(f"{env}/{task}", bounds.get(task))
