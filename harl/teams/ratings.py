"""Skill ratings of the learner and its snapshots from the games they play against each other.

The ratings come from ``openskill``'s Plackett-Luce model (Weng & Lin 2011, a Bayesian
approximation of TrueSkill's kind, with a tie rank for draws) rather than a formula of
harl's own: a well-kept library gets the uncertainty (``sigma``) and draws right, and its
numbers can be compared with other projects'.  ``openskill`` is optional (``harl[teams]``) and
imported only when ``Ratings`` is made, so importing harl never needs it.

Each player is a name (``"learner"``, ``"snapshot_3"``); the state is plain floats, so a
checkpoint holds it and a resumed run rates exactly as an uninterrupted one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from harl.errors import import_extra

OUTCOMES = {1.0: [0, 1], 0.5: [0, 0], 0.0: [1, 0]}
"""A game's outcome for its first player -> openskill's ranks of (first, second): lower ranks won, equal ranks tied."""


class Ratings:
    """Plackett-Luce ratings (``mu``, ``sigma``) by player name; a player new to it starts at the model's prior."""

    def __init__(self) -> None:
        models = import_extra("openskill.models", "rating the learner and its snapshots (harl.teams.ratings)",
                              "teams")
        self._model = models.PlackettLuce()
        self._ratings: dict[str, Any] = {}
        self._games: dict[str, int] = {}

    def _rating(self, name: str) -> Any:
        rating = self._ratings.get(name)
        return rating if rating is not None else self._model.rating(name=name)

    def game(self, a: str, b: str, outcome: float) -> None:
        """Rate one game of ``a`` against ``b``; ``outcome`` for ``a``: 1 a win, 0.5 a draw, 0 a loss."""
        if a == b:
            raise ValueError(f"{a!r} cannot play itself: a game needs two different players")
        ranks = OUTCOMES.get(float(outcome))
        if ranks is None:
            raise ValueError(f"outcome {outcome!r}: expected 1 ({a} won), 0.5 (draw) or 0 ({b} won)")
        [[new_a], [new_b]] = self._model.rate([[self._rating(a)], [self._rating(b)]], ranks=ranks)
        for name, rating in ((a, new_a), (b, new_b)):
            self._ratings[name] = rating
            self._games[name] = self._games.get(name, 0) + 1

    def names(self) -> list[str]:
        """The players rated so far, in the order they first played."""
        return list(self._ratings)

    def games(self, name: str) -> int:
        return self._games.get(name, 0)

    def mu(self, name: str) -> float:
        """The rating's mean: the model's estimate of the player's skill."""
        return float(self._rating(name).mu)

    def sigma(self, name: str) -> float:
        """The rating's uncertainty (its standard deviation); it shrinks as the player plays."""
        return float(self._rating(name).sigma)

    def ordinal(self, name: str) -> float:
        """A conservative skill, ``mu - 3 sigma`` (openskill's ``ordinal``): what a leaderboard sorts by."""
        return float(self._rating(name).ordinal())

    def start_as(self, name: str, like: str) -> None:
        """``name`` joins with ``like``'s rating as it is now (mu and sigma), and no games yet.

        A self-play snapshot is the learner at the moment it is taken, so it starts at the
        learner's rating (LAG's self-play runner enters each new snapshot at the learner's current
        Elo): beating it then moves the learner up only by what it learned since, where a snapshot
        at the model's prior (mu 25) would have been a fresh, unknown player to beat.
        """
        if name == like:
            raise ValueError(f"{name!r} cannot start as itself")
        source = self._rating(like)
        self._ratings[name] = self._model.rating(mu=float(source.mu), sigma=float(source.sigma), name=name)
        self._games[name] = 0

    def forget(self, name: str) -> None:
        """Drop a player (a snapshot evicted from the pool), so the ratings stay as bounded as the pool."""
        self._ratings.pop(name, None)
        self._games.pop(name, None)

    def row(self, prefix: str = "rating", names: Iterable[str] | None = None) -> dict[str, float]:
        """Metrics columns ``<prefix>_<name>`` (mu) and ``<prefix>_<name>_sigma`` for ``names`` (default: all).

        metrics.csv fixes its columns at its first row, so a caller that writes every
        iteration names a fixed set (the learner), not the pool's changing snapshots.
        """
        row: dict[str, float] = {}
        for name in self.names() if names is None else names:
            column = f"{prefix}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}"
            row[column] = self.mu(name)
            row[f"{column}_sigma"] = self.sigma(name)
        return row

    def state_dict(self) -> dict[str, Any]:
        """Plain numbers: ``{"players": {name: {"mu", "sigma", "games"}}}``, in the order they first played."""
        return {"players": {name: {"mu": float(r.mu), "sigma": float(r.sigma), "games": self._games[name]}
                            for name, r in self._ratings.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        players = state["players"]
        self._ratings = {name: self._model.rating(mu=float(p["mu"]), sigma=float(p["sigma"]), name=name)
                         for name, p in players.items()}
        self._games = {name: int(p["games"]) for name, p in players.items()}
