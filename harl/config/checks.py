"""Settings that are valid alone but not together, and the values one table passes another.

Both are derived from the registry: a kind's family (whose ``checks`` and ``wiring`` this asks),
the capabilities a kind provides and requires, and its own ``check``.  This is the one place
that reads across tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from harl import registry

FAMILY_SLOTS = ("buffer", "returns", "critic", "updater", "updater.objective")
"""Slots whose kind must belong to the pipeline's family (the collector's), or to any family."""


def _at(built: Mapping[str, Any], slot: str) -> Any:
    parent, _, name = slot.partition(".")
    config = built.get(parent)
    return getattr(config, name, None) if name and config is not None else config


def _choose(slot: str, names: list[str]) -> str:
    if len(names) == 1:
        return f'{slot}.kind = "{names[0]}"'
    return f"{slot}.kind = one of {', '.join(names)}"


def cross_checks(built: Mapping[str, Any]) -> Iterable[tuple[list[str], str]]:
    """(key path, message) for each problem between tables of an otherwise valid pipeline: each
    table's kind belongs to the family, the family's own checks, then what each kind requires of
    another table's kind and each kind's own check."""
    collector = built.get("collector")
    if collector is None or built.get("updater") is None:
        return
    family = registry.family_of(collector)
    problems = list(_family_checks(built, family.name))
    yield from problems
    if problems:
        return
    yield from family.checks(built)
    for slot in registry.SLOTS[1:]:
        config = _at(built, slot)
        if config is None:
            continue
        entry = registry.entry_of(config)
        for needed_slot, capability in entry.requires.items():
            other = registry.entry_of(_at(built, needed_slot))
            if capability not in other.provides:
                yield (needed_slot.split(".") + ["kind"],
                       f'"{other.kind}" does not provide {capability}, which {slot}.kind = "{entry.kind}" '
                       f"needs; set {_choose(needed_slot, registry.providers(needed_slot, capability, family.name))}")
        if entry.check is not None:
            yield from entry.check(config, built)


def _family_checks(built: Mapping[str, Any], family: str) -> Iterable[tuple[list[str], str]]:
    """Each family slot's kind belongs to the collector's family."""
    collector = registry.kind_name(built["collector"])
    for slot in FAMILY_SLOTS:
        config = _at(built, slot)
        if config is None:
            continue
        entry = registry.entry_of(config)
        if entry.belongs_to(family):
            continue
        theirs = entry.family if isinstance(entry.family, str) else entry.family[0]
        words = "the " + " or ".join(f.replace("_", "-") for f in (
            (entry.family,) if isinstance(entry.family, str) else entry.family)) + " family"
        yield (slot.split(".") + ["kind"],
               f'"{entry.kind}" belongs to {words}, but collector.kind = "{collector}"; set '
               f"{_choose(slot, registry.of_family(slot, family))} "
               f"(or {_choose('collector', registry.of_family('collector', theirs))})")


def wiring(spec: Any) -> Any:
    """The cross-table values of a validated spec: its family's ``wiring`` (``parts.wiring``)."""
    return registry.family_of(spec.collector).wiring(spec)
