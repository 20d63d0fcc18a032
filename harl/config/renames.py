"""Keys that changed name or table: read in their old place, with a ``HarlDeprecationWarning``.

One vocabulary across the families (issue 44): the target networks' rate is ``polyak``
everywhere, exploration falls from ``epsilon_start`` to ``epsilon_finish`` over
``epsilon_anneal_steps`` wherever epsilon appears, and every family sets the networks that act
in ``[policy]`` (the value family's agent Q networks were set in ``[updater.objective]``, their
width as ``hidden_dim``).  ``renamed`` moves an old key of the raw tables to its new place
before validation (a pipeline file, a ``--set`` and the ``pipeline.toml`` of a run made by an
older harl all pass through it), so the spec, ``harl stages`` and a resolved pipeline know only
the new names.  Each old key warns once per process, naming the new key and ``REMOVED_IN``.

One name per concept (issue 55; docs/pipelines.md#one-name-per-concept says why each):

==========================================  =====================================================
concept                                     the one name  <-  old names (kinds)
==========================================  =====================================================
gradient-norm clip                          ``max_grad_norm``  <-  ``[updater.objective]
                                            grad_norm_clip`` (joint_td)
an episode's time limit                     ``[env] max_episode_steps``  <-  ``max_cycles`` (mpe,
                                            mpe_torch), ``max_steps`` (smax, vmas, air_combat);
                                            each env passes it on in its package's own word
                                            (PettingZoo's max_cycles, VMAS's / jaxmarl's
                                            max_steps); ``[env.kwargs]`` keeps the package's names
a coefficient                               ``*_coef``  <-  ``backtrack_coeff`` (trpo)
when the value family's gradient steps come ``[updater] update_timing``  <-  ``timing``
                                            (q_learning), as ``[collector] epsilon_timing``
running reward standardisation              ``[returns] reward_norm``  <-  ``[returns]
                                            standardise_rewards`` (n_step_v), ``[updater.objective]
                                            standardise_rewards`` (joint_td: to episode_td's table)
SMAX's state scaled into [0, 1]             ``[env] state_norm``  <-  ``normalise_state`` (smax)
a target network's rate                     ``polyak``  <-  ``tau``, ``target_tau`` (issue 44)
epsilon's schedule                          ``epsilon_finish``, ``epsilon_anneal_steps``  <-
                                            ``epsilon_end``, ``epsilon_decay_steps`` (issue 44)
==========================================  =====================================================

Kept in two tables on purpose (each stage's own): ``share_parameters`` and ``agent_id`` ([policy]
the actors', [critic] an independent critic's), ``polyak`` ([critic] the critic's targets,
[updater.objective] the target actors').  ``every_iterations`` counts iterations,
``target_update_interval`` gradient steps (EPyMARL's name for another unit).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from harl.config.messages import show
from harl.errors import ConfigError, deprecated
from harl.settings import InvalidSetting


def _same(value: Any) -> Any:
    return value


def _one_width(value: Any) -> Any:
    """``hidden_dim = 64`` -> ``hidden_sizes = [64]`` (anything else is left for validation to report)."""
    return [value] if isinstance(value, int) and not isinstance(value, bool) else value


def _gru(value: Any) -> Any:
    """The value family's ``recurrent = true / false`` -> ``"naive"`` / ``"none"``, as ``[policy]`` says it."""
    return ("naive" if value else "none") if isinstance(value, bool) else value


@attrs.frozen
class Moved:
    """``[table] old`` of the kinds ``kinds`` is now ``[new_table] new`` (its value through ``convert``)."""

    table: str
    old: str
    new_table: str
    new: str
    kinds: tuple[str, ...]
    """The table's kinds whose key this was (a user's kind keeps its own keys)."""
    convert: Callable[[Any], Any] = _same


MOVED = (
    Moved("updater", "tau", "updater", "polyak", ("q_learning",)),
    Moved("critic", "target_tau", "critic", "polyak", ("independent_v",)),
    Moved("updater.objective", "epsilon_end", "updater.objective", "epsilon_finish", ("d3qn",)),
    Moved("updater.objective", "epsilon_decay_steps", "updater.objective", "epsilon_anneal_steps", ("d3qn",)),
    Moved("updater.objective", "hidden_dim", "policy", "hidden_sizes", ("joint_td",), _one_width),
    Moved("updater.objective", "recurrent", "policy", "recurrent", ("joint_td",), _gru),
    Moved("updater.objective", "share_parameters", "policy", "share_parameters", ("joint_td",)),
    Moved("updater.objective", "agent_id", "policy", "agent_id", ("joint_td",)),
    Moved("updater.objective", "last_action", "policy", "last_action", ("joint_td",)),
    # issue 55: one name per concept
    Moved("updater.objective", "grad_norm_clip", "updater.objective", "max_grad_norm", ("joint_td",)),
    Moved("updater.objective", "backtrack_coeff", "updater.objective", "backtrack_coef", ("trpo",)),
    Moved("updater", "timing", "updater", "update_timing", ("q_learning",)),
    Moved("updater.objective", "standardise_rewards", "returns", "reward_norm", ("joint_td",)),
    Moved("returns", "standardise_rewards", "returns", "reward_norm", ("n_step_v",)),
    Moved("env", "normalise_state", "env", "state_norm", ("smax",)),
    Moved("env", "max_cycles", "env", "max_episode_steps", ("mpe", "mpe_torch")),
    Moved("env", "max_steps", "env", "max_episode_steps", ("smax", "vmas", "air_combat")),
)
"""Every key that moved, with where it went."""

_WARNED: set[tuple[str, str]] = set()


def _table(data: dict[str, Any], path: str, make: bool = False) -> dict[str, Any] | None:
    for part in path.split("."):
        if not isinstance(data, dict):
            return None
        if part not in data and make:
            data[part] = {}
        data = data.get(part)  # type: ignore[assignment]
    return data if isinstance(data, dict) else None


def _kind(loader: Any, slot: str, table: dict[str, Any]) -> str | None:
    try:
        return str(loader.entry(slot, table).kind)
    except (InvalidSetting, KeyError, ValueError):  # reported where the table is structured
        return None


def renamed(data: dict[str, Any], loader: Any, source: str,
            origins: dict[tuple[str, ...], str] | None = None) -> dict[str, Any]:
    """``data`` with every old key of ``MOVED`` in its new place (a copy of the tables it touches).

    The old and the new key both set to different values is an error, unless one of them was
    written by a ``--set`` (``origins``): the ``--set`` wins.
    """
    origins = origins or {}
    for move in MOVED:
        table = _table(data, move.table)
        if table is None or move.old not in table or _kind(loader, move.table, table) not in move.kinds:
            continue
        data = _copied(data, move.table, move.new_table)
        table = _table(data, move.table)
        target = _table(data, move.new_table, make=True)
        if table is None or target is None:  # a value where a table belongs: reported by validation
            continue
        value = move.convert(table.pop(move.old))
        old_at, new_at = (*move.table.split("."), move.old), (*move.new_table.split("."), move.new)
        if (move.table, move.old) not in _WARNED:
            _WARNED.add((move.table, move.old))
            deprecated(f"[{move.table}] {move.old}", f"[{move.new_table}] {move.new}", stacklevel=4)
        if move.new in target and target[move.new] != value:
            if new_at in origins and old_at not in origins:
                continue
            if old_at not in origins:
                raise ConfigError(
                    f"{source}: {move.table}.{move.old}: the old spelling of {move.new_table}.{move.new}, which says "
                    f"{show(target[move.new])}: write only {move.new_table}.{move.new} = {show(target[move.new])} "
                    f"and remove {move.table}.{move.old} (it says {show(value)})")
        target[move.new] = value
        if old_at in origins:
            origins[new_at] = origins[old_at]
    return data


def _copied(data: dict[str, Any], *paths: str) -> dict[str, Any]:
    """``data`` with the tables along ``paths`` copied (the caller's tables are left as they were)."""
    data = dict(data)
    for path in paths:
        holder = data
        for part in path.split("."):
            if not isinstance(holder.get(part, {}), dict):
                break
            holder[part] = dict(holder.get(part, {}))
            holder = holder[part]
    return data
