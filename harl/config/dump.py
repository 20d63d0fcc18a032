"""A spec written back as TOML (every key, defaults included), and the table of every kind."""

from __future__ import annotations

from typing import Any

import attrs

from harl import registry
from harl.config.loading import Loader
from harl.config.messages import field_default, toml_literal
from harl.config.spec import NESTED_SLOTS, SINGLE_SLOTS, TOP_SLOTS, PipelineSpec
from harl.config.teams import ROLE_SLOT, TeamConfig

DUMP_HEADER = ("# The resolved pipeline of this run: every key of every stage, defaults included\n"
               "# (an optional key that is not set is left out).  harl train --resume reads it;\n"
               "# harl stages explains each key.\n")


def dump_pipeline(spec: PipelineSpec) -> str:
    """The fully resolved pipeline as TOML (every key, defaults included)."""
    lines = [DUMP_HEADER]

    def table(name: str, content: dict[str, Any]) -> None:
        lines.append(f"[{name}]")
        nested = []
        for key, value in content.items():
            if value is None:
                continue  # an optional key that is not set: TOML has no null, leaving it out says so
            if isinstance(value, dict):
                nested.append((f"{name}.{key}", value))
            else:
                lines.append(f"{key} = {toml_literal(value)}")
        lines.append("")
        for sub_name, sub in nested:
            table(sub_name, sub)

    for name, content in Loader().unstructure(spec).items():
        table(name, content)
    return "\n".join(lines)


TYPE_NAMES = {"int": "integer", "float": "number", "bool": "boolean", "str": "string",
              "tuple[int, ...]": "list of integers", "tuple[str, ...]": "list of strings", "dict[str, Any]": "table"}


def _keys(slot: str, cls: type) -> list[tuple[str, str, str, str]]:
    keys = []
    for f in attrs.fields(cls):
        if f.name == "kind" or (slot + "." + f.name) in NESTED_SLOTS:
            continue
        if "shown" in f.metadata:  # a key whose value the loader makes from the table (a role, a script)
            keys.append((f.name, *f.metadata["shown"], f.metadata.get("doc", "")))
            continue
        default = field_default(f)
        type_name = str(f.type if isinstance(f.type, str) else getattr(f.type, "__name__", f.type))
        optional = type_name.endswith(" | None")
        type_name = type_name.removesuffix(" | None")
        type_name = TYPE_NAMES.get(type_name, type_name) + (" (optional)" if optional else "")
        keys.append((f.name, type_name, "(not set)" if default is None else toml_literal(default),
                     f.metadata.get("doc", "")))
    return keys


ROLE_TABLE = "teams"
"""The rows of ``describe_stages`` whose kinds are roles: picked by a team's ``role`` key, not ``kind``."""


def title(slot: str, kind: str | None) -> str:
    """How a pipeline picks a kind of ``slot``: ``[critic] kind = "v"``, ``[teams.NAME] role = "frozen"``."""
    if kind and slot == ROLE_TABLE:
        return f'[{slot}.NAME] role = "{kind}"'
    return f"[{slot}]" + (f' kind = "{kind}"' if kind else "")


def describe_stages() -> list[tuple[str, str | None, type, list[tuple[str, str, str, str]]]]:
    """(slot, kind, class, [(key, type, default, doc)]) for every kind, installed packages' too."""
    rows: list[tuple[str, str | None, type, list[tuple[str, str, str, str]]]] = []
    for slot in [*TOP_SLOTS, *sorted(NESTED_SLOTS)]:
        if slot in SINGLE_SLOTS:
            classes = [SINGLE_SLOTS[slot]]
            if slot == "policy":  # a family with a [policy] class of its own (the value family's agent Qs)
                classes += [c for c in dict.fromkeys(f.policy_config for f in registry.families())
                            if c is not None and c not in classes]
            rows.extend((slot, None, cls, _keys(slot, cls)) for cls in classes)
            continue
        for entry in registry.kinds(slot):
            rows.append((slot, entry.kind, entry.config, _keys(slot, entry.config)))
    rows.append((ROLE_TABLE, None, TeamConfig, _keys(ROLE_TABLE, TeamConfig)))  # [teams.NAME]: docs/teams.md
    rows.extend((ROLE_TABLE, e.kind, e.config, _keys(ROLE_SLOT, e.config)) for e in registry.kinds(ROLE_SLOT))
    rows.extend(("teams.NAME.script", e.kind, e.config, _keys("script", e.config)) for e in registry.kinds("script"))
    for name, point in sorted(registry.entry_points().items()):
        try:
            target = point.load()
        except Exception:  # noqa: BLE001 - a broken package is reported when a pipeline uses it
            continue
        found = registry.entry_of_class(target)
        if found is not None:
            rows.append((found.slot, name, found.config, _keys(found.slot, found.config)))
    return rows


def describe_user_kind(kind: str) -> tuple[str, str, type, list[tuple[str, str, str, str]]]:
    """``describe_stages``'s row for a user's ``"module:Name"`` kind (a ``ValueError`` if it is none)."""
    entry = registry.user_kind(kind)
    return (entry.slot, kind, entry.config, _keys(entry.slot, entry.config))
