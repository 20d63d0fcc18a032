"""The teams' collector: the world stepped once per step for every team.

Each learning team keeps its own on-policy collector (built by its family, on the team's view),
which this one drives a step at a time, as ``OnPolicyCollector``'s docstring shows::

    for t in range(T):
        acting[team] = team_collector.act(team_buffer, t)        # every learning team
        actions[other] = player.act(obs[other], ...)             # frozen, scripted, pool teams
        step = world.step(joint actions)
        team_buffer.insert(team_collector.observe(acting[team], team_step(step, team)))

so a team's records are exactly what a one-team run of the same agents would write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import torch

from harl.buffers.records import StartRecord
from harl.envs.protocol import is_tensor_native
from harl.teams.players import PoolPlayer, outcome_of
from harl.teams.stages import TeamsBuffer
from harl.teams.world import TeamAgents, TeamWorld, team_step


@attrs.frozen
class TeamsCollected:
    """What one ``collect`` of every team reports: the world's episodes (with ``return_NAME`` per
    team) and the teams' training returns as metrics columns."""

    env_steps: int
    episodes: list[dict[str, Any]]
    teams: tuple[str, ...] = ()

    def row(self) -> dict[str, Any]:
        return {f"{name}_train_return": float(np.mean([e[f"return_{name}"] for e in self.episodes]))
                if self.episodes else None for name in self.teams}


class TeamsCollector:
    """Steps the world for every team (see the module docstring)."""

    def __init__(self, world: TeamWorld, teams: Sequence[TeamAgents], learners: Mapping[str, Any],
                 players: Mapping[str, Any], device: torch.device, seed: int, rollout_length: int,
                 opponents_of: Mapping[str, str] | None = None) -> None:
        self.world = world
        self.teams = {t.name: t for t in teams}
        self.learners = dict(learners)
        """Learning team -> its own ``OnPolicyCollector`` (acts and observes; never steps)."""
        self.players = dict(players)
        """Frozen, scripted and self-play team -> its player."""
        self.device, self.seed, self.rollout_length = device, seed, rollout_length
        self.opponents_of = dict(opponents_of or {})
        """Self-play team -> the learning team its snapshots stand for (the results are the learner's)."""
        self.native = is_tensor_native(world.venv)
        self.started = False
        self._restart: list[dict[str, Any]] | None = None
        self._obs: list[Any] = []
        self._avail: list[Any] | None = None
        self._starts = torch.ones(world.n_envs)
        self._hidden: dict[str, Any] = {}

    @property
    def steps_per_iteration(self) -> int:
        return self.rollout_length * self.world.n_envs

    def _tensor(self, value: Any) -> torch.Tensor:
        return torch.as_tensor(value, dtype=torch.float32, device=self.device)

    def _start(self, buffer: TeamsBuffer) -> None:
        if self._restart is not None:
            obs, state, avail = self.world.restart(self._restart)
            self._restart = None
        else:
            obs, state, avail = self.world.reset(seed=self.seed)
        for name in self.learners:
            team = self.teams[name]
            buffer.members[name].start(StartRecord(team.take(obs) or [], state, team.take(avail)))
        self._obs, self._avail = list(obs), None if avail is None else list(avail)
        self._starts = torch.ones(self.world.n_envs, device=self.device)
        self._hidden = {name: p.initial_hidden(self.world.n_envs, self.device) for name, p in self.players.items()}
        self.started = True

    @torch.no_grad()
    def collect(self, buffer: TeamsBuffer) -> TeamsCollected:
        if not self.started:
            self._start(buffer)
        else:
            for name in self.learners:
                buffer.members[name].roll_over()
        episodes: list[dict[str, Any]] = []
        n_agents = self.world.n_agents
        for t in range(self.rollout_length):
            joint: list[Any] = [None] * n_agents
            acting = {}
            for name, collector in self.learners.items():
                acting[name] = collector.act(buffer.members[name], t)
                for i, action in zip(self.teams[name].indices, collector.env_actions(acting[name])):
                    joint[i] = action
            if self.players:
                obs = [self._tensor(o) for o in self._obs]
                avail = None if self._avail is None else [None if a is None else self._tensor(a) for a in self._avail]
                for name, player in self.players.items():
                    team = self.teams[name]
                    actions, self._hidden[name] = player.act(team.take(obs) or [], team.take(avail), False,
                                                             hidden=self._hidden[name], starts=self._starts)
                    for i, action in zip(team.indices, actions):
                        joint[i] = action if self.native else action.cpu().numpy()
            step = self.world.step(joint)
            for name, collector in self.learners.items():
                buffer.members[name].insert(collector.observe(acting[name], team_step(step, self.teams[name])))
            ended = np.flatnonzero(np.asarray(torch.as_tensor(step.terminated).cpu()) |
                                   np.asarray(torch.as_tensor(step.truncated).cpu()))
            if step.episode_infos:
                self._score(ended.tolist(), step.episode_infos)
                episodes.extend(step.episode_infos)
            self._obs, self._avail = list(step.obs), None if step.avail is None else list(step.avail)
            self._starts = torch.zeros(self.world.n_envs, device=self.device)
            self._starts[torch.as_tensor(ended, dtype=torch.long)] = 1.0
        for name, collector in self.learners.items():
            collector.finish(buffer.members[name])
        return TeamsCollected(self.rollout_length * self.world.n_envs, episodes, tuple(self.teams))

    def _score(self, envs: list[int], infos: list[dict[str, Any]]) -> None:
        """Each pool player's results: the learner's outcome in each finished episode."""
        for name, player in self.players.items():
            if isinstance(player, PoolPlayer):
                learner = self.opponents_of[name]
                player.record(self._hidden[name], envs, [outcome_of(info, learner) for info in infos])

    def state_dict(self) -> dict[str, Any]:
        return {"started": self.started, "episode_starts": self.world.episode_starts() if self.started else None}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """As ``OnPolicyCollector``'s: the first collect restarts the saved episodes."""
        self._restart = state["episode_starts"] if state["started"] else None

    def close(self) -> None:
        self.world.close()
