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
vector steps per iteration                  ``[collector] rollout_length``  <-  ``train_interval``
                                            (off_policy)
a schedule in iterations                    ``*_every_iterations``  <-  ``[teams.NAME]
                                            snapshot_every`` (self_play)
where epsilon-greedy exploration is set     ``[collector] epsilon_*``  <-  D3QN's
                                            ``[updater.objective] epsilon_start``, ``epsilon_finish``,
                                            ``epsilon_anneal_steps``, ``epsilon_coin``
what compiles the on-policy update          ``[updater] compile``  <-  ``[policy] compile`` (issue
                                            58; where both are set, the one that is not "off"; "on"
                                            against "auto" is refused; dropped under an updater
                                            without the key, where it did nothing)
==========================================  =====================================================

Kept in two tables on purpose (each stage's own): ``share_parameters`` and ``agent_id`` ([policy]
the actors', [critic] an independent critic's), ``polyak`` ([critic] the critic's targets,
[updater.objective] the target actors').  ``every_iterations`` counts iterations,
``target_update_interval`` gradient steps (EPyMARL's name for another unit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs

from harl import registry
from harl.config.messages import show
from harl.config.teams import ROLE_SLOT
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


def _compile_mode(value: Any) -> Any:
    """``[policy] compile = true / false`` (before issue 49) -> ``"on"`` / ``"off"``."""
    return ("on" if value else "off") if isinstance(value, bool) else value


def _the_compiling_one(old: Any, new: Any) -> Any:
    """``[policy] compile`` beside ``[updater] compile``: the two compiled the same update, so the one that
    asks for a compile is kept where the other says "off" (every resolved pipeline of an older harl has
    both, one at its default); "on" against "auto" is a real disagreement (None: refused)."""
    if old == "off":
        return new
    if new == "off":
        return old
    return None


TEAM = "teams.NAME"
"""A move's table that stands for every ``[teams.NAME]`` table; its kinds are roles (``role = "..."``)."""


@attrs.frozen
class Moved:
    """``[table] old`` of the kinds ``kinds`` is now ``[new_table] new`` (its value through ``convert``).

    A move of a stage's table applies inside a team's own stage tables too (``[teams.NAME.collector]``)
    where the team has both tables of its own; a team that has only the old one is renamed when its
    pipeline (the pipeline's tables, the team's in their place) is structured."""

    table: str
    old: str
    new_table: str
    new: str
    kinds: tuple[str, ...]
    """The table's kinds whose key this was (a user's kind keeps its own keys); the roles for ``TEAM``;
    empty for a table without kinds (``[policy]``)."""
    convert: Callable[[Any], Any] = _same
    into: tuple[str, ...] = ()
    """The new table's kinds that have the key (empty: every kind).  Under any other kind the old key
    did nothing, and is dropped with the warning."""
    agree: Callable[[Any, Any], Any] | None = None
    """Both keys set to different values: ``agree(old, new)`` is the value kept (None: refused, as
    without ``agree``)."""


MOVED = (
    Moved("updater", "tau", "updater", "polyak", ("q_learning",)),
    Moved("critic", "target_tau", "critic", "polyak", ("independent_v",)),
    Moved("updater.objective", "epsilon_end", "collector", "epsilon_finish", ("d3qn",)),
    Moved("updater.objective", "epsilon_decay_steps", "collector", "epsilon_anneal_steps", ("d3qn",)),
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
    Moved("collector", "train_interval", "collector", "rollout_length", ("off_policy",)),
    Moved(TEAM, "snapshot_every", TEAM, "snapshot_every_iterations", ("self_play",)),
    Moved("updater.objective", "epsilon_start", "collector", "epsilon_start", ("d3qn",)),
    Moved("updater.objective", "epsilon_finish", "collector", "epsilon_finish", ("d3qn",)),
    Moved("updater.objective", "epsilon_anneal_steps", "collector", "epsilon_anneal_steps", ("d3qn",)),
    Moved("updater.objective", "epsilon_coin", "collector", "epsilon_coin", ("d3qn",)),
    # issue 58: one switch compiles the update
    Moved("policy", "compile", "updater", "compile", (), _compile_mode, into=("sequential", "simultaneous"),
          agree=_the_compiling_one),
)
"""Every key that moved, with where it went."""

_WARNED: set[tuple[str, str]] = set()

KeyPath = tuple[str, ...]


def _table(data: dict[str, Any], path: KeyPath, make: bool = False) -> dict[str, Any] | None:
    for part in path:
        if not isinstance(data, dict):
            return None
        if part not in data and make:
            data[part] = {}
        data = data.get(part)  # type: ignore[assignment]
    return data if isinstance(data, dict) else None


def _kind(loader: Any, slot: str, table: dict[str, Any]) -> str | None:
    """The kind of ``table``, a table of ``slot`` (its default without ``kind``); a team's role for ``TEAM``."""
    if slot == TEAM:
        role = table.get("role", registry.kinds(ROLE_SLOT)[0].kind)
        return role if isinstance(role, str) else None
    try:
        return str(loader.entry(slot, table).kind)
    except (InvalidSetting, KeyError, ValueError):  # reported where the table is structured
        return None


def _places(data: dict[str, Any], move: Moved) -> Iterator[tuple[KeyPath, KeyPath]]:
    """Where ``move`` applies in ``data``: (the old table's path, the new table's)."""
    teams = data.get("teams")
    own = {name: table for name, table in teams.items() if isinstance(table, dict)} if isinstance(teams, dict) else {}
    if move.table == TEAM:
        yield from ((("teams", name), ("teams", name)) for name in own)
        return
    old, new = tuple(move.table.split(".")), tuple(move.new_table.split("."))
    yield old, new
    for name, table in own.items():  # a team's own tables: where it has both (else its merged pipeline is renamed)
        if old[0] in table and new[0] in table:
            yield ("teams", name, *old), ("teams", name, *new)


def renamed(data: dict[str, Any], loader: Any, source: str,
            origins: dict[tuple[str, ...], str] | None = None) -> dict[str, Any]:
    """``data`` with every old key of ``MOVED`` in its new place (a copy of the tables it touches).

    The old and the new key both set to different values is an error (unless the move ``agree``s
    on one), unless one of them was written by a ``--set`` (``origins``): the ``--set`` wins.
    """
    origins = origins or {}
    for move in MOVED:
        for at, to in list(_places(data, move)):
            data = _move(data, move, at, to, loader, source, origins)
    return data


def _move(data: dict[str, Any], move: Moved, at: KeyPath, to: KeyPath, loader: Any, source: str,
          origins: dict[tuple[str, ...], str]) -> dict[str, Any]:
    """``data`` with ``move`` done from the table at ``at`` to the one at ``to``."""
    table = _table(data, at)
    if table is None or move.old not in table or (move.kinds and _kind(loader, move.table, table) not in move.kinds):
        return data
    into = _kind(loader, move.new_table, _table(data, to) or {}) if move.into else None
    kept = not move.into or into in move.into
    data = _copied(data, at, *([to] if kept else []))
    table = _table(data, at)
    target = _table(data, to, make=True) if kept else {}
    if table is None or target is None:  # a value where a table belongs: reported by validation
        return data
    value = move.convert(table.pop(move.old))
    if (move.table, move.old) not in _WARNED:
        _WARNED.add((move.table, move.old))
        instead = f"[{move.new_table}] {move.new}"
        if not kept:
            instead += f' (under [{move.new_table}] kind = "{into}" it did nothing, and is dropped)'
        deprecated(f"[{move.table}] {move.old}", instead, stacklevel=5)
    if not kept:
        return data
    old_at, new_at = (*at, move.old), (*to, move.new)
    if move.new in target and target[move.new] != value:
        if new_at in origins and old_at not in origins:
            return data
        if old_at not in origins:
            agreed = move.agree(value, target[move.new]) if move.agree is not None else None
            if agreed is None:
                new_key, old_key = ".".join(new_at), ".".join(old_at)
                raise ConfigError(
                    f"{source}: {old_key}: the old spelling of {new_key}, which says {show(target[move.new])}: "
                    f"write only {new_key} = {show(target[move.new])} and remove {old_key} (it says {show(value)})")
            value = agreed
    target[move.new] = value
    if old_at in origins:
        origins[new_at] = origins[old_at]
    return data


def _copied(data: dict[str, Any], *paths: KeyPath) -> dict[str, Any]:
    """``data`` with the tables along ``paths`` copied (the caller's tables are left as they were)."""
    data = dict(data)
    for path in paths:
        holder = data
        for part in path:
            if not isinstance(holder.get(part, {}), dict):
                break
            holder[part] = dict(holder.get(part, {}))
            holder = holder[part]
    return data
