"""Teams that do not learn: a frozen policy, a script, or snapshots from a self-play pool.

A player acts one step at a time and hands back that step's record (``PlayerStep``)::

    step = player.play(obs, avail, deterministic, last, starts)    # last: the previous step's record
    step.actions      # one per agent, as a policy gives them
    step.hidden       # its networks' state for the next step (None: feed-forward, a script)
    step.snapshots    # a self-play team: the pool snapshot that played each env (None: any other)

``last`` is None at the first step (a player starts its own state).  The teams' collector and
``TeamsPolicy`` (evaluation, render) step every player alike and read which snapshot played where
from the record, never from a player's state.  A pool player draws a new snapshot where an episode
starts; ``record`` scores the finished episodes for the pool and the ratings.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Protocol

import attrs
import numpy as np
import torch
from torch import nn

from harl.teams.pool import SnapshotPool
from harl.teams.ratings import Ratings
from harl.teams.snapshot_stack import SnapshotStack, stacks

SNAPSHOT_RATINGS = ("learner", "prior")
"""Where a new snapshot's rating starts (``[teams.NAME] snapshot_rating``)."""


Obs = Sequence[torch.Tensor]
Avail = Sequence[torch.Tensor | None] | None


@attrs.frozen
class PlayerStep:
    """One step of one team's acting (see the module docstring)."""

    actions: list[torch.Tensor]
    hidden: Any = None
    """The networks' state for the next step (a recurrent policy's); None: nothing carried."""
    snapshots: np.ndarray | None = None
    """A self-play team's pool snapshot id per env (``(E,)`` int64) that played this step; None for other teams."""


class Player(Protocol):
    """A team that acts and does not learn (``harl.teams.players``): what the teams' collector and
    ``TeamsPolicy`` call."""

    def play(self, obs: Obs, avail: Avail, deterministic: bool, last: PlayerStep | None,
             starts: torch.Tensor | None) -> PlayerStep: ...


def act_with(policy: Any, obs: Obs, avail: Avail, deterministic: bool, hidden: Any,
             starts: torch.Tensor | None) -> tuple[list[torch.Tensor], Any]:
    """``policy.act`` under the one acting contract: ``(actions, next hidden)``."""
    actions, hidden = policy.act(obs, avail, deterministic, hidden=hidden, starts=starts)
    return list(actions), hidden


def play_policy(policy: Any, obs: Obs, avail: Avail, deterministic: bool, last: PlayerStep | None,
                starts: torch.Tensor | None) -> PlayerStep:
    """A policy (``harl.evaluator.ActingPolicy``) stepped as a player: its state carried in the record."""
    hidden = policy.initial_hidden(obs[0].shape[0], obs[0].device) if last is None else last.hidden
    actions, hidden = act_with(policy, obs, avail, deterministic, hidden, starts)
    return PlayerStep(actions, hidden)


class FrozenPlayer(nn.Module):
    """A trained policy that plays and is never updated (the ``frozen`` role)."""

    def __init__(self, policy: nn.Module, deterministic: bool) -> None:
        super().__init__()
        self.policy = policy.requires_grad_(False)
        self.deterministic = deterministic

    @torch.no_grad()
    def play(self, obs: Obs, avail: Avail, deterministic: bool = False, last: PlayerStep | None = None,
             starts: torch.Tensor | None = None) -> PlayerStep:
        return play_policy(self.policy, obs, avail, self.deterministic or deterministic, last, starts)


class ScriptPlayer(nn.Module):
    """A registered script (the ``scripted`` role, ``[teams.NAME.script] kind``): no state, no weights."""

    def __init__(self, script: Any) -> None:
        super().__init__()
        self.script = script

    @torch.no_grad()
    def play(self, obs: Obs, avail: Avail, deterministic: bool = False, last: PlayerStep | None = None,
             starts: torch.Tensor | None = None) -> PlayerStep:
        n = obs[0].shape[0]
        return PlayerStep(list(self.script.act(list(obs), avail, starts if starts is not None else torch.ones(n))))


class PoolPlayer(nn.Module):
    """Snapshots of the learning team ``learner`` play this team (the ``self_play`` role).

    ``template`` is a network of the learner's shape built on this team's spaces; each snapshot in
    use gets a copy with the snapshot's weights.  The snapshots' weights live in the pool (saved
    with the updater's state), not in this module's parameters.  The updater adds snapshots
    (``add``); the collector scores the games (``record``).
    """

    def __init__(self, template: nn.Module, pool: SnapshotPool, ratings: Ratings | None, learner: str,
                 deterministic: bool, snapshot_rating: str = "learner") -> None:
        super().__init__()
        if snapshot_rating not in SNAPSHOT_RATINGS:
            raise ValueError(f"snapshot_rating = {snapshot_rating!r}: expected one of {', '.join(SNAPSHOT_RATINGS)}")
        self.template = [template.requires_grad_(False)]  # a list: not a submodule, not in state_dict
        self.pool, self.ratings, self.learner, self.deterministic = pool, ratings, learner, deterministic
        self.snapshot_rating = snapshot_rating
        """learner: a new snapshot starts at the learner's rating (mu and sigma) as it is then; prior:
        at openskill's prior, as a player it never met."""
        self._nets: dict[int, nn.Module] = {}
        self._retired: dict[int, dict[str, torch.Tensor]] = {}
        """Evicted snapshots whose training episodes still run."""
        self.batched = stacks(template)
        """Every snapshot acts in one call (``harl.teams.snapshot_stack``); else one call per snapshot."""
        self._stack: tuple[tuple[int, ...], SnapshotStack] | None = None

    def add(self, state: dict[str, torch.Tensor], iteration: int) -> int:
        """A snapshot of the learner's policy into the pool.  One the pool evicts keeps playing the
        training episodes it is in: its weights are kept here until none of them runs (``record``)."""
        before = {k: (self.pool.state(k), self.rating_name(k)) for k in self.pool.ids()}
        snapshot = self.pool.add(state, iteration)
        if self.ratings is not None and self.snapshot_rating == "learner":
            self.ratings.start_as(self.rating_name(snapshot), self.learner)
        for k, (weights, name) in before.items():
            if k not in self.pool:
                self._retired[k] = weights
                if self.ratings is not None:  # its games are over (record drops results against it)
                    self.ratings.forget(name)
        return snapshot

    def retired(self) -> dict[int, dict[str, torch.Tensor]]:
        """The evicted snapshots' weights kept for the training episodes under way (``add``): what a
        checkpoint taken mid-episode holds, so that a resume plays with them as an uninterrupted run."""
        return dict(self._retired)

    def keep_retired(self, retired: dict[int, dict[str, torch.Tensor]]) -> None:
        """``retired()`` of a checkpoint back, after the pool was restored (``reload``)."""
        self._retired.update(retired)
        self._stack = None

    def rating_name(self, snapshot: int) -> str:
        """The snapshot's name in the ratings: ``<learner>@<iteration it was taken at>``."""
        return f"{self.learner}@{self.pool.iteration(snapshot)}"

    def reload(self) -> None:
        """Forget the networks made from snapshots (the pool was restored from a checkpoint)."""
        self._nets.clear()
        self._retired.clear()
        self._stack = None

    def stack(self) -> tuple[tuple[int, ...], SnapshotStack]:
        """Every playable snapshot (kept or retired) as one ``SnapshotStack``, made again when they change."""
        ids = tuple(sorted({*self.pool.ids(), *self._retired}))
        if self._stack is None or self._stack[0] != ids:
            self._stack = (ids, SnapshotStack([self.net(k) for k in ids]))  # type: ignore[misc]
        return self._stack

    def net(self, snapshot: int) -> nn.Module:
        if snapshot not in self._nets:
            net = copy.deepcopy(self.template[0])
            net.load_state_dict(self.pool.state(snapshot) if snapshot in self.pool.ids() else self._retired[snapshot])
            self._nets[snapshot] = net
        return self._nets[snapshot]

    def draw(self, snapshots: np.ndarray | None, starts: torch.Tensor | None, n_envs: int) -> np.ndarray:
        """The snapshot that plays each env this step: the last step's (``snapshots``), and a new one
        drawn from the pool by its rule where an episode starts and at the first step (None), so a
        resumed run draws what an uninterrupted one draws."""
        ids = np.full(n_envs, -1, dtype=np.int64) if snapshots is None else snapshots.copy()
        new = ids < 0 if starts is None else (ids < 0) | (starts.detach().cpu().numpy() > 0)
        fresh = np.flatnonzero(new)
        if fresh.size:
            ids[fresh] = self.pool.sample_ids(int(fresh.size))
        return ids

    @torch.no_grad()
    def play(self, obs: Obs, avail: Avail, deterministic: bool = False, last: PlayerStep | None = None,
             starts: torch.Tensor | None = None) -> PlayerStep:
        n = obs[0].shape[0]
        ids = self.draw(None if last is None else last.snapshots, starts, n)
        inner = self.template[0].initial_hidden(n, obs[0].device) if last is None else last.hidden  # type: ignore[operator]
        deterministic = self.deterministic or deterministic
        if self.batched:
            order, stack = self.stack()
            which = torch.as_tensor(np.searchsorted(order, ids), device=obs[0].device)
            return PlayerStep(stack.act(obs, avail, which, deterministic), inner, ids)
        out: list[torch.Tensor] | None = None
        for snapshot in np.unique(ids).tolist():
            rows = torch.as_tensor(np.flatnonzero(ids == snapshot), device=obs[0].device)
            whole = rows.numel() == n
            sub_obs = obs if whole else [o[rows] for o in obs]
            sub_avail = avail if avail is None or whole else [None if a is None else a[rows] for a in avail]
            sub_hidden = inner if inner is None or whole else inner[rows]
            sub_starts = starts if starts is None or whole else starts[rows]
            actions, sub_hidden = act_with(self.net(snapshot), sub_obs, sub_avail, deterministic, sub_hidden,
                                           sub_starts)
            if whole:
                out, inner = actions, sub_hidden
                break
            if out is None:
                out = [a.new_zeros((n, *a.shape[1:])) for a in actions]
            for full, part in zip(out, actions):
                full[rows] = part
            if inner is not None and sub_hidden is not None:
                inner = inner.clone()
                inner[rows] = sub_hidden
        assert out is not None
        return PlayerStep(out, inner, ids)

    def record(self, snapshots: np.ndarray, envs: Sequence[int], outcomes: Sequence[float]) -> list[float]:
        """The learner's results (1 win, 0.5 draw, 0 loss) in the episodes that just ended in ``envs``,
        played by ``snapshots`` (the step's ``PlayerStep.snapshots``), into the pool and the ratings;
        the results counted (an episode whose snapshot was evicted meanwhile counts for nothing)."""
        ended = set(envs)
        playing = {int(k) for e, k in enumerate(snapshots) if e not in ended}
        for gone in [k for k in {*self._nets, *self._retired} if k not in self.pool.ids() and k not in playing]:
            self._nets.pop(gone, None)  # evicted, and no training episode plays it any more
            self._retired.pop(gone, None)
        counted = []
        for env, outcome in zip(envs, outcomes):
            snapshot = int(snapshots[env])
            if snapshot not in self.pool.ids():
                continue  # evicted while its episode ran
            self.pool.record(snapshot, outcome)
            counted.append(outcome)
            if self.ratings is not None:
                self.ratings.game(self.learner, self.rating_name(snapshot), outcome)
        return counted

    def rating(self) -> tuple[float, float] | None:
        """The learner's openskill rating now, ``(mu, sigma)``; None without ratings."""
        return None if self.ratings is None else (self.ratings.mu(self.learner), self.ratings.sigma(self.learner))


@attrs.frozen
class SelfPlay:
    """A self-play team's pool: the updater adds a snapshot of ``learner`` every ``every`` iterations,
    the collector scores the learner's games against it.  Its metrics columns are the learner's
    (``prefix``: ``red`` in ``red_score``, ``rating_red``; ``pool_columns`` names them)."""

    team: str
    learner: str
    player: PoolPlayer
    every: int
    prefix: str = ""


def pool_columns(plays: Sequence[SelfPlay]) -> list[SelfPlay]:
    """``plays`` with their columns' prefix: the learner's name, or ``<learner>_vs_<team>`` where one
    learner feeds several pools."""
    def prefix(play: SelfPlay) -> str:
        shared = sum(p.learner == play.learner for p in plays) > 1
        return f"{play.learner}_vs_{play.team}" if shared else play.learner
    return [attrs.evolve(play, prefix=prefix(play)) for play in plays]


def outcome_of(info: dict[str, Any], learner: str) -> float:
    """The learner's result in one finished episode, as ``TeamWorld`` scored it: 1 win, 0.5 draw, 0 loss."""
    return 1.0 if info.get(f"win_{learner}") else 0.5 if info.get("draw") else 0.0
