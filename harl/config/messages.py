"""How a pipeline problem is worded: values as TOML writes them, located messages, advice.

Every problem becomes ``FILE: key.path: what was expected, what was found; what to write``.
"""

from __future__ import annotations

import datetime
import difflib
import shlex
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError

from harl.settings import InvalidSetting

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_FACTORY = cast("type[Any]", attrs.Factory)
"""attrs' ``Factory`` class (its stubs declare a function, so ``isinstance`` needs it typed as a class)."""


def field_default(field: attrs.Attribute[Any]) -> Any:
    """A config field's default value: a ``Factory``'s made fresh."""
    return field.default.factory() if isinstance(field.default, _FACTORY) else field.default


def toml_literal(value: Any) -> str:
    """``value`` written as TOML source (lists on one line, big integers with ``_``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:_}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_literal(v)}" for k, v in value.items()) + "}"
    import tomli_w

    return tomli_w.dumps({"v": value})[len("v = "):].rstrip("\n")


def show(value: Any) -> str:
    """A value found in a pipeline, for messages: as TOML writes it; a table is "a table"."""
    if isinstance(value, dict):
        return "a table"
    try:
        return toml_literal(value)
    except TypeError:
        return repr(value)


def parse_value(raw: str) -> Any:
    """A ``--set`` value: a TOML literal (``3``, ``[64,64]``, ``"x"``), else the bare word."""
    raw = raw.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw
    # No setting is a date or time: "2024-01-01" on the command line is meant as text.
    return raw if isinstance(value, (datetime.date, datetime.time)) else value


class SettingTypeError(TypeError):
    """A value of the wrong TOML type; ``advice`` says how to write a right one."""

    def __init__(self, expected: str, value: Any, advice: str = "",
                 accepts: Callable[[Any], bool] | None = None) -> None:
        super().__init__(f"expected {expected}, got {show(value)}")
        self.expected = expected
        self.value = value
        self.advice = advice
        self.accepts = accepts or (lambda _: False)


def problems(exc: BaseException, path: list[str]
              ) -> Iterable[tuple[list[str], str, BaseException]]:
    """Flatten cattrs' exception groups into (key path, message, cause) triples."""
    if isinstance(exc, cattrs.ClassValidationError):
        with_notes, without = exc.group_exceptions()
        for sub, note in with_notes:
            yield from problems(sub, path + [note.name])
        for sub in without:
            yield from problems(sub, path)
    elif isinstance(exc, cattrs.BaseValidationError):
        for sub in exc.exceptions:
            yield from problems(sub, path)
    elif isinstance(exc, ForbiddenExtraKeysError):
        allowed = sorted(f.name for f in attrs.fields(exc.cl))
        for key in sorted(exc.extra_fields):
            hint = difflib.get_close_matches(key, allowed, n=1)
            near = f' (did you mean "{hint[0]}"?)' if hint else ""
            yield path + [key], f"unknown key{near}; valid keys: {', '.join(allowed)}", exc
    elif isinstance(exc, InvalidSetting):
        yield path + [exc.key], exc.message, exc
    elif isinstance(exc, SettingTypeError):
        yield path, str(exc), exc
    else:
        yield path, f"{type(exc).__name__}: {exc}", exc


def _example(path: Sequence[str], value: Any, override: str | None) -> str:
    """How to write ``value`` at ``path``: as a file line, or as ``--set`` for an override."""
    if override is None:
        return f"{path[-1]} = {toml_literal(value)}"
    literal = value if isinstance(value, str) and parse_value(value) == value else toml_literal(value)
    return f"--set {shlex.quote('.'.join(path) + '=' + literal)}"


def fix_for(cls: type | None, path: Sequence[str], cause: BaseException, override: str | None) -> str:
    """The second half of a message: what to write instead (empty when the message says it)."""
    if isinstance(cause, SettingTypeError) and cause.expected == "a table":
        dotted = ".".join(path)
        return (f"; write it as a [{dotted}] table" if override is None
                else f"; set its keys one by one, e.g. --set {dotted}.KEY=VALUE")
    if not isinstance(cause, (SettingTypeError, InvalidSetting)) or path[-1] == "kind":
        return ""
    if isinstance(cause, InvalidSetting) and not cause.suggest_default:
        return ""
    field = attrs.fields_dict(cls).get(path[-1]) if cls is not None else None
    if field is None:
        return ""
    default = field_default(field)
    if default is None:  # an optional key: TOML has no null, so "not set" is "left out"
        advice = f"{cause.advice}, " if isinstance(cause, SettingTypeError) else ""
        return f"; {advice}or leave {path[-1]} out (it is not set by default)"
    if isinstance(cause, SettingTypeError):
        value = cause.value
        if isinstance(value, str):
            unquoted = parse_value(value)
            if not isinstance(unquoted, str) and cause.accepts(unquoted):
                return f"; remove the quotes: {_example(path, unquoted, override)}"
        if isinstance(default, str) and isinstance(value, (int, float)):
            return f"; quote it: {_example(path, str(value), override)}"
        return f"; {cause.advice}, e.g. {_example(path, default, override)} (the default)"
    return f"; for example {_example(path, default, override)} (the default)"


def override_of(path: Sequence[str], origins: dict[tuple[str, ...], str]) -> str | None:
    """The ``--set`` that wrote ``path`` (or a table above it), if any."""
    for n in range(len(path), 0, -1):
        if tuple(path[:n]) in origins:
            return origins[tuple(path[:n])]
    return None


