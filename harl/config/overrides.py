"""``--set a.b.c=value`` overrides, applied to the raw tables before validation."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from harl import registry
from harl.config.messages import parse_value, show
from harl.config.spec import NESTED_SLOTS
from harl.errors import ConfigError
from harl.settings import InvalidSetting


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b.c=value``; the value is a TOML literal, or a bare word taken as a string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part.strip() for part in key.split(".")):
        raise ConfigError(
            f"--set {text}: expected KEY=VALUE with a dotted key path, e.g. --set run.seed=3"
        )
    return [part.strip() for part in key.split(".")], parse_value(raw)


def apply_overrides(data: dict[str, Any], overrides: Iterable[str], loader: Any,
                    origins: dict[tuple[str, ...], str] | None = None
                    ) -> tuple[dict[str, Any], list[str]]:
    """Set each override into the raw tables; returns the data and notes for the user.

    When an override changes a slot's ``kind``, keys the new kind does not have are
    dropped (they belonged to the old kind) and reported in the notes.  ``origins``, when
    given, records which ``--set`` wrote each key path (messages name it).
    """
    notes: list[str] = []
    for text in overrides:
        path, value = parse_override(text)
        table = data
        for depth, part in enumerate(path[:-1]):
            if part not in table and origins is not None:  # a table this --set makes: a misspelt one names it
                origins.setdefault(tuple(path[:depth + 1]), f"--set {text}")
            nxt = table.setdefault(part, {})
            if not isinstance(nxt, dict):
                where = ".".join(path[:depth + 1])
                raise ConfigError(
                    f"--set {text}: {where} is a value ({show(nxt)}), not a table, so it has no "
                    f'key "{path[depth + 1]}"; set it with --set {where}=VALUE'
                )
            table = nxt
        table[path[-1]] = value
        if origins is not None:
            origins[tuple(path)] = f"--set {text}"
        slot = ".".join(path[:-1])
        if path[-1] == "kind" and slot in registry.SLOTS and isinstance(value, str):
            try:
                cls = loader.entry(slot, table).config
            except InvalidSetting:  # reported when the pipeline is validated
                cls = None
            if cls is not None:
                allowed = {f.name for f in attrs.fields(cls)} | {"kind"}
                nested = {s.rpartition(".")[2] for s in NESTED_SLOTS if s.startswith(slot + ".")}
                for key in sorted(set(table) - allowed - nested):
                    del table[key]
                    notes.append(f"--set {text}: dropped {slot}.{key}, which kind '{value}' does not have")
    return data, notes


