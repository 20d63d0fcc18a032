"""Agent names and groups of an env or vector env, with defaults where it declares none.

Both attributes are optional on an env (``harl.envs.protocol.MultiAgentEnv``) and on a vector
env, which takes them from its envs (a worker backend asks its workers at start-up):

- ``agent_names``: one name per agent, in agent order (mpe2's ``adversary_0``, PettingZoo's
  ``possible_agents``); default ``agent_0 .. agent_{n-1}``;
- ``agent_groups``: the env's own sides, each a name mapping to its agents' names in agent
  order (``{"adversary": ["adversary_0", ...], "agent": ["agent_0"]}``); default ``{}``.

Call ``agent_names(venv)`` / ``agent_groups(venv)`` rather than reading the attributes: they
fill in the defaults and check that what an env declares is consistent.
"""

from __future__ import annotations

from typing import Any


def default_names(n_agents: int) -> list[str]:
    """``agent_0 .. agent_{n-1}``: the names of an env that declares none."""
    return [f"agent_{i}" for i in range(n_agents)]


def agent_names(env: Any) -> list[str]:
    """The agents' names, in agent order (an env's or vector env's ``agent_names``, else the defaults)."""
    n_agents = int(env.n_agents)
    declared = getattr(env, "agent_names", None)
    if declared is None:
        return default_names(n_agents)
    names = [str(name) for name in declared]
    if len(names) != n_agents:
        raise ValueError(f"{type(env).__name__}.agent_names has {len(names)} names for {n_agents} agents")
    if len(set(names)) != len(names):
        raise ValueError(f"{type(env).__name__}.agent_names repeats a name: {names}")
    return names


def agent_groups(env: Any) -> dict[str, list[str]]:
    """The env's own groups of agents (its ``agent_groups``, else ``{}``), each in agent order."""
    declared = getattr(env, "agent_groups", None)
    if not declared:
        return {}
    names = agent_names(env)
    order = {name: i for i, name in enumerate(names)}
    groups: dict[str, list[str]] = {}
    for group, members in declared.items():
        unknown = [m for m in members if m not in order]
        if unknown:
            raise ValueError(f"{type(env).__name__}.agent_groups[{group!r}] names agents it does not have: "
                             f"{unknown} (its agents: {names})")
        groups[str(group)] = sorted((str(m) for m in members), key=order.__getitem__)
    return groups


def groups_by_prefix(names: list[str]) -> dict[str, list[str]]:
    """Names grouped by what comes before their last ``_`` (``piston_3`` -> ``piston``; a name without
    one is its own group), groups in order of first appearance."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name.rsplit("_", 1)[0], []).append(name)
    return groups


def group_indices(names: list[str], groups: dict[str, list[str]]) -> list[list[int]]:
    """Each group's agents as indices into ``names``."""
    order = {name: i for i, name in enumerate(names)}
    return [[order[m] for m in members] for members in groups.values()]
