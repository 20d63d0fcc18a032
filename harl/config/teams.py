"""``[teams.NAME]``: several sets of agents in one world, each with stages of its own (docs/teams.md).

A team's table holds who its agents are, how it plays (its ``role``, a registered kind, with the
role's own keys beside it: ``harl.roles``) and its reward; its stage tables
(``[teams.NAME.policy]``, ``.critic``, ``.updater``, ``.updater.objective``, ``.buffer``,
``.returns``, ``.collector``) replace the pipeline's tables of the same name for a team that learns, so a
team reads like a pipeline (its own ``[collector]``: a team of that collector's family).  A pipeline
without ``[teams]`` is one team of every agent, exactly as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from harl import registry
from harl.settings import one_of, setting

ROLE_SLOT = "role"
"""The registry's slot of the roles (``register("role", Config, build, ...)``, ``harl.roles``)."""
TEAM_SLOTS = ("policy", "critic", "updater", "buffer", "returns", "collector")
"""The pipeline tables a learning team may replace with its own (the world's env, run, evaluator,
logging and checkpoint tables are shared: one world, one loop).  A team's own ``[collector]`` makes
it of that collector's family (HASAC predators beside MAPPO prey); its ``n_envs`` and its vector
steps per iteration must be the world's (``world_steps``)."""


@attrs.frozen
class TeamConfig:
    """One team of a pipeline's ``[teams]``: its agents, its role and its reward."""

    agents: tuple[str, ...] = setting(
        (), 'the team\'s agents: names ("adversary_0"), patterns ("adversary_*") or the env\'s own group '
        "names (an env that declares sides, e.g. MPE simple_tag's adversary and agent); every agent of "
        "the world in exactly one team")
    role: Any = attrs.field(default=None, metadata={
        "doc": "how the team plays, a registered role kind: learning (trained by its own stages), frozen "
               "(a trained run's policy), scripted (a registered script), self_play (snapshots of a learning "
               'team from a pool), or your own ("my_pkg.module:MyRole"); the role\'s keys sit in this table '
               "beside it (harl stages teams lists each role's)",
        "shown": ("string", '"learning"')})
    """The role's settings: the config of its kind (``registry.kind_name(role)`` names it)."""
    reward: str = setting(
        "sum", "sum: each agent of the team gets the sum of the team's per-agent rewards; own: each agent "
        "keeps the reward the env gives it (the env's own team reward, where it has one)",
        one_of(("sum", "own")))


TEAM_KEYS = tuple(f.name for f in attrs.fields(TeamConfig))
"""The keys of a team's table that are not its role's settings or its stage tables."""


@attrs.frozen
class TeamSpec:
    """One team as loaded: its config, and for a learning team its whole pipeline (the pipeline's
    tables with the team's own in their place)."""

    name: str
    config: TeamConfig
    spec: Any = None
    """The team's pipeline (a ``PipelineSpec``: ``harl.config.spec`` imports this module): a team whose
    role learns has one (``learns``), any other None."""
    tables: dict[str, Any] = attrs.field(factory=dict)
    """The team's table as written (its stage tables included), so a dump writes it back."""

    @property
    def learns(self) -> bool:
        """Whether the team is trained by stages of its own (its role's: ``register(..., learns=True)``)."""
        return self.spec is not None


def learning_teams(teams: Iterable[TeamSpec]) -> tuple[TeamSpec, ...]:
    """The teams that learn, in the pipeline's order (``PipelineSpec.learning_teams``)."""
    return tuple(t for t in teams if t.learns)


def role_learns(role: Any) -> bool:
    """Whether a team of ``role`` (a role kind's config) learns: its kind registered ``learns=True``."""
    return bool(registry.entry_of(role).extra("learns", False))


def world_steps(collector: Any) -> int:
    """Vector steps one iteration of a collector's config takes (``rollout_length``, every collector's
    name): a teams world steps every team's collector this many times."""
    steps = getattr(collector, "rollout_length", None)
    if not isinstance(steps, int):
        raise TypeError(f"collector {registry.kind_name(collector)!r} names no vector steps per iteration "
                        "(rollout_length), which a [teams] world needs")
    return steps


def team_problems(teams: Sequence[TeamSpec]) -> list[tuple[list[str], str]]:
    """What the teams ask that cannot be, before anything is built: (key path, message); each role's
    own ``check(config, {"teams": teams, "team": team})`` among them, at paths inside its team's table.

    The agents each team claims are checked when the env is open (``harl.team_build``)."""
    found: list[tuple[list[str], str]] = []
    if not learning_teams(teams):
        found.append((["teams"], 'no team learns: give at least one team role = "learning" (the default)'))
    for team in teams:
        c, at = team.config, ["teams", team.name]
        if not c.agents:
            found.append(([*at, "agents"], 'the team has no agents: list names, patterns ("adversary_*") or '
                          "the env's group names"))
        check = registry.entry_of(c.role).check
        if check is not None:
            found.extend(([*at, *path], message) for path, message in check(c.role, {"teams": teams, "team": team}))
        if team.spec is not None and getattr(team.spec.collector, "compile", "off") != "off":
            found.append(([*at, "collector", "compile"], "the compiled collection step serves one team's "
                          "collector stepping its own world, and a teams pipeline steps the world for every "
                          'team at once; set collector.compile = "off" (the default) in a [teams] pipeline'))
    found.extend(_world_problems(learning_teams(teams)))
    return found


def _world_problems(learners: Sequence[TeamSpec]) -> list[tuple[list[str], str]]:
    """The learning teams' collectors step one world: the same envs, the same steps per iteration."""
    found: list[tuple[list[str], str]] = []
    if not learners:
        return found
    first = learners[0]
    for team in learners[1:]:
        for key, mine, theirs in (("n_envs", team.spec.collector.n_envs, first.spec.collector.n_envs),
                                  ("steps", world_steps(team.spec.collector), world_steps(first.spec.collector))):
            if mine != theirs:
                name = key if key == "n_envs" else "rollout_length"
                found.append((["teams", team.name, "collector", name],
                              f"{mine} where team {first.name}'s collector has {theirs}: the teams step one world, so "
                              f"every learning team's collector takes the same n_envs and vector steps per iteration "
                              f"(rollout_length); set it to {theirs}"))
    return found
