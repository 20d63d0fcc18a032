"""HARL's default configs, shipped as JSON data in HARL's dict structure (``defaults/``).

The values are HARL's (PKU-MARL/HARL d539bad, ``harl/configs``); the files are harl's own. A
fresh deep copy is returned every time, so a caller may edit what it gets (HARL's scripts do).
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
from pathlib import Path
from typing import Any

from harl.errors import ConfigError

DEFAULTS = Path(__file__).parent / "defaults"

ALGOS: tuple[str, ...] = ("happo", "hatrpo", "haa2c", "haddpg", "hatd3", "hasac", "had3qn", "maddpg", "matd3",
                          "mappo")
"""HARL's ten algorithms (examples/train.py's --algo choices)."""

ENVS: tuple[str, ...] = ("smac", "mamujoco", "pettingzoo_mpe", "gym", "football", "dexhands", "smacv2", "lag")
"""HARL's eight environment names (examples/train.py's --env choices)."""


def _unknown(what: str, name: object, choices: tuple[str, ...]) -> ConfigError:
    near = difflib.get_close_matches(str(name), choices, n=1)
    hint = f'; did you mean "{near[0]}"?' if near else ""
    return ConfigError(f'unknown HARL {what} "{name}" (HARL\'s are: {", ".join(choices)}){hint}')


@functools.cache
def _read(kind: str, name: str) -> dict[str, Any]:
    return json.loads((DEFAULTS / kind / f"{name}.json").read_text(encoding="utf-8"))


def algo_defaults(algo: str) -> dict[str, Any]:
    """HARL's ``harl/configs/algos_cfgs/<algo>.yaml`` as a dict of sections."""
    if algo not in ALGOS:
        raise _unknown("algorithm (--algo)", algo, ALGOS)
    return copy.deepcopy(_read("algos", algo))


def env_defaults(env: str) -> dict[str, Any]:
    """HARL's ``harl/configs/envs_cfgs/<env>.yaml`` as a flat dict."""
    if env not in ENVS:
        raise _unknown("environment (--env)", env, ENVS)
    return copy.deepcopy(_read("envs", env))


@functools.cache
def known_types() -> dict[str, tuple[type, ...]]:
    """``section.key`` -> the types HARL's defaults give it (every algorithm's and env's files)."""
    found: dict[str, set[type]] = {}

    def add(path: str, value: Any) -> None:
        found.setdefault(path, set()).add(type(value))

    for algo in ALGOS:
        for section, table in _read("algos", algo).items():
            for key, value in table.items():
                add(f"{section}.{key}", value)
    for env in ENVS:
        for key, value in _read("envs", env).items():
            add(f"env:{env}.{key}", value)
    return {path: tuple(sorted(types, key=lambda t: t.__name__)) for path, types in found.items()}
