"""HARL's ``env_args`` -> harl's ``[env]`` table (and what an env decides elsewhere).

One function per HARL env name. Each returns an ``EnvPart``: the ``[env]`` table, HARL's task
name (its results path uses it), the action kind where it is known without building the env,
other tables' keys the env decides (SMAC's ``state_type``) and notes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs

from harl.errors import ConfigError

SMAX_MAPS: tuple[str, ...] = ("3m", "8m", "25m", "2s3z", "3s5z", "5m_vs_6m", "10m_vs_11m", "27m_vs_30m",
                              "3s5z_vs_3s6z", "3s_vs_5z", "6h_vs_8z", "smacv2_5_units", "smacv2_10_units",
                              "smacv2_20_units")
"""The maps of jaxmarl's SMAX (its ``MAP_NAME_TO_SCENARIO``)."""

MPE_SCENARIOS = {"simple_spread_v2": "simple_spread", "simple_reference_v2": "simple_reference",
                 "simple_speaker_listener_v3": "simple_speaker_listener"}
"""HARL's pettingzoo 1.22 MPE scenarios -> harl's (``variant = "pettingzoo_1.22"`` has these three)."""

LAG_SCENARIOS = {"1/": "SingleControl", "1v1/": "SingleCombat", "2v2/": "MultipleCombat"}
"""HARL's LAG scenario of a task path, by the path's first part."""

MAMUJOCO_NAMES = {"manyagent_swimmer": "ManySegmentSwimmer", "manyagent_ant": "ManySegmentAnt"}

DEXHANDS = (
    "HARL's dexhands (Bi-DexHands) runs on NVIDIA Isaac Gym, which is not on the package "
    "registries (it is a download behind NVIDIA's licence, for Linux with an NVIDIA GPU and Python "
    "3.6-3.8) and is no longer maintained, so harl has no dexhands environment and cannot run "
    "this config. Its algorithm settings convert: load the same algo_args with another env "
    "(--env mamujoco for a continuous-control robot), or run HARL itself for Bi-DexHands."
)


@attrs.frozen
class EnvPart:
    table: dict[str, Any]
    task: str
    discrete: bool | None
    """True for Discrete actions, False for Box, None where only the built env knows."""
    elsewhere: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    notes: tuple[str, ...] = ()


def _refuse(source: str, key: str, text: str) -> ConfigError:
    return ConfigError(f"{source}: env_args.{key}: {text}")


def _pettingzoo_mpe(e: dict[str, Any], source: str) -> EnvPart:
    scenario = e["scenario"]
    if scenario not in MPE_SCENARIOS:
        raise _refuse(source, "scenario", f'harl has HARL\'s MPE (pettingzoo 1.22 physics) for '
                      f'{", ".join(MPE_SCENARIOS)}, not "{scenario}"; write one of those, or use mpe2\'s '
                      f'scenarios in a harl pipeline ([env] kind = "mpe", variant = "mpe2")')
    table: dict[str, Any] = {"kind": "mpe", "scenario": MPE_SCENARIOS[scenario],
                             "continuous_actions": e["continuous_actions"], "variant": "pettingzoo_1.22"}
    for harl_key, key in (("max_episode_steps", "max_cycles"), ("n_agents", "N"), ("local_ratio", "local_ratio")):
        if key in e:
            table[harl_key] = e[key]
    table.setdefault("max_episode_steps", 25)
    task = f"{scenario}-{'continuous' if e['continuous_actions'] else 'discrete'}"
    return EnvPart(table, task, discrete=not e["continuous_actions"])


def _mamujoco(e: dict[str, Any], source: str) -> EnvPart:
    scenario = re.sub(r"-v\d+$", "", e["scenario"])
    scenario = MAMUJOCO_NAMES.get(scenario, scenario)
    table = {"kind": "mamujoco", "scenario": scenario, "agent_conf": e["agent_conf"],
             "agent_obsk": e["agent_obsk"], "max_episode_steps": e["episode_limit"],
             "observation": "harl", "clip_actions": False}  # what HARL's MaMuJoCo does
    note = (f'MaMuJoCo: "{e["scenario"]}" runs on gymnasium-robotics\' MuJoCo v5 model of {scenario} '
            "(HARL steps the v2 one through mujoco-py); returns are close, not identical")
    return EnvPart(table, f"{e['scenario']}-{e['agent_conf']}", discrete=False, notes=(note,))


def _gym(e: dict[str, Any], source: str) -> EnvPart:
    scenario = e["scenario"]
    notes: tuple[str, ...] = ()
    found = re.match(r"^(Ant|HalfCheetah|Hopper|Humanoid|HumanoidStandup|Walker2d|Swimmer|Reacher|"
                     r"InvertedPendulum|InvertedDoublePendulum|Pusher)-v[234]$", scenario)
    env_id = scenario
    if found:
        env_id = f"{found.group(1)}-v5"
        notes = (f'gym: "{scenario}" runs as gymnasium\'s "{env_id}" (the mujoco-py versions are not '
                 "installable beside the mujoco bindings)",)
    return EnvPart({"kind": "gym", "id": env_id}, scenario, discrete=None, notes=notes)


def _football(e: dict[str, Any], source: str) -> EnvPart:
    from harl.envs.football import SCENARIOS

    name = e["env_name"]
    if name not in SCENARIOS:
        raise _refuse(source, "env_name", f'harl plays the gfootball academy scenarios '
                      f'{", ".join(SCENARIOS)}, not "{name}"; write one of those')
    wanted = e.get("number_of_left_players_agent_controls", SCENARIOS[name])
    if wanted != SCENARIOS[name]:
        raise _refuse(source, "number_of_left_players_agent_controls",
                      f"{name} has {SCENARIOS[name]} agents in harl (HARL's count for it), not {wanted}; "
                      f"write {SCENARIOS[name]} or leave the key out")
    table = {"kind": "football", "scenario": name, "representation": e["representation"],
             "rewards": e["rewards"]}
    return EnvPart(table, name, discrete=True)


def lag_tasks() -> dict[tuple[str, str], str]:
    """HARL's LAG (scenario, task) pairs -> harl's air_combat task names (``harl.envs.air_combat.tasks``)."""
    from harl.envs.air_combat.tasks import HARL_NAMES

    pairs = {}
    for path, name in HARL_NAMES.items():
        scenario = next(s for prefix, s in LAG_SCENARIOS.items() if path.startswith(prefix))
        pairs[(scenario, path)] = name
    return pairs


def _lag(e: dict[str, Any], source: str) -> EnvPart:
    pairs = lag_tasks()
    pair = (e["scenario"], e["task"])
    if pair not in pairs:
        offered = "; ".join(f"{s} {t}" for s, t in pairs)
        raise _refuse(source, "task", f'harl\'s air combat env (JSBSim F-16s) plays HARL\'s LAG tasks as '
                      f'scenario and task pairs: {offered}; HARL\'s "{e["scenario"]}" "{e["task"]}" is not '
                      f'among them: write one of those pairs')
    from harl.envs.air_combat.tasks import COMBAT

    name = pairs[pair]
    table: dict[str, Any] = {"kind": "air_combat", "task": e["task"]}
    spec = COMBAT.get(name)
    notes = ["lag: harl's air combat env is its own JSBSim F-16 code written from LAG's task facts; "
             "its opponents are harl's scripted autopilot and its hierarchical tasks fly harl's own "
             "heading controller, so returns are close to LAG's, not identical"]
    if spec is not None:
        if not spec.hierarchy:
            table["action_type"] = "multidiscrete"  # LAG's MultiDiscrete([41, 41, 41, 30])
        if spec.selfplay:
            table["sides"] = "one_team"
            notes.append(f'lag: {e["task"]} trains every aircraft as one team, as HARL does (sides = '
                         '"one_team"); a harl pipeline with [teams] tables and sides = "two_teams" plays '
                         "red against snapshots of itself (docs/environments/air-combat.md)")
    return EnvPart(table, f"{e['scenario']}-{e['task']}", discrete=None if spec is None else True,
                   notes=tuple(notes))


def _smax_maps() -> str:
    return ", ".join(SMAX_MAPS)


def _smac(e: dict[str, Any], source: str, env: str = "smac") -> EnvPart:
    name = e["map_name"]
    if name not in SMAX_MAPS:
        raise _refuse(source, "map_name", (
            f'{env} needs StarCraft II, which is not installable from the package registries, so harl '
            f'runs SMAC maps on SMAX (jaxmarl\'s JAX rebuild of SMAC, pip install "harl[smax]"), and SMAX '
            f'has no map "{name}". SMAX\'s maps: {_smax_maps()}. Write one of those as map_name '
            f'(for a SMACv2 race map such as protoss_5_vs_5, SMAX\'s smacv2_5_units draws random unit '
            f'types of every race), or run HARL itself for {name}.'))
    table = {"kind": "smax", "scenario": name}
    elsewhere = {"critic": {"state_type": e["state_type"]}} if "state_type" in e else {}
    note = (f'{env}: StarCraft II cannot be installed from the package registries: map "{name}" runs on '
            "SMAX (jaxmarl's JAX rebuild of SMAC, against its heuristic AI); win rates are SMAX's, not SMAC's")
    return EnvPart(table, name, discrete=True, elsewhere=elsewhere, notes=(note,))


def _smacv2(e: dict[str, Any], source: str) -> EnvPart:
    return _smac(e, source, "smacv2")


def _dexhands(e: dict[str, Any], source: str) -> EnvPart:
    raise ConfigError(f"{source}: env dexhands: {DEXHANDS}")


CONVERTERS: dict[str, Callable[[dict[str, Any], str], EnvPart]] = {
    "pettingzoo_mpe": _pettingzoo_mpe, "mamujoco": _mamujoco, "gym": _gym, "football": _football,
    "lag": _lag, "smac": _smac, "smacv2": _smacv2, "dexhands": _dexhands,
}


def convert_env(env: str, env_args: dict[str, Any], source: str) -> EnvPart:
    return CONVERTERS[env](env_args, source)
