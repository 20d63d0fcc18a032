"""What a population can batch, and whether it fits, said before anything is built."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from harl import registry
from harl.errors import ConfigError
from harl.sizes import UPDATE_FACTOR, human, refuse_if_too_big

BATCHED_OBJECTIVES = ("ppo", "a2c")
"""On-policy objectives whose learner is the ratio-surrogate loop (``SurrogateLearner``) batched
by ``harl.population.update``; TRPO's line search is not (yet)."""

STAGES = {"on_policy": {"collector": "on_policy", "buffer": "rollout", "critic": "v"},
          "off_policy": {"collector": "off_policy", "buffer": "replay"}}
"""The stage kinds a population drives, per family: it steps their collectors itself, and
evaluates the on-policy critics batched (off-policy critics learn per member)."""


def family(spec: Any) -> str:
    """``on_policy`` or ``off_policy``: the family of the pipeline's objective."""
    return registry.entry_of(spec.updater.objective).family


def problems(spec: Any) -> list[str]:
    """Each stage of ``spec`` a population cannot drive, as ``table.key: why``.

    Both families act as one batched call over the members; on-policy members also update
    in batched calls (``[run] population_update``), off-policy members one after another."""
    kind = registry.kind_name
    found = []
    fam = family(spec)
    if fam == "on_policy":
        objective = kind(spec.updater.objective)
        if objective not in BATCHED_OBJECTIVES:
            found.append(f'updater.objective.kind = "{objective}" (on-policy populations: '
                         f'{", ".join(BATCHED_OBJECTIVES)}; TRPO runs as separate processes, --jobs N)')
    elif fam == "off_policy" and spec.run.population_update == "batched":
        found.append('run.population_update = "batched" (off-policy members update one after another: '
                     '"auto" or "per_member")')
    for table, expected in STAGES.get(fam, {}).items():
        if (got := kind(getattr(spec, table))) != expected:
            found.append(f'{table}.kind = "{got}" ({fam.replace("_", "-")} populations: "{expected}")')
    if fam == "on_policy":
        if getattr(spec.policy, "recurrent", "none") != "none":
            found.append(f'policy.recurrent = "{spec.policy.recurrent}" (batched: feed-forward actors, "none")')
        if getattr(spec.policy, "share_parameters", False):
            found.append("policy.share_parameters = true (batched: one actor per agent)")
    return found


def _unseeded(spec: Any) -> Any:
    return attrs.evolve(spec, run=attrs.evolve(spec.run, seed=0))


def check_population(specs: Sequence[Any], source: str) -> None:
    """Refuse, in one paragraph naming every reason, a population harl cannot train in one process."""
    found = problems(specs[0])
    if found:
        raise ConfigError(
            f"{source}: --vectorize trains the seeds as one batched population, which needs "
            f"stages it can batch; this pipeline has {len(found)} it cannot: {'; '.join(found)}. "
            "Drop --vectorize (each seed then runs as its own run; --jobs N runs N at once), "
            "or change the stages named")
    base = _unseeded(specs[0])
    for spec in specs[1:]:
        if _unseeded(spec) != base:
            raise ConfigError(
                f"{source}: --vectorize trains the seeds of one pipeline; seed {spec.run.seed}'s differs "
                f"from seed {specs[0].run.seed}'s in more than run.seed (a --grid, or an edited "
                "pipeline.toml); run them without --vectorize")


def check_population_replay(per_transition: int, capacity: int, members: int, source: str, device: Any) -> None:
    """Refuse members x replay capacity bytes that cannot fit once the buffers are full."""
    refuse_if_too_big(
        per_transition * capacity * members,
        f"{members} members x buffer.capacity = {capacity:,} transitions: the population's replay buffers "
        f"({per_transition:,} bytes per transition) would",
        "train fewer seeds at once (a shorter --seeds list), or lower buffer.capacity", source, device)


def check_population_memory(per_step: int, rollout_length: int, n_envs: int, members: int, source: str,
                            device: Any) -> None:
    """Refuse members x envs x rollout bytes that cannot fit, before any member is built."""
    steps = (rollout_length + 1) * n_envs * members
    refuse_if_too_big(
        UPDATE_FACTOR * per_step * steps,
        f"{members} members x collector.n_envs = {n_envs:,} x (collector.rollout_length = {rollout_length:,} "
        f"+ 1) steps: the population's rollout buffers ({per_step:,} bytes per env step, "
        f"{human(per_step * steps)}) and the update's batches",
        "train fewer seeds at once (a shorter --seeds list), or lower collector.n_envs or "
        "collector.rollout_length", source, device)
