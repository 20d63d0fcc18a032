"""``role = "self_play"``: snapshots of a learning team (``of``) play the team, drawn from a pool.

The teams' updater adds a snapshot of the learner every ``snapshot_every_iterations`` iterations
(the first when it is built) and keeps ``pool_size``; each training episode draws one by ``sample``;
the teams' collector scores the learner's games against them, which pfsp's draws and the openskill
ratings read (``harl.teams.pool``, ``harl.teams.ratings``).  Both sides must be alike: a snapshot of the
learner plays this team's agents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from harl import registry
from harl.config.teams import learning_teams
from harl.errors import ConfigError
from harl.roles import TeamContext, TeamPlay
from harl.settings import in_range, one_of, setting
from harl.teams.players import SNAPSHOT_RATINGS, PoolPlayer, SelfPlay
from harl.teams.pool import SAMPLE_RULES, SnapshotPool
from harl.teams.ratings import Ratings
from harl.teams.world import TeamView

POOL_SEED_OFFSET = 29
"""The pool's draws are seeded ``[run] seed * 1000 + POOL_SEED_OFFSET``."""


@attrs.frozen
class SelfPlayRole:
    """``[teams.NAME] role = "self_play"``: snapshots of the learning team `of`, drawn from a pool, play the team."""

    of: str = setting("", "the learning team whose snapshots play this team (same spaces)")
    snapshot_every_iterations: int = setting(10, "iterations between snapshots of `of` into the pool", in_range(1))
    pool_size: int = setting(10, "snapshots kept (the oldest leaves first)", in_range(1))
    sample: str = setting(
        "latest", "which snapshot plays an episode: latest, uniform, or pfsp (prioritized fictitious "
        "self-play: snapshots the learner loses to, more often)", one_of(SAMPLE_RULES))
    snapshot_rating: str = setting(
        "learner", "where a new snapshot's openskill rating starts: learner (the learner's mu and sigma when "
        "the snapshot is taken, as LAG's self-play does: the learner's rating then rises only by what it "
        "learned since) or prior (openskill's prior, mu 25 and sigma 8.33: every snapshot a new, unknown "
        "player)", one_of(SNAPSHOT_RATINGS))
    deterministic: bool = setting(
        False, "take the most likely action instead of sampling when collecting")


def build(config: SelfPlayRole, team: TeamContext) -> TeamPlay:
    learner = team.learning_team(config.of)
    assert learner is not None and learner.spec is not None  # check: `of` is a learning team
    _same_sides(team.team.name, team.view, team.views[config.of], team.source)
    template = team.policy(learner.spec, team.seed)
    pool = SnapshotPool(config.pool_size, config.sample, seed=team.seed * 1000 + POOL_SEED_OFFSET)
    player = PoolPlayer(template, pool, Ratings(), config.of, config.deterministic, config.snapshot_rating)
    pool_play = SelfPlay(team.team.name, config.of, player, config.snapshot_every_iterations)
    return TeamPlay(player=player, pool=pool_play,
                    summary=f"self-play: snapshots of {config.of} (pool {config.pool_size}, {config.sample})")


def _same_sides(name: str, view: TeamView, learner: TeamView, source: str) -> None:
    """The snapshots of ``learner`` must fit this team's agents."""
    def shapes(v: TeamView) -> list[tuple[Any, Any]]:
        return [(o.shape, getattr(a, "n", getattr(a, "shape", None))) for o, a in
                zip(v.observation_spaces, v.action_spaces)]
    if shapes(view) != shapes(learner):
        raise ConfigError(
            f"{source}: teams.{name}.of: self-play needs both sides alike, but {name}'s agents "
            f"({', '.join(view.agent_names)}: {shapes(view)}) and {learner.agent_names}'s "
            f"({shapes(learner)}) differ in observation or action spaces; play a frozen or scripted "
            f"team there instead, or choose sides of one shape")


def check(config: SelfPlayRole, built: Mapping[str, Any]) -> Iterable[tuple[list[str], str]]:
    learning = [t.name for t in learning_teams(built["teams"])]
    if config.of not in learning:
        yield (["of"], f"{config.of!r} is not a learning team of this pipeline; write one of: "
               f"{', '.join(learning) or '(none)'}")


registry.register("role", SelfPlayRole, build, kind="self_play", check=check)
