"""The teams' collector: the world stepped once per step for every team, by the one rollout loop.

Its actor (``TeamsActor``) is a composite of actors (``harl.collect.actor``): each learning team's
collector, of whatever family (on-policy, off-policy, episodes), gives the actor that acts into the
team's own buffer, and the teams that do not learn play through the ``TeamsPolicy``.  The rollout
loop (``harl.collect.rollout``) steps the world as it steps a one-team collector's envs::

    for t in range(T):
        actions[team] = member[team].select_action()                      # every learning team
        played[other] = player.play(obs[other], ..., played[other], starts)  # frozen, scripted, pool teams
        step = world.step(joint actions)
        member[team].observe(team_step(step, team))                       # into the team's own buffer
        pool.record(played[pool team].snapshots, ended envs, the learner's results)

so a team's records are exactly what a one-team run of the same agents would write.  What
collection finds out leaves in its ``TeamsCollected`` record: the world's episodes, each team's
return, and each self-play pool's games and the learner's rating after them (``row()``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import torch

from harl.buffers.records import StartRecord
from harl.collect.actor import Actor
from harl.collect.rollout import RolloutLoop
from harl.envs.protocol import VectorStep, is_tensor_native
from harl.teams.players import PlayerStep, SelfPlay, outcome_of
from harl.teams.stages import TeamsBuffer, TeamsPolicy
from harl.teams.world import TeamAgents, TeamWorld, team_step


@attrs.frozen
class PoolGames:
    """A self-play pool's games in one ``collect``: the learner's results against its snapshots (1 a
    win, 0.5 a draw, 0 a loss) and its openskill rating ``(mu, sigma)`` after them (None: unrated)."""

    prefix: str
    """The learner's columns' prefix (``SelfPlay.prefix``)."""
    games: tuple[float, ...]
    rating: tuple[float, float] | None = None

    def row(self) -> dict[str, Any]:
        """``{prefix}_score`` (the mean result; None without a game) and ``rating_{prefix}`` with
        ``rating_{prefix}_sigma``, from the first row on (metrics.csv fixes its columns there)."""
        row: dict[str, Any] = {f"{self.prefix}_score": float(np.mean(self.games)) if self.games else None}
        if self.rating is not None:
            row[f"rating_{self.prefix}"], row[f"rating_{self.prefix}_sigma"] = self.rating
        return row


@attrs.frozen
class TeamsCollected:
    """What one ``collect`` of every team reports: the world's episodes (with ``return_NAME`` per
    team); its row: the teams' training returns and the self-play pools' games and ratings."""

    env_steps: int
    episodes: list[dict[str, Any]]
    teams: tuple[str, ...] = ()
    pools: tuple[PoolGames, ...] = ()

    def row(self) -> dict[str, Any]:
        row = {f"{name}_train_return": float(np.mean([e[f"return_{name}"] for e in self.episodes]))
               if self.episodes else None for name in self.teams}
        for pool in self.pools:
            row.update(pool.row())
        return row


class TeamsCollector:
    """Steps the world for every team (see the module docstring)."""

    def __init__(self, world: TeamWorld, teams: Sequence[TeamAgents], learners: Mapping[str, Any],
                 policy: TeamsPolicy, device: torch.device, seed: int, rollout_length: int,
                 pools: Sequence[SelfPlay] = ()) -> None:
        self.world = world
        self.teams = {t.name: t for t in teams}
        self.learners = dict(learners)
        """Learning team -> its own collector (any family's: its ``actor(buffer)`` acts and observes; never steps)."""
        self.policy = policy
        """Every team's acting: the frozen, scripted and self-play teams play through it (``play``)."""
        self.device, self.rollout_length = device, rollout_length
        self.pools = list(pools)
        """The self-play teams' pools, whose games this collector scores (the results are the learner's)."""
        self.native = is_tensor_native(world.venv)
        self.loop = RolloutLoop(world, seed, rollout_length, self._learners_state)
        """The one rollout loop (``harl.collect.rollout``), stepping the world."""
        self._actor: TeamsActor | None = None

    @property
    def started(self) -> bool:
        return self.loop.started

    @property
    def steps_per_iteration(self) -> int:
        return self.rollout_length * self.world.n_envs

    def actor(self, buffer: TeamsBuffer) -> TeamsActor:
        """Every team acting into ``buffer`` (each learning team into its own), one per buffer."""
        if self._actor is None or self._actor.buffer is not buffer:
            self._actor = TeamsActor(self, buffer)
        return self._actor

    @torch.no_grad()
    def collect(self, buffer: TeamsBuffer) -> TeamsCollected:
        actor = self.actor(buffer)
        actor.games = {play.team: [] for play in self.pools}
        stats = self.loop.collect(actor)
        pools = tuple(PoolGames(play.prefix, tuple(actor.games[play.team]), play.player.rating()) for play in self.pools)
        return TeamsCollected(stats.env_steps, stats.episodes, tuple(self.teams), pools)

    def state_dict(self) -> dict[str, Any]:
        """As ``OnPolicyCollector.state_dict``: how the world's episodes began; and, where the world's
        env gives its whole state and every learning team's actor what its next rollout starts from,
        those (``env_state``; ``next``: ``TeamsActor.carried``, each team's start with the world's running
        team returns and what the other teams' players carry), so that a resumed run continues the
        episodes under way exactly.

        Asked while a ``collect`` was cut short, or after the envs failed to answer it, it returns the
        state as of the end of the last whole ``collect`` (``RolloutLoop.state_dict``)."""
        return self.loop.state_dict()

    def _learners_state(self) -> dict[str, Any]:
        """Each learning team's collector's own state (an off-policy team's steps and generator: its
        warm-up and exploration; a value team's epsilon schedule), by team."""
        return {"learners": {name: learner.state_dict() for name, learner in self.learners.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """As ``OnPolicyCollector``'s: the first collect continues the saved episodes where the world's
        env takes its saved state (``set_state``), or else restarts them from their starts."""
        self.loop.load_state_dict(_nested(dict(state)))
        for name, learner in self.learners.items():
            if name in state.get("learners", {}):
                learner.load_state_dict(state["learners"][name])

    def close(self) -> None:
        self.world.close()


class TeamsActor:
    """The composite actor (``harl.collect.actor.Actor``): each learning team's own actor on its side of
    the world, each other team's player, the pools' games scored as episodes end."""

    def __init__(self, collector: TeamsCollector, buffer: TeamsBuffer) -> None:
        self.collector = collector
        self.buffer = buffer
        self.teams = collector.teams
        self.members: dict[str, Actor] = {name: learner.actor(buffer.members[name])
                                          for name, learner in collector.learners.items()}
        """Each learning team's actor, acting into the team's own buffer."""
        self.games: dict[str, list[float]] = {play.team: [] for play in collector.pools}
        """Each pool's games in the ``collect`` under way (the learner's results)."""
        self._obs: list[Any] = []
        self._avail: list[Any] | None = None
        self._starts = torch.ones(collector.world.n_envs)
        self._played: dict[str, PlayerStep | None] = {}
        """Each player's last step (None before its first)."""

    def _tensor(self, value: Any) -> torch.Tensor:
        return torch.as_tensor(value, dtype=torch.float32, device=self.collector.device)

    def observe_first(self, first: StartRecord) -> None:
        obs, state, avail = first.obs, first.state, first.avail
        for name, member in self.members.items():
            team = self.teams[name]
            member.observe_first(StartRecord(team.take(obs) or [], state, team.take(avail)))
        self._obs, self._avail = list(obs), None if avail is None else list(avail)
        self._starts = torch.ones(self.collector.world.n_envs, device=self.collector.device)
        self._played = dict.fromkeys(self.collector.policy.players)

    def roll_over(self) -> None:
        for member in self.members.values():
            member.roll_over()

    def select_action(self) -> list[Any]:
        c = self.collector
        joint: list[Any] = [None] * c.world.n_agents
        for name, member in self.members.items():
            for i, action in zip(self.teams[name].indices, member.select_action()):
                joint[i] = action
        if c.policy.players:
            obs = [self._tensor(o) for o in self._obs]
            avail = None if self._avail is None else [None if a is None else self._tensor(a) for a in self._avail]
            for name in c.policy.players:
                team = self.teams[name]
                played = c.policy.play(name, team.take(obs) or [], team.take(avail), False, self._played[name],
                                       self._starts)
                self._played[name] = played
                for i, action in zip(team.indices, played.actions):
                    joint[i] = action if c.native else action.cpu().numpy()
        return joint

    def observe(self, step: VectorStep) -> None:
        for name, member in self.members.items():
            member.observe(team_step(step, self.teams[name]))
        ended = np.flatnonzero(np.asarray(torch.as_tensor(step.terminated).cpu()) |
                               np.asarray(torch.as_tensor(step.truncated).cpu()))
        if step.episode_infos:
            self._score(ended.tolist(), step.episode_infos)
        self._obs, self._avail = list(step.obs), None if step.avail is None else list(step.avail)
        self._starts = torch.zeros(self.collector.world.n_envs, device=self.collector.device)
        self._starts[torch.as_tensor(ended, dtype=torch.long)] = 1.0

    def _score(self, envs: list[int], infos: list[dict[str, Any]]) -> None:
        """Each pool's results: the learner's outcome in each finished episode, against the snapshot
        that played it (the step's record)."""
        for play in self.collector.pools:
            played = self._played[play.team]
            assert played is not None and played.snapshots is not None  # a pool team has played this step
            self.games[play.team] += play.player.record(played.snapshots, envs,
                                                        [outcome_of(info, play.learner) for info in infos])

    def end_rollout(self) -> None:
        for member in self.members.values():
            member.end_rollout()

    def abandon(self) -> None:
        for member in self.members.values():
            member.abandon()

    def carried(self) -> dict[str, Any] | None:
        """Each learning team's next start (``members``; None where one cannot carry), the world's running
        team returns and what the other teams' players carry (their last observations, masks, steps: GRU
        states, snapshots; a pool's evicted snapshots still in play)."""
        members = {name: member.carried() for name, member in self.members.items()}
        if any(carried is None for carried in members.values()):
            return None
        return {"members": members, "team_returns": self.collector.world.returns.copy(), "obs": self._obs,
                "avail": self._avail, "starts": self._starts.cpu(),
                "played": {name: None if step is None else attrs.asdict(step, recurse=False)
                           for name, step in self._played.items()},
                "retired": {play.team: play.player.retired() for play in self.collector.pools}}

    def carry_in(self, carried: dict[str, Any]) -> None:
        """The learning teams, the world's team returns and the players where a checkpoint left them."""
        c = self.collector
        c.world.returns[:] = carried["team_returns"]
        for name, member in self.members.items():  # each team's next rollout from its saved first slot
            member.carry_in(carried["members"][name])
        self._obs, self._avail = list(carried["obs"]), carried["avail"]
        self._starts = carried["starts"].to(c.device)
        self._played = {name: None if step is None else PlayerStep(**_on(step, c.device))
                        for name, step in carried["played"].items()}
        for play in c.pools:  # evicted snapshots the episodes under way may still play
            play.player.keep_retired(carried.get("retired", {}).get(play.team, {}))

    def compiled(self, eager_s: float) -> None:
        return None


def _nested(state: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint of the teams' collector in this layout: those written before the one rollout loop
    held the players' carry beside ``next`` (then each learning team's start), not inside it."""
    if "team_returns" not in state:
        return state
    moved = ("team_returns", "obs", "avail", "starts", "played", "retired")
    carried = {"members": state["next"], **{key: state[key] for key in moved if key in state}}
    return {**{k: v for k, v in state.items() if k not in moved}, "next": carried}


def _on(value: Any, device: torch.device) -> Any:
    """``value`` (tensors in dicts, lists and tuples) with its tensors on ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _on(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_on(v, device) for v in value)
    return value
