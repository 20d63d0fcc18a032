"""One world, several teams: which agents each team holds, and the world's steps seen by each team.

``resolve_teams`` turns each team's ``agents`` (names, patterns, the env's group names) into
agent indices and refuses an agent claimed twice or by nobody.  ``TeamWorld`` wraps the world's
vector env: it gives each team's agents the team's reward (``reward = "sum"``: the sum over the
team's agents) and adds each team's return to the episode infos (``return_NAME``), so training
and evaluation read every team's return the way they read the world's.  ``team_view`` is what a
team's stages are built on: its agents' spaces, nothing stepped.

A team's return is the reward its agents are trained on, summed over the episode and averaged
over the team's agents: with ``reward = "sum"`` the team's summed rewards (MPE simple_tag's three
predators: 30 a capture), with ``"own"`` the mean of its agents' own.  An env that reports each of
its groups' returns itself (MPE's ``return_adversary``: each agent's own reward, averaged over the
side, 10 a capture) has those renamed ``return_per_agent_GROUP`` in a teams world, so the two
numbers are not read as one.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import torch
from gymnasium import spaces

from harl.envs.names import agent_groups, agent_names
from harl.envs.protocol import VectorEnv, VectorStep
from harl.errors import ConfigError


@attrs.frozen
class TeamAgents:
    """One team's agents in the world: indices in the world's agent order, and how it is rewarded."""

    name: str
    indices: tuple[int, ...]
    reward: str = "sum"

    def take(self, per_agent: Sequence[Any] | None) -> list[Any] | None:
        """This team's entries of a per-agent list (observations, masks, actions)."""
        return None if per_agent is None else [per_agent[i] for i in self.indices]


def resolve_teams(claims: Sequence[tuple[str, Sequence[str], str]], names: list[str],
                  groups: dict[str, list[str]], source: str = "pipeline") -> list[TeamAgents]:
    """(team, agents as written, reward) -> each team's agent indices; every agent in exactly one team."""
    owner: dict[int, str] = {}
    teams, problems = [], []
    for team, patterns, reward in claims:
        picked: list[int] = []
        for pattern in patterns:
            members = groups.get(pattern) or [n for n in names if fnmatch.fnmatchcase(n, pattern)]
            if not members:
                problems.append(f"teams.{team}.agents: {pattern!r} names no agent; the world's agents are "
                                f"{', '.join(names)}" + (f" and its groups {', '.join(groups)}" if groups else ""))
            for member in members:
                i = names.index(member)
                if i in owner and owner[i] != team:
                    problems.append(f"teams.{team}.agents: {member} is already in team {owner[i]!r}; "
                                    "give each agent to one team")
                elif i not in picked:
                    owner[i] = team
                    picked.append(i)
        teams.append(TeamAgents(team, tuple(sorted(picked)), reward))
    orphans = [names[i] for i in range(len(names)) if i not in owner]
    if orphans:
        problems.append(f"teams: {', '.join(orphans)} in no team; add them to a team's agents "
                        '(a pattern such as "agent_*" or a group name)')
    if problems:
        raise ConfigError("\n".join(f"{source}: {p}" for p in problems))
    return teams


@attrs.frozen
class TeamView:
    """A team's side of the world, as its stages are built on it (spaces and sizes; not stepped)."""

    n_envs: int
    n_agents: int
    observation_spaces: list[spaces.Box]
    action_spaces: list[spaces.Space[Any]]
    state_space: spaces.Box
    agent_names: list[str]
    tensor_native: bool = False
    device: Any = None


def team_view(venv: VectorEnv, team: TeamAgents) -> TeamView:
    names = agent_names(venv)
    return TeamView(venv.n_envs, len(team.indices), [venv.observation_spaces[i] for i in team.indices],
                    [venv.action_spaces[i] for i in team.indices], venv.state_space,
                    [names[i] for i in team.indices], bool(getattr(venv, "tensor_native", False)),
                    getattr(venv, "device", None))


def team_step(step: VectorStep, team: TeamAgents) -> VectorStep:
    """The world's step as one team sees it: its agents' observations, masks, rewards and activity."""
    idx = list(team.indices)
    return VectorStep(
        obs=[step.obs[i] for i in idx], state=step.state, avail=team.take(step.avail),
        rewards=step.rewards[:, idx], terminated=step.terminated, truncated=step.truncated,
        active=step.active[:, idx], final_state=step.final_state, episode_infos=step.episode_infos,
        final_obs=team.take(step.final_obs), final_avail=team.take(step.final_avail))


class TeamWorld:
    """The world's vector env with each team's reward and return (see the module docstring).

    Everything else (reset, restart, RNG states, close, spaces) is the world's own.
    """

    def __init__(self, venv: VectorEnv, teams: Sequence[TeamAgents]) -> None:
        self.venv = venv
        self.teams = list(teams)
        self.returns = np.zeros((venv.n_envs, len(self.teams)))
        """Each env's running return of each team (env x team) in the episode under way."""
        names, groups = agent_names(venv), agent_groups(venv)
        self._sides = {t.name: {g for g, members in groups.items()
                                if {names[i] for i in t.indices} <= set(members)} for t in self.teams}
        """Team -> the env's groups that hold all its agents (an env's ``winner`` names a group)."""
        self._group_names = set(groups)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.venv, name)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        self.returns[:] = 0.0
        return self.venv.reset(*args, **kwargs)

    def restart(self, *args: Any, **kwargs: Any) -> Any:
        self.returns[:] = 0.0
        return self.venv.restart(*args, **kwargs)

    def step(self, actions: Sequence[Any]) -> VectorStep:
        step = self.venv.step(actions)
        rewards = step.rewards
        native = isinstance(rewards, torch.Tensor)
        shaped: Any = rewards.clone() if isinstance(rewards, torch.Tensor) else np.array(rewards, copy=True)
        means = np.empty((self.venv.n_envs, len(self.teams)))
        for k, team in enumerate(self.teams):
            own = rewards[:, list(team.indices)]
            if team.reward == "sum":
                shaped[:, list(team.indices)] = own.sum(1, keepdim=True) if isinstance(own, torch.Tensor) \
                    else own.sum(1, keepdims=True)
            team_mean = shaped[:, list(team.indices)].mean(1)
            means[:, k] = team_mean.double().cpu().numpy() if native else team_mean
        self.returns += means
        ended = np.flatnonzero(_as_numpy(step.terminated) | _as_numpy(step.truncated))
        infos = []
        for k, info in zip(ended.tolist(), step.episode_infos):  # one per ended env, in env order
            returns = {t.name: float(self.returns[k, j]) for j, t in enumerate(self.teams)}
            env_own = {(f"return_per_agent_{key[7:]}" if key.startswith("return_") and key[7:] in self._group_names
                        else key): value for key, value in info.items()}
            infos.append({**env_own, **{f"return_{name}": value for name, value in returns.items()},
                          **self.outcome(info, returns)})
            self.returns[k] = 0.0
        step.rewards, step.episode_infos = shaped, infos
        return step

    def outcome(self, info: dict[str, Any], returns: dict[str, float]) -> dict[str, float]:
        """Each team's result in one finished episode: ``win_NAME`` (1 or 0) and ``draw`` (1 or 0).

        The first rule that applies (docs/teams.md, "Who wins a game"):

        1. the env's own verdict, ``winner`` (a group's or a team's name, "" for a draw): SMAX,
           air combat;
        2. a game whose score is not its returns (``verdict``): MPE's predator-prey scenarios;
        3. else the team with the highest return wins (a tie for the highest: a draw).
        """
        winner = info.get("winner")
        if not isinstance(winner, str):  # a verdict's group that no team holds whole: the returns decide
            found = verdict(info, self._group_names)
            winner = found if any(found in self._sides[t.name] for t in self.teams) else None
        if isinstance(winner, str):
            won = [t.name for t in self.teams if winner and (winner == t.name or winner in self._sides[t.name])]
        else:
            best = max(returns.values())
            won = [name for name, value in returns.items() if value == best]
        single = won[0] if len(won) == 1 else None
        return {**{f"win_{t.name}": float(t.name == single) for t in self.teams}, "draw": float(single is None)}


PREDATORS, PREY = "adversary", "agent"
"""MPE's two sides in its predator-prey scenarios (simple_tag, simple_world_comm)."""


def verdict(info: dict[str, Any], groups: set[str]) -> str | None:
    """The winning group of an episode whose env scores it by something other than the returns, or None.

    MPE's predator-prey scenarios (their episodes report ``captures``, and the sides are
    ``adversary`` and ``agent``): the predators win an episode with at least one capture, the prey
    one without.  By the returns alone the prey could never win (it earns 0 at best, the
    predators 0 at worst), so every episode would be the predators' or a draw.
    """
    if "captures" in info and {PREDATORS, PREY} <= groups:
        return PREDATORS if float(info["captures"]) > 0 else PREY
    return None


def _as_numpy(value: Any) -> np.ndarray:
    return value.cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
