"""What a population can batch, and whether it fits, said before anything is built."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from harl import registry
from harl.errors import ConfigError


def family(spec: Any) -> Any:
    """The pipeline's family (``harl.families.Family``): its collector kind's."""
    return registry.family_of(spec.collector)


def problems(spec: Any) -> list[str]:
    """Each stage of ``spec`` a population cannot drive, as ``table.key: why``: the family says
    (its ``population.problems``); a family without a population rule has one problem."""
    fam = family(spec)
    if getattr(spec, "teams", ()):
        return [f"[teams] ({', '.join(t.name for t in spec.teams)}: a population batches one team's "
                "networks per member, not several teams in one world)"]
    if fam.population is None:
        return [f'collector.kind = "{registry.kind_name(spec.collector)}" (the {fam.name.replace("_", "-")} '
                "family has no batched population)"]
    return list(fam.population.problems(spec))


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
