"""Helpers to declare a stage's config fields: default, validation and one-line doc.

Every stage config is a frozen attrs class whose fields are the keys of its TOML table.
``setting(...)`` keeps the doc string with the field (``harl stages`` prints it) and the
validators say the valid range in their message, which the pipeline loader prefixes with
the file and key path.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import attrs


class InvalidSetting(ValueError):
    """Raised by validators; ``key`` is the field name, ``message`` the expectation.

    ``suggest_default=False`` when the default would not fix it (a setting whose valid
    values depend on another): the loader then does not offer the default as an example.
    """

    def __init__(self, key: str, message: str, suggest_default: bool = True) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message
        self.suggest_default = suggest_default


Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def setting(default: Any = attrs.NOTHING, doc: str = "", check: Validator | None = None,
            factory: Callable[[], Any] | None = None) -> Any:
    """An attrs field with a doc line (shown by ``harl stages``) and a validator."""
    metadata = {"doc": doc}
    if factory is not None:
        return attrs.field(factory=factory, metadata=metadata, validator=check)
    return attrs.field(default=default, metadata=metadata, validator=check)


def _show(value: Any) -> str:
    """A value as TOML writes it, so messages quote what the user typed."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def in_range(low: float | None = None, high: float | None = None, *,
             low_open: bool = False, high_open: bool = False) -> Validator:
    """Accept numbers in the interval; the message states the interval."""
    left = "(" if low_open else "["
    right = ")" if high_open else "]"
    interval = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"

    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        ok = not (isinstance(value, float) and math.isnan(value))
        if ok and low is not None:
            ok = value > low if low_open else value >= low
        if ok and high is not None:
            ok = value < high if high_open else value <= high
        if not ok:
            raise InvalidSetting(attribute.name, f"expected a value in {interval}, got {_show(value)}")

    return check


def positive() -> Validator:
    return in_range(0, None, low_open=True)


def one_of(choices: Iterable[str]) -> Validator:
    allowed = tuple(choices)

    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in allowed:
            raise InvalidSetting(
                attribute.name, f"expected one of: {', '.join(allowed)}; got {_show(value)}"
            )

    return check


def each_positive() -> Validator:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if len(value) == 0 or any(v <= 0 for v in value):
            raise InvalidSetting(
                attribute.name, f"expected a non-empty list of positive integers, got {list(value)}"
            )

    return check


def kind_field(name: str) -> Any:
    """The ``kind`` tag of a variant; fixed per class, written back into resolved pipelines."""
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value != name:
            raise InvalidSetting(attribute.name, f'expected "{name}", got {_show(value)}')

    return attrs.field(default=name, metadata={"doc": "which variant of this stage"}, validator=check)


def own_first(cls: type, fields: list[attrs.Attribute[Any]]) -> list[attrs.Attribute[Any]]:
    """attrs' ``field_transformer`` for a config class that inherits keys shared with other kinds
    (``harl.collect.workers.EnvWorkers``, ``harl.update.v_critic.VLearningConfig``): its own keys
    first, ``kind`` at the head, the inherited ones after them, as ``harl stages`` and a resolved
    pipeline list them."""
    own = cls.__dict__.get("__annotations__", {})
    return [f for f in fields if f.name in own] + [f for f in fields if f.name not in own]
