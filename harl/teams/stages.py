"""Several teams' stages as one pipeline's: the Trainer's one loop runs them unchanged.

Each slot of ``Stages`` holds the teams' stages side by side (docs/architecture.md, "Teams"):

    policy    TeamsPolicy    every team's acting (learning teams' policies, frozen, scripted, pool players)
    critic    TeamsCritic    the learning teams' critics
    buffer    TeamsBuffer    one buffer per learning team
    returns   TeamsReturns   each learning team's returns on its own buffer
    updater   TeamsUpdater   each learning team's update on its own data, then the pools' snapshots

Columns of metrics.csv are the team's name, an underscore and the column a one-team run writes
(``predators_critic_loss``, ``prey_agent0_actor_loss``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch
from torch import nn

from harl.teams.players import Avail, Obs, Player, PlayerStep, SelfPlay, play_policy
from harl.teams.world import TeamAgents


class TeamsPolicy(nn.Module):
    """Every team's acting, joined into the world's per-agent action list: the learning teams'
    policies and the other teams' players (``harl.teams.players``), each stepped as a player, its
    state the ``PlayerStep`` of its last step (a pool's snapshots among it)."""

    def __init__(self, teams: Sequence[TeamAgents], learners: Mapping[str, nn.Module],
                 players: Mapping[str, nn.Module], n_agents: int) -> None:
        super().__init__()
        self.teams = list(teams)
        self.members = nn.ModuleDict({**learners, **players})
        self.players = tuple(players)
        """The teams that do not learn (their members are ``Player``s), in the pipeline's order."""
        self.n_agents = n_agents

    def initial_hidden(self, n_envs: int, device: Any) -> dict[str, PlayerStep | None]:
        """No step yet: each team starts its own state at its first step."""
        return dict.fromkeys((t.name for t in self.teams), None)

    def play(self, name: str, obs: Obs, avail: Avail, deterministic: bool, last: PlayerStep | None,
             starts: torch.Tensor | None) -> PlayerStep:
        """One step of team ``name``: its player's, or its learning policy's as a player's."""
        member: Any = self.members[name]
        if name in self.players:
            player: Player = member
            return player.play(obs, avail, deterministic, last, starts)
        return play_policy(member, obs, avail, deterministic, last, starts)

    def act(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
            deterministic: bool = True, hidden: Mapping[str, PlayerStep | None] | None = None,
            starts: torch.Tensor | None = None) -> tuple[list[torch.Tensor], dict[str, PlayerStep]]:
        hidden = hidden if hidden is not None else self.initial_hidden(obs[0].shape[0], obs[0].device)
        joint: list[Any] = [None] * self.n_agents
        after = {}
        for team in self.teams:
            after[team.name] = self.play(team.name, team.take(obs) or [], team.take(avail), deterministic,
                                         hidden[team.name], starts)
            for i, action in zip(team.indices, after[team.name].actions):
                joint[i] = action
        return joint, after

    def export_actors(self) -> list[nn.Module]:
        """One module per world agent, in the world's order, from each team's own ``export_actors``."""
        out: list[Any] = [None] * self.n_agents
        for team in self.teams:
            member: Any = self.members[team.name]
            if not hasattr(member, "export_actors"):
                raise ValueError(f"team {team.name!r} plays a script, which has no network to export; "
                                 "export one learning team with harl export --team NAME")
            for i, actor in zip(team.indices, member.export_actors()):
                out[i] = actor
        return out


class TeamsCritic(nn.Module):
    """The learning teams' critics (a checkpoint holds them all)."""

    def __init__(self, critics: Mapping[str, nn.Module]) -> None:
        super().__init__()
        self.members = nn.ModuleDict(dict(critics))


@attrs.frozen
class TeamsRecord:
    """One vector step's records of the learning teams (a ``StartRecord`` or a step record each),
    by team: what ``TeamsBuffer`` takes."""

    members: Mapping[str, Any]


@attrs.define
class TeamsBuffer:
    """One buffer per learning team; a record of every team's goes to each team's buffer."""

    members: dict[str, Any]
    saved: tuple[str, ...] = ()
    """The teams whose buffer a checkpoint holds (their family saves its replay: ``[checkpoint] replay_buffer``)."""

    def state_dict(self) -> dict[str, Any]:
        """The saved teams' buffers' contents, by team."""
        return {name: self.members[name].state_dict() for name in self.saved}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for name in self.saved:
            if name in state:
                self.members[name].load_state_dict(state[name])

    def start(self, record: TeamsRecord) -> None:
        """Each team's first observations (``StartRecord``)."""
        for name, start in record.members.items():
            self.members[name].start(start)

    def insert(self, record: TeamsRecord) -> None:
        for name, step in record.members.items():
            self.members[name].insert(step)

    def roll_over(self) -> None:
        """Each team's rollout buffer starts its next rollout where the last ended (a replay has no rollouts)."""
        for buffer in self.members.values():
            if hasattr(buffer, "roll_over"):
                buffer.roll_over()


@attrs.define
class TeamsReturns:
    """Each learning team's returns stage on its own buffer."""

    members: dict[str, Any]

    def compute(self, buffer: TeamsBuffer) -> None:
        for name, returns in self.members.items():
            returns.compute(buffer.members[name])

    def state_dict(self) -> dict[str, Any]:
        return {name: r.state_dict() for name, r in self.members.items() if hasattr(r, "state_dict")}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for name, r in self.members.items():
            if name in state and hasattr(r, "load_state_dict"):
                r.load_state_dict(state[name])


@attrs.frozen
class TeamsUpdate:
    """The teams' updates of one iteration; its row prefixes each team's columns with its name."""

    members: dict[str, Any]
    extra: dict[str, Any]

    def row(self) -> dict[str, Any]:
        row = {f"{name}_{key}": value for name, update in self.members.items() for key, value in update.row().items()}
        row.update(self.extra)
        return row


@attrs.frozen
class TeamStages:
    """One team's stages inside a ``[teams]`` pipeline's (``stages.teams[NAME]``): a learning team has
    all of them, another team only its ``policy`` (its player)."""

    name: str
    agents: tuple[int, ...]
    """Its agents' indices in the world's agent order."""
    policy: nn.Module
    critic: nn.Module | None = None
    buffer: Any = None
    returns: Any = None
    updater: Any = None
    role: str = ""
    """Its role's kind (``learning``, ``frozen``, ``scripted``, ``self_play``, a user's)."""
    summary: str = ""
    """``harl check``'s words for the team: its agents, what plays them, its reward."""


def team_stages(teams: Sequence[TeamAgents], policy: TeamsPolicy, critic: TeamsCritic, buffer: TeamsBuffer,
                returns: TeamsReturns, updater: TeamsUpdater) -> dict[str, TeamStages]:
    """Each team's own stages, by name."""
    critics = dict(critic.members.items())
    return {t.name: TeamStages(t.name, t.indices, policy.members[t.name], critics.get(t.name),
                               buffer.members.get(t.name), returns.members.get(t.name), updater.members.get(t.name))
            for t in teams}


class TeamsUpdater:
    """Each learning team's updater on its own buffer; then snapshots into the self-play pools (the
    first, of each learner as it starts, when made): the pools' snapshots are written here alone."""

    def __init__(self, members: Mapping[str, Any], policies: Mapping[str, nn.Module],
                 self_play: Sequence[SelfPlay]) -> None:
        self.members = dict(members)
        self.policies = dict(policies)
        self.self_play = list(self_play)
        self.iterations = 0
        for play in self.self_play:  # the pool's first opponent: the learner as it starts
            self.snapshot(play)

    def snapshot(self, play: SelfPlay) -> None:
        """The pool's snapshot of its learner as it is now."""
        play.player.add(self.policies[play.learner].state_dict(), self.iterations)

    def update(self, buffer: TeamsBuffer, progress: float = 0.0, **options: Any) -> TeamsUpdate:
        updates = {name: updater.update(buffer.members[name], progress=progress, **options)
                   for name, updater in self.members.items()}
        self.iterations += 1
        extra: dict[str, Any] = {}
        for play in self.self_play:
            if self.iterations % play.every == 0:
                self.snapshot(play)
            extra[f"{play.prefix}_pool_size"] = len(play.player.pool)  # the snapshots the learner plays next
        return TeamsUpdate(updates, extra)

    def state_dict(self) -> dict[str, Any]:
        return {"members": {name: u.state_dict() for name, u in self.members.items()},
                "iterations": self.iterations,
                "pools": {p.team: p.player.pool.state_dict() for p in self.self_play},
                "ratings": {p.team: p.player.ratings.state_dict() for p in self.self_play
                            if p.player.ratings is not None}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for name, updater in self.members.items():
            updater.load_state_dict(state["members"][name])
        self.iterations = int(state["iterations"])
        for play in self.self_play:
            play.player.pool.load_state_dict(state["pools"][play.team])
            play.player.reload()
            if play.player.ratings is not None and play.team in state["ratings"]:
                play.player.ratings.load_state_dict(state["ratings"][play.team])
