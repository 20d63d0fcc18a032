"""The teams' collector: the world stepped once per step for every team.

Each learning team keeps its own on-policy collector (built by its family, on the team's view),
which this one drives a step at a time, as ``OnPolicyCollector``'s docstring shows::

    for t in range(T):
        acting[team] = team_collector.act(team_buffer, t)        # every learning team
        played[other] = player.play(obs[other], ..., played[other], starts)   # frozen, scripted, pool teams
        step = world.step(joint actions)
        buffer.insert(TeamsRecord({team: team_collector.observe(acting[team], team_step(step, team))}))
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
from harl.collect.exit_state import ExitState
from harl.envs.protocol import can_set_env_state, get_env_state, is_tensor_native
from harl.teams.players import PlayerStep, SelfPlay, outcome_of
from harl.teams.stages import TeamsBuffer, TeamsPolicy, TeamsRecord
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
        """Learning team -> its own ``OnPolicyCollector`` (acts and observes; never steps)."""
        self.policy = policy
        """Every team's acting: the frozen, scripted and self-play teams play through it (``play``)."""
        self.device, self.seed, self.rollout_length = device, seed, rollout_length
        self.pools = list(pools)
        """The self-play teams' pools, whose games this collector scores (the results are the learner's)."""
        self.native = is_tensor_native(world.venv)
        self.started = False
        self._restart: list[dict[str, Any]] | None = None
        self._resume: dict[str, Any] | None = None  # a checkpoint's whole world state (see state_dict)
        self._buffer: TeamsBuffer | None = None  # the buffer of the last finished rollout
        self._exit = ExitState(self._state)
        self._obs: list[Any] = []
        self._avail: list[Any] | None = None
        self._starts = torch.ones(world.n_envs)
        self._played: dict[str, PlayerStep | None] = {}
        """Each player's last step (None before its first)."""

    @property
    def steps_per_iteration(self) -> int:
        return self.rollout_length * self.world.n_envs

    def _tensor(self, value: Any) -> torch.Tensor:
        return torch.as_tensor(value, dtype=torch.float32, device=self.device)

    def _start(self, buffer: TeamsBuffer) -> None:
        resume, self._resume = self._resume, None
        if resume is not None and can_set_env_state(self.world.venv) and \
                all(hasattr(buffer.members[name], "carry_in") for name in self.learners):
            self._continue(buffer, resume)
            return
        if self._restart is not None:
            obs, state, avail = self.world.restart(self._restart)
            self._restart = None
        else:
            obs, state, avail = self.world.reset(seed=self.seed)
        buffer.start(TeamsRecord({name: StartRecord(self.teams[name].take(obs) or [], state,
                                                    self.teams[name].take(avail)) for name in self.learners}))
        self._obs, self._avail = list(obs), None if avail is None else list(avail)
        self._starts = torch.ones(self.world.n_envs, device=self.device)
        self._played = dict.fromkeys(self.policy.players)
        self.started = True

    @torch.no_grad()
    def collect(self, buffer: TeamsBuffer) -> TeamsCollected:
        self._exit.collecting()
        if not self.started:
            self._start(buffer)
        else:
            buffer.roll_over()
        episodes: list[dict[str, Any]] = []
        games: dict[str, list[float]] = {play.team: [] for play in self.pools}
        n_agents = self.world.n_agents
        for t in range(self.rollout_length):
            joint: list[Any] = [None] * n_agents
            acting = {}
            for name, collector in self.learners.items():
                acting[name] = collector.act(buffer.members[name], t)
                for i, action in zip(self.teams[name].indices, collector.env_actions(acting[name])):
                    joint[i] = action
            if self.policy.players:
                obs = [self._tensor(o) for o in self._obs]
                avail = None if self._avail is None else [None if a is None else self._tensor(a) for a in self._avail]
                for name in self.policy.players:
                    team = self.teams[name]
                    played = self.policy.play(name, team.take(obs) or [], team.take(avail), False,
                                              self._played[name], self._starts)
                    self._played[name] = played
                    for i, action in zip(team.indices, played.actions):
                        joint[i] = action if self.native else action.cpu().numpy()
            step = self.world.step(joint)
            buffer.insert(TeamsRecord({name: collector.observe(acting[name], team_step(step, self.teams[name]))
                                       for name, collector in self.learners.items()}))
            ended = np.flatnonzero(np.asarray(torch.as_tensor(step.terminated).cpu()) |
                                   np.asarray(torch.as_tensor(step.truncated).cpu()))
            if step.episode_infos:
                self._score(ended.tolist(), step.episode_infos, games)
                episodes.extend(step.episode_infos)
            self._obs, self._avail = list(step.obs), None if step.avail is None else list(step.avail)
            self._starts = torch.zeros(self.world.n_envs, device=self.device)
            self._starts[torch.as_tensor(ended, dtype=torch.long)] = 1.0
        for name, collector in self.learners.items():
            collector.finish(buffer.members[name])
        self._buffer = buffer
        self._exit.collected()
        pools = tuple(PoolGames(play.prefix, tuple(games[play.team]), play.player.rating()) for play in self.pools)
        return TeamsCollected(self.rollout_length * self.world.n_envs, episodes, tuple(self.teams), pools)

    def _score(self, envs: list[int], infos: list[dict[str, Any]], games: dict[str, list[float]]) -> None:
        """Each pool's results: the learner's outcome in each finished episode, against the snapshot
        that played it (the step's record); ``games`` gathers those counted."""
        for play in self.pools:
            played = self._played[play.team]
            assert played is not None and played.snapshots is not None  # a pool team has played this step
            games[play.team] += play.player.record(played.snapshots, envs,
                                                   [outcome_of(info, play.learner) for info in infos])

    def state_dict(self) -> dict[str, Any]:
        """As ``OnPolicyCollector.state_dict``: how the world's episodes began; and, where the world's
        env gives its whole state (``get_env_state``) and every learning team's buffer what its next
        rollout starts from (``carried``), those (``env_state``, ``next`` by team) with the world's
        running team returns and what the other teams' players carry (their last observations, masks,
        steps: GRU states, snapshots; a self-play pool's evicted snapshots still in play), so that a
        resumed run continues the episodes under way exactly.

        Asked while a ``collect`` was cut short, or after the envs failed to answer it, it returns the
        state as of the end of the last whole ``collect``, as ``OnPolicyCollector.state_dict`` does."""
        return self._exit.current()

    def _state(self) -> dict[str, Any]:
        if not self.started:
            return {"started": False, "episode_starts": None}
        state: dict[str, Any] = {"started": True, "episode_starts": self.world.episode_starts()}
        members = {} if self._buffer is None else self._buffer.members
        carried: list[Any] = [getattr(members.get(name), "carried", None) for name in self.learners]
        if all(callable(carry) for carry in carried):
            env_state = get_env_state(self.world.venv)
            if env_state is not None:
                state.update(env_state=env_state, next={name: carry() for name, carry in zip(self.learners, carried)},
                             team_returns=self.world.returns.copy(), obs=self._obs, avail=self._avail,
                             starts=self._starts.cpu(),
                             played={name: None if step is None else attrs.asdict(step, recurse=False)
                                     for name, step in self._played.items()},
                             retired={play.team: play.player.retired() for play in self.pools})
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """As ``OnPolicyCollector``'s: the first collect continues the saved episodes where the world's
        env takes its saved state (``set_state``), or else restarts them from their starts."""
        self._restart = state["episode_starts"] if state["started"] else None
        self._resume = dict(state) if state["started"] and "env_state" in state else None
        self._exit.saved = dict(state)

    def _continue(self, buffer: TeamsBuffer, resume: dict[str, Any]) -> None:
        """The world, the learning teams' buffers and the players where a checkpoint left them."""
        self.world.venv.set_state(resume["env_state"])  # type: ignore[attr-defined]
        self.world.returns[:] = resume["team_returns"]
        for name, collector in self.learners.items():  # each team's next rollout from its saved first slot
            collector.carry_in(buffer.members[name], resume["next"][name])
        self._obs, self._avail = list(resume["obs"]), resume["avail"]
        self._starts = resume["starts"].to(self.device)
        self._played = {name: None if step is None else PlayerStep(**_on(step, self.device))
                        for name, step in resume["played"].items()}
        for play in self.pools:  # evicted snapshots the episodes under way may still play
            play.player.keep_retired(resume.get("retired", {}).get(play.team, {}))
        self._restart = None
        self.started = True

    def close(self) -> None:
        self.world.close()


def _on(value: Any, device: torch.device) -> Any:
    """``value`` (tensors in dicts, lists and tuples) with its tensors on ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _on(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_on(v, device) for v in value)
    return value
