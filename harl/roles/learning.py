"""``role = "learning"`` (the default): the team learns, with stages of its own.

Its stages are the pipeline's family's, built exactly as a one-team pipeline's are, on the team's
side of the world (its agents' spaces), from the team's pipeline: the pipeline's tables with the
team's own (``[teams.NAME.policy]``, ``.critic``, ``.updater``, ``.buffer``, ``.returns``, ``.collector``) in their
place: a team's own ``[collector]`` makes it of that collector's family, beside teams of another.
"""

from __future__ import annotations

from typing import Any

import attrs

from harl import registry
from harl.algorithms import Kinds, name_of
from harl.families import Family
from harl.roles import TeamContext, TeamPlay

SEED_STRIDE = 7919
"""Learning team ``k`` (in the pipeline's order) seeds its stages' generator with ``seed + k * SEED_STRIDE``."""


@attrs.frozen
class LearningRole:
    """``[teams.NAME] role = "learning"``: the default; trained by its own stages, the pipeline's tables with the team's own ([teams.NAME.policy], .critic, .updater, .buffer, .returns, .collector: any family's) in their place."""


def build(config: LearningRole, team: TeamContext) -> TeamPlay:
    spec = team.team.spec
    assert spec is not None  # the loader gives a team whose role learns its pipeline
    family: Family = registry.family_of(spec.collector)
    built = family.build(spec, team.parts(spec, team.seed + SEED_STRIDE * team.index, team.seed * 1000))
    return TeamPlay(built=built, summary=describe(spec))


def describe(spec: Any) -> str:
    """``HAPPO (sequential, ppo)``: the algorithm its kinds make (or "learning"), its updater and objective."""
    k = registry.kind_name
    kinds = Kinds(k(spec.collector), k(spec.critic), bool(getattr(spec.critic, "twin", False)),
                  k(spec.updater), k(spec.updater.objective))
    return f"{name_of(kinds) or 'learning'} ({k(spec.updater)}, {k(spec.updater.objective)})"


registry.register("role", LearningRole, build, kind="learning", default=True, learns=True)
