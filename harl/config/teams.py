"""``[teams.NAME]``: several sets of agents in one world, each with stages of its own (docs/teams.md).

A team's table holds who its agents are and how it plays; its stage tables
(``[teams.NAME.policy]``, ``.critic``, ``.updater``, ``.updater.objective``, ``.buffer``,
``.returns``) replace the pipeline's tables of the same name for that team, so a team reads like
a pipeline.  A pipeline without ``[teams]`` is one team of every agent, exactly as before.
"""

from __future__ import annotations

from typing import Any

import attrs

from harl import registry
from harl.settings import in_range, one_of, setting

ROLES = ("learning", "frozen", "scripted", "self_play")
TEAM_SLOTS = ("policy", "critic", "updater", "buffer", "returns")
"""The pipeline tables a team may replace with its own (the world's env, collector, run, evaluator,
logging and checkpoint tables are shared: one world, one loop)."""


@attrs.frozen
class TeamConfig:
    """One team of a pipeline's ``[teams]``: its agents, its role and its reward."""

    agents: tuple[str, ...] = setting(
        (), 'the team\'s agents: names ("adversary_0"), patterns ("adversary_*") or the env\'s own group '
        "names (an env that declares sides, e.g. MPE simple_tag's adversary and agent); every agent of "
        "the world in exactly one team")
    role: str = setting(
        "learning", "learning: trained by its own stages; frozen: a trained run's policy "
        "(`checkpoint`, or harl train --opponent RUN_DIR); scripted: a registered script "
        "([teams.NAME.script] kind); self_play: snapshots of the learning team `of`, from a pool",
        one_of(ROLES))
    reward: str = setting(
        "sum", "sum: each agent of the team gets the sum of the team's per-agent rewards; own: each agent "
        "keeps the reward the env gives it (the env's own team reward, where it has one)",
        one_of(("sum", "own")))
    checkpoint: str = setting(
        "", "frozen: the run directory (its newest checkpoint) or checkpoint file whose policy plays this team")
    source_team: str = setting(
        "", "frozen: the team of the checkpoint's run that plays this team (a run with [teams]); "
        "empty: this team's name in a run with [teams], or the policy of a one-team run")
    of: str = setting("", "self_play: the learning team whose snapshots play this team (same spaces)")
    snapshot_every: int = setting(10, "self_play: iterations between snapshots of `of` into the pool", in_range(1))
    pool_size: int = setting(10, "self_play: snapshots kept (the oldest leaves first)", in_range(1))
    sample: str = setting(
        "latest", "self_play: which snapshot plays an episode: latest, uniform, or pfsp (prioritized "
        "fictitious self-play: snapshots the learner loses to, more often)",
        one_of(("latest", "uniform", "pfsp")))
    snapshot_rating: str = setting(
        "learner", "self_play: where a new snapshot's openskill rating starts: learner (the learner's mu and "
        "sigma when the snapshot is taken, as LAG's self-play does: the learner's rating then rises only by "
        "what it learned since) or prior (openskill's prior, mu 25 and sigma 8.33: every snapshot a new, "
        "unknown player)", one_of(("learner", "prior")))
    deterministic: bool = setting(
        False, "frozen, self_play: take the most likely action instead of sampling when collecting")
    script: Any = setting(None, 'scripted: the [teams.NAME.script] table, a registered script kind ("random", '
                          '"noop", "my_pkg.module:Name"; harl stages script)')


@attrs.frozen
class TeamSpec:
    """One team as loaded: its config, and for a learning team its whole pipeline (the pipeline's
    tables with the team's own in their place)."""

    name: str
    config: TeamConfig
    spec: Any = None
    """The team's ``PipelineSpec`` (learning teams)."""
    tables: dict[str, Any] = attrs.field(factory=dict)
    """The team's table as written (its stage tables included), so a dump writes it back."""


def team_problems(teams: list[TeamSpec]) -> list[tuple[list[str], str]]:
    """What the teams ask that cannot be, before anything is built: (key path, message).

    The agents each team claims are checked when the env is open (``harl.team_build``)."""
    found: list[tuple[list[str], str]] = []
    learning = [t.name for t in teams if t.config.role == "learning"]
    if not learning:
        found.append((["teams"], 'no team learns: give at least one team role = "learning" (the default)'))
    for team in teams:
        c, at = team.config, ["teams", team.name]
        if not c.agents:
            found.append(([*at, "agents"], 'the team has no agents: list names, patterns ("adversary_*") or '
                          "the env's group names"))
        if c.role == "frozen" and not c.checkpoint:
            found.append(([*at, "checkpoint"], "a frozen team plays a trained run: set checkpoint = \"RUN_DIR\" "
                          "(or harl train --opponent RUN_DIR)"))
        if c.role == "scripted" and c.script is None:
            found.append(([*at, "script"], 'a scripted team needs its script: [teams.NAME.script] kind = "random" '
                          "(harl stages script lists the kinds)"))
        if c.role == "self_play" and c.of not in learning:
            found.append(([*at, "of"], f"{c.of!r} is not a learning team of this pipeline; write one of: "
                          f"{', '.join(learning) or '(none)'}"))
        if team.spec is not None:
            family = getattr(registry.family_of(team.spec.collector), "name", "")
            if family != "on_policy":
                found.append(([*at, "role"], f"a learning team needs an on-policy collector for now "
                              f'(collector.kind = "on_policy": HAPPO, MAPPO, IPPO, ...), not the {family} '
                              "family's; off-policy and value-based teams are refused until their collectors "
                              "step one world for several teams (docs/teams.md)"))
            elif getattr(team.spec.collector, "compile", "off") != "off":
                found.append(([*at, "collector", "compile"], "the compiled collection step serves one team's "
                              "collector stepping its own world, and a teams pipeline steps the world for every "
                              'team at once; set collector.compile = "off" (the default) in a [teams] pipeline'))
    return found
