"""HARL's dicts checked before they are converted: unknown keys (with "did you mean"), wrong
types, and values harl cannot honour. Every problem is one line of one ``ConfigError``."""

from __future__ import annotations

import difflib
import math
from typing import Any

from harl.compat import keys
from harl.compat.data import known_types

NUMBERS = {"model.std_x_coef", "model.std_y_coef", "algo.value_loss_coef", "model.weight_decay",
           "train.update_per_train", "env:pettingzoo_mpe.local_ratio"}
"""Keys whose HARL default is a whole number but whose meaning is a real number."""

EXTRA_TYPES: dict[str, tuple[type, ...]] = {
    "env:pettingzoo_mpe.max_cycles": (int,), "env:pettingzoo_mpe.N": (int,),
    "env:pettingzoo_mpe.local_ratio": (float,),
}
"""Keys harl maps that HARL's default files do not set."""

ANY = (type(None),)


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def type_problem(path: str, value: Any) -> tuple[str | None, Any]:
    """(a problem or None, the value as harl takes it: 2e6 for a count becomes 2_000_000)."""
    types = known_types().get(path) or EXTRA_TYPES.get(path, ANY)
    concrete = tuple(t for t in types if t is not type(None))
    if not concrete:
        return None, value
    if value is None and type(None) in types:
        return None, value
    kind = concrete[0]
    if kind is bool:
        if isinstance(value, bool):
            return None, value
        return f"expected true or false, got {_show(value)}", value
    if kind is int and path not in NUMBERS and float not in concrete:
        if _is_int(value):
            return None, value
        if _is_number(value) and float(value).is_integer():
            return None, int(value)
        return f"expected a whole number, got {_show(value)}", value
    if kind in (int, float):
        if _is_number(value):
            return None, value
        return f"expected a number, got {_show(value)}", value
    if kind is str:
        if isinstance(value, str):
            return None, value
        return f"expected a string, got {_show(value)}", value
    if kind is list:
        if isinstance(value, (list, tuple)) and all(_is_int(v) for v in value):
            return None, list(value)
        return f"expected a list of whole numbers such as [128, 128], got {_show(value)}", value
    return None, value


def unknown_key(section: str, key: str, known: list[str]) -> str:
    """``did you mean`` over the section's keys, and over every section's where the key lives elsewhere."""
    near = difflib.get_close_matches(key, known, n=1)
    if near:
        return f'not a key of HARL\'s config; did you mean "{near[0]}"?'
    elsewhere = [k.path for k in keys.ALL_KEYS if k.path.endswith("." + key)]
    if elsewhere:
        return f"HARL has this key in {', '.join(elsewhere)}, not in {section}"
    return f"not a key of HARL's config (the keys of {section}: {', '.join(known)})"


def fixed_problem(key: keys.Key, value: Any) -> str | None:
    """A fixed key's value harl cannot honour: the refusal's text."""
    def same(accepted: Any) -> bool:
        if accepted is None or value is None:
            return value is accepted
        return value == accepted and isinstance(value, bool) == isinstance(accepted, bool)

    if key.status != keys.FIXED or any(same(a) for a in key.accepts):
        return None
    accepted = " or ".join(_show(v) if v is not None else "null" for v in key.accepts)
    return f"harl supports only {accepted} here ({key.what}), not {_show(value)}"
