"""What a sweep runs: ``--seeds`` × the product of ``--grid KEY=V1,V2,...`` values.

A grid value is a TOML literal or a bare word, exactly like a ``--set`` value; commas
inside brackets or quotes belong to the value (``--grid policy.hidden_sizes=[64,64],[128,128]``).
"""

from __future__ import annotations

import collections
import itertools
import re
from collections.abc import Sequence

import attrs

from harl.errors import HarlError

_SEEDS = re.compile(r"^\d+(-\d+)?$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


MAX_SEEDS = 10_000
"""The most seeds one ``--seeds`` (or a suite's ``seeds``) may name: each seed is a whole run, with its own
run directory, checkpoints and metrics, so even this many is days of compute and tens of thousands of
files; a range past it is a typo (``1-1000000``), refused before a list of it is made."""


def parse_seeds(text: str) -> list[int]:
    """``1,2,3`` or ``1-5`` or ``1-3,10``: distinct non-negative integers, in the given order
    (at most ``MAX_SEEDS``, counted before any list is made)."""
    ranges: list[tuple[int, int]] = []
    count = 0
    for part in (p.strip() for p in text.split(",")):
        if not _SEEDS.match(part):
            raise HarlError(f"--seeds {text}: expected non-negative integers separated by commas, "
                            f"or ranges like 1-5 (e.g. --seeds 1,2,3); got {part!r}")
        first, _, last = part.partition("-")
        try:
            low, high = int(first), int(last or first)
        except ValueError:  # past Python's digits limit for int(): no seed is that long
            raise HarlError(f"--seeds {text[:40]}...: a seed of {max(len(first), len(last))} digits; "
                            "write seeds as small non-negative integers, e.g. --seeds 1-5") from None
        if high < low:
            raise HarlError(f"--seeds {text}: the range {part} is empty; write it low-high, e.g. {high}-{low}")
        count += high - low + 1
        if count > MAX_SEEDS:
            raise HarlError(f"--seeds {text}: {count:,} seeds or more, over the limit of {MAX_SEEDS:,}: each seed is a "
                            "whole run (its own run directory, checkpoints and metrics), so a sweep that large is "
                            "almost surely a typo; name fewer seeds (e.g. --seeds 1-10), or split the sweep in "
                            f"parts of at most {MAX_SEEDS:,}")
        ranges.append((low, high))
    seeds: list[int] = []
    seen: set[int] = set()
    repeated: list[int] = []
    for low, high in ranges:
        for seed in range(low, high + 1):
            if seed in seen:
                repeated.append(seed)
            seen.add(seed)
            seeds.append(seed)
    if repeated:
        raise HarlError(f"--seeds {text}: seed {min(repeated)} appears twice; each seed is one run")
    return seeds


def split_values(text: str) -> list[str]:
    """Split at the commas that are outside brackets, braces and quotes."""
    values, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            values.append(text[start:i].strip())
            start = i + 1
    values.append(text[start:].strip())
    return values


def parse_grid(texts: Sequence[str], overrides: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``--grid`` options as (key, value texts); a key once, not also a ``--set`` or run.seed."""
    grid: list[tuple[str, list[str]]] = []
    set_keys = {o.partition("=")[0].strip() for o in overrides}
    for text in texts:
        key, sep, raw = text.partition("=")
        key = key.strip()
        values = split_values(raw)
        if not sep or not key or any(not p.strip() for p in key.split(".")) or "" in values:
            raise HarlError(f"--grid {text}: expected KEY=VALUE1,VALUE2,... with a dotted key path, "
                            "e.g. --grid updater.objective.lr=1e-4,5e-4")
        if key == "run.seed":
            raise HarlError(f"--grid {text}: seeds are --seeds (e.g. --seeds 1-5), not a grid key")
        if key in set_keys or any(k == key for k, _ in grid):
            raise HarlError(f"--grid {text}: {key} is already given (by --set or another --grid); "
                            "give each key once")
        repeated = sorted(v for v, n in collections.Counter(values).items() if n > 1)
        if repeated:
            raise HarlError(f"--grid {text}: the value {repeated[0]} appears twice; each value is one grid point")
        grid.append((key, values))
    return grid


@attrs.frozen
class Trial:
    """One run of a sweep: a seed at a grid point (``point``: ((key, value text), ...))."""

    seed: int
    point: tuple[tuple[str, str], ...]

    @property
    def overrides(self) -> list[str]:
        return [*(f"{key}={value}" for key, value in self.point), f"run.seed={self.seed}"]

    def dir_name(self, name: str) -> str:
        """``<name>[-<key>_<value>...]-s<seed>``, with the last part of each key, path-safe."""
        parts = [name, *(f"{key.rpartition('.')[2]}_{value}" for key, value in self.point), f"s{self.seed}"]
        return "-".join(_UNSAFE.sub("_", p).strip("_") for p in parts)


def point_label(point: Sequence[tuple[str, str]]) -> str:
    """``lr=1e-4, scenario=simple_spread`` (the keys' last parts); ``-`` without a grid."""
    return ", ".join(f"{key.rpartition('.')[2]}={value}" for key, value in point) or "-"


def trials(seeds: Sequence[int], grid: Sequence[tuple[str, Sequence[str]]]) -> list[Trial]:
    """Every grid point (first key slowest) for every seed: grid points outer, seeds inner."""
    points = itertools.product(*([(key, v) for v in values] for key, values in grid))
    return [Trial(seed, tuple(point)) for point in points for seed in seeds]
