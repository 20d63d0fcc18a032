"""Settings that are valid alone but not together, and the values one table passes another.

Both are derived from the registry: a kind's family, the capabilities it provides and
requires, and its own ``check``.  This is the one place that reads across tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from harl import registry

FAMILY_SLOTS = ("buffer", "returns", "critic", "updater.objective")
"""Slots whose kind must belong to the collector's family (or to both)."""


def _at(built: Mapping[str, Any], slot: str) -> Any:
    parent, _, name = slot.partition(".")
    config = built.get(parent)
    return getattr(config, name, None) if name and config is not None else config


def _choose(slot: str, names: list[str]) -> str:
    if len(names) == 1:
        return f'{slot}.kind = "{names[0]}"'
    return f"{slot}.kind = one of {', '.join(names)}"


def cross_checks(built: Mapping[str, Any]) -> Iterable[tuple[list[str], str]]:
    """(key path, message) for each problem between tables of an otherwise valid pipeline."""
    updater, policy, collector = built.get("updater"), built.get("policy"), built.get("collector")
    if updater is not None and policy is not None and policy.share_parameters and updater.kind == "sequential":
        yield (["updater", "kind"],
               '"sequential" updates agents one after another, which needs one actor per agent, '
               "but policy.share_parameters = true makes one actor for all; set "
               'policy.share_parameters = false, or updater.kind = "simultaneous"')
    if collector is None or updater is None:
        return
    family = registry.entry_of(collector).family
    run = built.get("run")
    if family == "on_policy" and run is not None and run.precision != "fp32":
        yield (["run", "precision"], f'"{run.precision}" applies to off-policy gradient steps only; on-policy '
               'updates run in fp32: remove the key or set precision = "fp32"')
    yield from _recurrent_checks(built, family)
    problems = list(_family_checks(built, family))
    yield from problems
    if problems:
        return
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
                       f"needs; set {_choose(needed_slot, registry.providers(needed_slot, capability, family))}")
        if entry.check is not None:
            yield from entry.check(config, built)
    if family == "off_policy" and policy is not None and policy.share_parameters:
        yield (["policy", "share_parameters"], "off-policy objectives keep one actor per agent; set "
               "policy.share_parameters = false")


def _family_checks(built: Mapping[str, Any], family: str) -> Iterable[tuple[list[str], str]]:
    """Each family slot's kind belongs to the collector's family."""
    collector = registry.kind_name(built["collector"])
    for slot in FAMILY_SLOTS:
        config = _at(built, slot)
        if config is None:
            continue
        entry = registry.entry_of(config)
        if entry.family in (family, "both"):
            continue
        words = entry.family.replace("_", "-")
        yield (slot.split(".") + ["kind"],
               f'"{entry.kind}" belongs to the {words} family, but collector.kind = "{collector}"; set '
               f"{_choose(slot, registry.of_family(slot, family))} "
               f"(or {_choose('collector', registry.of_family('collector', entry.family))})")


def _recurrent_checks(built: Mapping[str, Any], family: str) -> Iterable[tuple[list[str], str]]:
    """Recurrent actors train on sequences cut from on-policy rollouts."""
    policy, collector = built.get("policy"), built["collector"]
    if policy is None or policy.recurrent == "none":
        return
    if family != "on_policy":
        yield (["policy", "recurrent"],
               f'"{policy.recurrent}" needs on-policy rollouts, but collector.kind = "{collector.kind}" '
               'has no recurrent actors; set policy.recurrent = "none"')
    elif policy.recurrent == "chunked" and collector.rollout_length % policy.chunk_length:
        length = collector.rollout_length
        near = max(d for d in range(1, min(policy.chunk_length, length) + 1) if length % d == 0)
        yield (["policy", "chunk_length"],
               f"expected a divisor of collector.rollout_length ({length}), got "
               f"{policy.chunk_length}; for example chunk_length = {near}")


@attrs.frozen
class Wiring:
    """What a stage needs from another slot's table, read once here and passed explicitly."""

    family: str
    n_envs: int
    rollout_length: int = 0
    """On-policy: vector steps per rollout (the rollout buffer's length)."""
    sequence_length: int = 0
    """Recurrent training: steps per sequence (0: feed-forward actors)."""
    fp_state: bool = False
    """The critic takes one state per agent (the buffer stores them)."""
    batch_size: int = 0
    warmup_steps: int = 0
    updates_per_round: int = 0
    policy_freq: int = 1
    """Off-policy: critic steps per actor step (the objective's ``policy_freq``, else 1)."""
    precision: str = "fp32"
    """``[run] precision``: "bf16" runs each off-policy gradient step under bfloat16 autocast."""


def wiring(spec: Any) -> Wiring:
    """The cross-table values of a validated spec."""
    collector, policy = spec.collector, spec.policy
    family = registry.entry_of(collector).family
    if family == "on_policy":
        length = {"none": 0, "naive": collector.rollout_length, "chunked": policy.chunk_length}[policy.recurrent]
        return Wiring(family, collector.n_envs, collector.rollout_length, length,
                      getattr(spec.critic, "state_type", "EP") == "FP")
    objective = spec.updater.objective
    return Wiring(family, collector.n_envs, batch_size=spec.buffer.batch_size,
                  warmup_steps=collector.warmup_steps, updates_per_round=collector.updates_per_round,
                  policy_freq=getattr(objective, "policy_freq", 1), precision=spec.run.precision)
