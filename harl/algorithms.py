"""The named algorithms: which stage kinds make HAPPO, IPPO, QMIX, ... in one table.

Everything that names an algorithm reads this table, so none can drift from another:
``harl stages families`` (each family's algorithms), ``harl compare`` (a run's algorithm from its
``pipeline.toml``), the run and sweep directory names (``--set updater.kind=simultaneous`` on a
``happo-...`` pipeline runs MAPPO), and the algorithm tables of README.md, docs/index.md and
docs/algorithms.md (``markdown_table()``; tests/test_algorithms.py checks the three).  A new
algorithm (MAT, a user's) is one ``register_algorithm(Algorithm(...))``.

Layer 0: it imports nothing from harl, so the lowest modules may use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs


@attrs.frozen
class Kinds:
    """The stage kinds that tell one algorithm from another (buffer and returns do not: IPPO
    with EPyMARL's ``n_step_v`` returns is still IPPO)."""

    collector: str
    critic: str
    twin: bool
    updater: str
    objective: str


@attrs.frozen
class Algorithm:
    """One named algorithm: the stage kinds of its pipeline and a shipped example of it."""

    name: str
    family: str
    collector: str
    buffer: str
    returns: str
    critic: str
    updater: str
    objective: str
    description: str
    """One line: what it is."""
    example: str
    """A shipped pipeline of it, relative to the repository (``pipelines/happo_mpe_spread.toml``)."""
    twin: bool = False
    """The critic holds twin networks (``[critic] twin = true``): the table's ``(twin)``."""

    @property
    def kinds(self) -> Kinds:
        return Kinds(self.collector, self.critic, self.twin, self.updater, self.objective)


_ALGORITHMS: dict[str, Algorithm] = {}


def register_algorithm(algorithm: Algorithm) -> Algorithm:
    """Add (or, under a name already there, replace) a named algorithm; returns it."""
    _ALGORITHMS[algorithm.name] = algorithm
    return algorithm


def algorithms(family: str | None = None) -> list[Algorithm]:
    """The named algorithms in the order they were registered (``family``: only its own)."""
    return [a for a in _ALGORITHMS.values() if family is None or a.family == family]


def kinds_of(pipeline: Mapping[str, Any]) -> Kinds:
    """The kinds of a pipeline's tables (a parsed ``pipeline.toml``); a missing key reads ``""``
    (``twin``: false), which ``name_of`` then does not require to match."""
    def table(*path: str) -> Mapping[str, Any]:
        found: Any = pipeline
        for key in path:
            found = found.get(key, {}) if isinstance(found, Mapping) else {}
        return found if isinstance(found, Mapping) else {}

    return Kinds(str(table("collector").get("kind", "")), str(table("critic").get("kind", "")),
                 bool(table("critic").get("twin", False)), str(table("updater").get("kind", "")),
                 str(table("updater", "objective").get("kind", "")))


def name_of(kinds: Kinds) -> str | None:
    """The algorithm these kinds make, or None.  An unnamed kind (``""``: a hand-written table
    without it) matches any; a twin setting the table does not name is still the algorithm
    (HASAC with one critic is HASAC); without a critic kind, the family's default critic's."""
    def fits(a: Algorithm, twin: bool) -> bool:
        pairs = ((a.collector, kinds.collector), (a.critic, kinds.critic), (a.updater, kinds.updater),
                 (a.objective, kinds.objective))
        return all(theirs in ("", mine) for mine, theirs in pairs) and (not twin or a.twin == kinds.twin)

    for twin in (True, False):
        found = [a for a in _ALGORITHMS.values() if fits(a, twin)]
        if len(found) > 1:
            found = [a for a in found if a.critic in DEFAULT_CRITICS]
        if found:
            return found[0].name if len(found) == 1 else None
    return None


DEFAULT_CRITICS = ("v", "q", "qmix")
"""Each family's ``[critic] kind`` where a pipeline names none (on-policy, off-policy, value)."""


def rename(run_name: str, kinds: Kinds) -> str:
    """``run_name`` with its algorithm word replaced by the algorithm ``kinds`` make, when they
    differ (``happo-mpe-spread`` run as MAPPO: ``mappo-mpe-spread``); unchanged otherwise."""
    ran = name_of(kinds)
    names = {a.name.lower() for a in _ALGORITHMS.values()}
    words = re.split(r"([-_.+])", run_name)
    if ran is None or not any(w.lower() in names for w in words):
        return run_name
    return "".join(ran.lower() if w.lower() in names else w for w in words)


COLUMNS = ("algorithm", "collector", "buffer", "returns", "critic", "updater", "objective")


def markdown_table() -> str:
    """The algorithm table of README.md, docs/index.md and docs/algorithms.md, one row per
    algorithm, columns padded so the source reads as a table too."""
    rows = [[a.name, a.collector, a.buffer, a.returns, a.critic + (" (twin)" if a.twin else ""),
             a.updater, a.objective] for a in _ALGORITHMS.values()]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]

    def line(cells: list[str] | tuple[str, ...]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join([line(COLUMNS), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *(line(r) for r in rows)]) + "\n"


def _on(name: str, critic: str, updater: str, objective: str, description: str, example: str) -> None:
    register_algorithm(Algorithm(name, "on_policy", "on_policy", "rollout", "gae", critic, updater, objective,
                                 description, f"pipelines/{example}.toml"))


def _off(name: str, critic: str, twin: bool, updater: str, objective: str, description: str, example: str) -> None:
    register_algorithm(Algorithm(name, "off_policy", "off_policy", "replay", "n_step", critic, updater, objective,
                                 description, f"pipelines/{example}.toml", twin))


def _value(name: str, mixer: str, description: str, example: str) -> None:
    register_algorithm(Algorithm(name, "value", "episodes", "episodes", "episode_td", mixer, "q_learning",
                                 "joint_td", description, f"pipelines/{example}.toml"))


_on("HAPPO", "v", "sequential", "ppo", "PPO's clipped objective, agents updated one after another", "happo_mpe_spread")
_on("HATRPO", "v", "sequential", "trpo", "a trust-region step per agent, one after another", "hatrpo_mpe_spread")
_on("HAA2C", "v", "sequential", "a2c", "the advantage actor-critic, agents one after another", "haa2c_mpe_spread")
_on("MAPPO", "v", "simultaneous", "ppo", "PPO with a centralised V critic, agents updated together", "mappo_mpe_spread")
_on("MAA2C", "v", "simultaneous", "a2c", "A2C with a centralised V critic, agents updated together", "maa2c_mpe_spread")
_on("IPPO", "independent_v", "simultaneous", "ppo", "PPO, each agent's V of its own observation", "ippo_mpe_spread")
_on("IA2C", "independent_v", "simultaneous", "a2c", "A2C, each agent's V of its own observation", "ia2c_mpe_spread")
_on("MAT", "mat_v", "joint", "mat", "the Multi-Agent Transformer: an encoder's per-agent values, actions decoded "
    "one agent after another, one PPO loss", "mat_mpe_spread")
_on("MAT-Dec", "mat_v", "joint", "mat_dec", "MAT's encoder and values, an MLP decoder on each agent's own "
    "observation (one shared by all, as MAT)", "matdec_smax_3m")
_on("Sable", "sable_v", "joint", "sable", "retention over agents and time: an encoder's per-agent values, actions "
    "decoded one agent after another, memory linear in agents, one PPO loss", "sable_mpe_torch_spread")
_off("HASAC", "q", True, "sequential", "sac", "soft actor-critic with twin Q critics, agents one after another",
     "hasac_mpe_spread")
_off("HATD3", "q", True, "sequential", "td3", "TD3 (twin Q, delayed, smoothed targets), agents one after another",
     "hatd3_mpe_spread")
_off("HADDPG", "q", False, "sequential", "ddpg", "DDPG with one Q critic, agents one after another",
     "haddpg_mpe_spread")
_off("HAD3QN", "joint_q", False, "sequential", "d3qn", "dueling double Q per agent toward the joint greedy "
     "action's value, one after another", "had3qn_mpe_spread_discrete")
_off("MASAC", "q", True, "simultaneous", "sac", "soft actor-critic with a centralised twin Q, agents together",
     "masac_mpe_spread")
_off("MATD3", "q", True, "simultaneous", "td3", "TD3 with a centralised twin Q, agents together", "matd3_mpe_spread")
_off("MADDPG", "q", False, "simultaneous", "ddpg", "DDPG with a centralised Q, agents together", "maddpg_mpe_spread")
_off("ISAC", "independent_q", True, "simultaneous", "sac", "SAC, each agent's twin Q of its own observation "
     "and action", "isac_mpe_spread")
_off("IDDPG", "independent_q", False, "simultaneous", "ddpg", "DDPG, each agent's Q of its own observation "
     "and action", "iddpg_mpe_spread")
_off("ITD3", "independent_q", True, "simultaneous", "td3", "TD3, each agent's twin Q of its own observation "
     "and action", "itd3_mpe_spread")
_value("IQL", "none", "independent Q-learners: each agent's Q, no mixer", "iql_lbf")
_value("VDN", "vdn", "the team's Q as the sum of the agents' Qs", "vdn_lbf")
_value("QMIX", "qmix", "the team's Q as a monotonic mix of the agents' Qs, conditioned on the state",
       "qmix_mpe_spread_discrete")


def _pqn(name: str, mixer: str, description: str, example: str) -> None:
    register_algorithm(Algorithm(name, "pqn", "pqn", "pqn", "q_lambda", mixer, "pqn", "pqn_q", description,
                                 f"pipelines/{example}.toml"))


_pqn("PQN-VDN", "vdn", "parallelised Q-learning: many envs, lambda-returns from max Q, no replay or target "
     "network; the team's Q as the sum of the agents'", "pqn-vdn_mpe_torch_spread")
_pqn("PQN-IQL", "none", "parallelised Q-learning with each agent's own Q on the team's return",
     "pqn-iql_mpe_torch_spread")
