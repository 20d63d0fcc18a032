"""A user's role for the tests: every agent of the team plays one fixed action, set in the team's table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import torch

from harl.registry import register
from harl.roles import TeamContext, TeamPlay
from harl.settings import setting
from harl.teams.players import PlayerStep


@attrs.frozen
class StubbornRole:
    """Every agent of the team plays `action`, whatever it sees."""

    action: int = setting(0, "the category index every agent plays")


class Stubborn(torch.nn.Module):
    def __init__(self, action: int, n_agents: int) -> None:
        super().__init__()
        self.action, self.n_agents = action, n_agents

    def play(self, obs: Any, avail: Any, deterministic: bool, last: PlayerStep | None, starts: Any) -> PlayerStep:
        return PlayerStep([torch.full((o.shape[0], 1), float(self.action)) for o in obs])


def build(config: StubbornRole, team: TeamContext) -> TeamPlay:
    return TeamPlay(player=Stubborn(config.action, team.view.n_agents), summary=f"always action {config.action}")


def check(config: StubbornRole, built: Mapping[str, Any]) -> Iterable[tuple[list[str], str]]:
    if config.action < 0:
        yield (["action"], "a category index is >= 0")


register("role", StubbornRole, build, check=check)
