"""Teams that do not learn: a frozen policy, a script, or snapshots from a self-play pool.

Every player acts the way a policy does in evaluation (``harl.evaluator.ActingPolicy``)::

    hidden = player.initial_hidden(n_envs, device)
    actions, hidden = player.act(obs, avail, deterministic, hidden=hidden, starts=starts)

so the collector and the evaluator treat a learning team's policy and a player alike.  A pool
player's ``hidden`` also holds which snapshot plays each env: a new one is drawn where an episode
starts, and ``record`` scores the finished episodes for the pool and the ratings.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from harl.teams.pool import SnapshotPool
from harl.teams.ratings import Ratings
from harl.teams.snapshot_stack import SnapshotStack, stacks

SNAPSHOT_RATINGS = ("learner", "prior")
"""Where a new snapshot's rating starts (``[teams.NAME] snapshot_rating``)."""


def act_with(policy: Any, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
             deterministic: bool, hidden: Any, starts: torch.Tensor | None) -> tuple[list[torch.Tensor], Any]:
    """``policy.act`` under the one acting contract: ``(actions, next hidden)``."""
    actions, hidden = policy.act(obs, avail, deterministic, hidden=hidden, starts=starts)
    return list(actions), hidden


class FrozenPlayer(nn.Module):
    """A trained policy that plays and is never updated (``role = "frozen"``)."""

    def __init__(self, policy: nn.Module, deterministic: bool) -> None:
        super().__init__()
        self.policy = policy.requires_grad_(False)
        self.deterministic = deterministic

    def initial_hidden(self, n_envs: int, device: Any) -> Any:
        return self.policy.initial_hidden(n_envs, device)  # type: ignore[operator]

    @torch.no_grad()
    def act(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
            deterministic: bool = True, hidden: Any = None,
            starts: torch.Tensor | None = None) -> tuple[list[torch.Tensor], Any]:
        return act_with(self.policy, obs, avail, self.deterministic or deterministic, hidden, starts)


class ScriptPlayer(nn.Module):
    """A registered script (``role = "scripted"``, ``[teams.NAME.script] kind``): no state, no weights."""

    def __init__(self, script: Any) -> None:
        super().__init__()
        self.script = script

    def initial_hidden(self, n_envs: int, device: Any) -> None:
        return None

    @torch.no_grad()
    def act(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
            deterministic: bool = True, hidden: Any = None,
            starts: torch.Tensor | None = None) -> tuple[list[torch.Tensor], Any]:
        n = obs[0].shape[0]
        return list(self.script.act(list(obs), avail, starts if starts is not None else torch.ones(n))), None


class PoolPlayer(nn.Module):
    """Snapshots of the learning team ``learner`` play this team (``role = "self_play"``).

    ``template`` is a network of the learner's shape built on this team's spaces; each snapshot in
    use gets a copy with the snapshot's weights.  The snapshots' weights live in the pool (saved
    with the updater's state), not in this module's parameters.
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
        self.games: list[float] = []
        """The learner's results in the episodes finished since the last ``row``."""

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

    def initial_hidden(self, n_envs: int, device: Any) -> tuple[np.ndarray, Any]:
        """No snapshot yet (-1): each env draws one at its first step, as at every episode's start, so
        a resumed run draws what an uninterrupted one draws."""
        return np.full(n_envs, -1, dtype=np.int64), self.template[0].initial_hidden(n_envs, device)  # type: ignore[operator]

    @torch.no_grad()
    def act(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
            deterministic: bool = True, hidden: Any = None,
            starts: torch.Tensor | None = None) -> tuple[list[torch.Tensor], Any]:
        n = obs[0].shape[0]
        ids, inner = hidden if hidden is not None else self.initial_hidden(n, obs[0].device)
        ids = ids.copy()
        new = ids < 0 if starts is None else (ids < 0) | (starts.detach().cpu().numpy() > 0)
        fresh = np.flatnonzero(new)  # a new episode: a new opponent from the pool, by its rule
        if fresh.size:
            ids[fresh] = self.pool.sample_ids(int(fresh.size))
        deterministic = self.deterministic or deterministic
        if self.batched:
            order, stack = self.stack()
            which = torch.as_tensor(np.searchsorted(order, ids), device=obs[0].device)
            return stack.act(obs, avail, which, deterministic), (ids, inner)
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
        return out, (ids, inner)

    def record(self, hidden: Any, envs: Sequence[int], outcomes: Sequence[float]) -> None:
        """The learner's results (1 win, 0.5 draw, 0 loss) in the episodes that just ended in ``envs``."""
        ids = hidden[0]
        ended = set(envs)
        playing = {int(k) for e, k in enumerate(ids) if e not in ended}
        for gone in [k for k in {*self._nets, *self._retired} if k not in self.pool.ids() and k not in playing]:
            self._nets.pop(gone, None)  # evicted, and no training episode plays it any more
            self._retired.pop(gone, None)
        for env, outcome in zip(envs, outcomes):
            snapshot = int(ids[env])
            if snapshot not in self.pool.ids():
                continue  # evicted while its episode ran
            self.pool.record(snapshot, outcome)
            self.games.append(outcome)
            if self.ratings is not None:
                self.ratings.game(self.learner, self.rating_name(snapshot), outcome)

    def row(self, prefix: str) -> dict[str, Any]:
        """The learner's columns, each named after the learner (``prefix``: its name, or
        ``<learner>_vs_<team>`` where one learner feeds several pools): ``{prefix}_pool_size`` (the
        snapshots it plays), ``{prefix}_score`` (its mean result in this iteration's games: 1 a win,
        0.5 a draw), and ``rating_{prefix}`` with ``rating_{prefix}_sigma`` (its openskill rating)."""
        row: dict[str, Any] = {f"{prefix}_pool_size": len(self.pool),
                               f"{prefix}_score": float(np.mean(self.games)) if self.games else None}
        self.games = []
        if self.ratings is not None:  # the learner's columns from the first row on (metrics.csv fixes them)
            row[f"rating_{prefix}"] = self.ratings.mu(self.learner)
            row[f"rating_{prefix}_sigma"] = self.ratings.sigma(self.learner)
        return row


def outcome_of(info: dict[str, Any], learner: str) -> float:
    """The learner's result in one finished episode, as ``TeamWorld`` scored it: 1 win, 0.5 draw, 0 loss."""
    return 1.0 if info.get(f"win_{learner}") else 0.5 if info.get("draw") else 0.0
