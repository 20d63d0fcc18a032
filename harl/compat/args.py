"""HARL's ``update_args``: an override key sets that key wherever it occurs in HARL's nested
config dicts, with one difference on purpose: a key that matches nothing is a ``ConfigError``
with "did you mean" (HARL drops it), so a misspelt ``--num_env_step`` is never lost.
"""

from __future__ import annotations

import difflib
from typing import Any

from harl.errors import ConfigError


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
