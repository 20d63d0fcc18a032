"""``role = "scripted"``: a registered script plays the team (``[teams.NAME.script] kind``,
``harl.teams.scripted``): a fixed rule, no weights, nothing learned."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from harl import registry
from harl.roles import TeamContext, TeamPlay
from harl.teams.players import ScriptPlayer
from harl.teams.scripted import build_script

SEED_OFFSET = 17
"""A script's seed: ``[run] seed * 1000 + SEED_OFFSET``."""


@attrs.frozen
class ScriptedRole:
    """``[teams.NAME] role = "scripted"``: a registered script plays the team ([teams.NAME.script] kind)."""

    script: Any = attrs.field(default=None, metadata={
        "doc": 'the [teams.NAME.script] table, a registered script kind ("random", "noop", '
               '"my_pkg.module:Name"; harl stages script)', "shown": ("table", "(not set)")})


def build(config: ScriptedRole, team: TeamContext) -> TeamPlay:
    view = team.view
    script = build_script(config.script, view.observation_spaces, view.action_spaces,
                          team.seed * 1000 + SEED_OFFSET, f"{team.source}: teams.{team.team.name}.script.kind")
    return TeamPlay(player=ScriptPlayer(script), summary=f"script {registry.kind_name(config.script)}")


def check(config: ScriptedRole, built: Mapping[str, Any]) -> Iterable[tuple[list[str], str]]:
    if config.script is None:
        yield (["script"], 'a scripted team needs its script: [teams.NAME.script] kind = "random" '
               "(harl stages script lists the kinds)")


registry.register("role", ScriptedRole, build, kind="scripted", check=check)
