"""HARL's ``get_defaults_yaml_args`` and ``update_args``, with HARL's meaning, over harl's copy of
HARL's defaults (``harl/compat/defaults``, JSON data in HARL's dict structure).

One difference on purpose: HARL drops an override key that matches nothing; harl raises a
``ConfigError`` with "did you mean" instead, so a misspelt ``--num_env_step`` is never lost.
"""

from __future__ import annotations

import difflib
from typing import Any

from harl.compat.data import algo_defaults, env_defaults
from harl.errors import ConfigError


def get_defaults_yaml_args(algo: str, env: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(algo_args, env_args): HARL's default config of ``algo`` and of ``env``, fresh copies."""
    return algo_defaults(algo), env_defaults(env)


def _leaves(table: dict[str, Any], found: set[str]) -> None:
    for key, value in table.items():
        if type(value) is dict:
            _leaves(value, found)
        else:
            found.add(key)


def update_args(unparsed_dict: dict[str, Any], *args: dict[str, Any]) -> None:
    """Set every key of ``unparsed_dict`` wherever it occurs in the dicts ``args`` (at any depth),
    in place, as HARL does; a key that occurs nowhere is a ConfigError naming the nearest keys."""
    known: set[str] = set()
    for table in args:
        _leaves(table, known)
    unknown = [key for key in unparsed_dict if key not in known]
    if unknown:
        lines = []
        for key in unknown:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f'; did you mean "--{near[0]}"?' if near else ""
            lines.append(f"--{key}: not a key of this algorithm's or environment's config{hint}")
        raise ConfigError("\n".join(lines))

    def update(table: dict[str, Any]) -> None:
        for key, value in table.items():
            if type(value) is dict:
                update(value)
            elif key in unparsed_dict:
                table[key] = unparsed_dict[key]

    for table in args:
        update(table)
