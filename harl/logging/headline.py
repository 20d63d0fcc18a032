"""What a teams run shows where a one-team run shows its one return: each team's own.

A one-team run's headline is ``train_return`` and ``eval_return``, the mean return of its agents.
In a world of several teams that mean mixes sides that score against each other (MPE simple_tag:
three predators at +10 a capture each and a prey at -10 a capture average to a number that is
neither side's), so the progress display, ``harl train``'s closing line and ``harl plot``'s
default curves show each team's return instead, read from the columns every teams run writes:

- ``NAME_train_return``: team NAME's return in the iteration's finished training episodes
  (``harl.teams.collector.TeamsCollected``); only a teams run writes columns so named;
- ``return_NAME`` with ``win_NAME`` and ``draw`` in an evaluation's episode numbers
  (``harl.teams.world.TeamWorld``), ``eval_return_NAME`` in metrics.csv.

Kept free of imports beyond the standard library: the progress display reads it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

TRAIN_SUFFIX = "_train_return"


def train_returns(row: Mapping[str, Any]) -> dict[str, Any]:
    """Each team's training return in a metrics row (None where no episode ended), by team; empty
    for a one-team run's row."""
    return {key[:-len(TRAIN_SUFFIX)]: value for key, value in row.items()
            if key.endswith(TRAIN_SUFFIX)}


def team_names(keys: Iterable[str], prefix: str = "") -> list[str]:
    """The teams whose evaluation columns are among ``keys``: ``{prefix}return_NAME`` beside
    ``{prefix}win_NAME`` and ``{prefix}draw`` (prefix ``"eval_"`` in metrics.csv, none in an
    evaluation's numbers)."""
    keys = list(keys)
    if f"{prefix}draw" not in keys:
        return []
    wins = {key[len(prefix) + 4:] for key in keys if key.startswith(f"{prefix}win_")}
    return [key[len(prefix) + 7:] for key in keys
            if key.startswith(f"{prefix}return_") and key[len(prefix) + 7:] in wins]


def eval_returns(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Each team's evaluation return among ``values`` (a metrics row with ``prefix="eval_"``, or
    ``EvalStats.metrics``), by team; empty where the evaluation was not of every team (a one-team run,
    or ``[evaluator] team``: one team alone against the env's own opponent)."""
    return {name: values[f"{prefix}return_{name}"] for name in team_names(values, prefix)}


def show(returns: Mapping[str, Any], digits: int = 2) -> str:
    """``predators 66.00, prey -22.15`` (``-`` where a team has no value)."""
    return ", ".join(f"{name} {_number(value, digits)}" for name, value in returns.items())


def _number(value: Any, digits: int) -> str:
    if value is None or value == "":
        return "-"
    try:
        x = float(value)
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(x) else f"{x:.{digits}f}"
