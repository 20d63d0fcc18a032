"""The off-policy actor-critic family: replay, Q critics, n-step targets (its named algorithms:
``harl.algorithms.algorithms("off_policy")``).

Its kinds: the ``off_policy`` collector, the ``replay`` buffer, ``n_step`` returns, Q critics and
the ``sac`` / ``td3`` / ``ddpg`` / ``d3qn`` objectives; the updater is ``harl.update.off_policy``'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np
import torch

from harl import registry
from harl.collect.off_policy import EPSILON_KEYS
from harl.collect.stats import CollectStats
from harl.envs.population import split_step
from harl.families import BuiltStages, Family, Need, Population, Problem, Spec, Tables
from harl.families.actor_critic import Wiring, build_actor_critic, sequential_needs_own_actors
from harl.nets.population import Stack
from harl.parts import EnvSpaces
from harl.sizes import human, replay_bytes_per_transition
from harl.update.off_policy import build_off_policy_updater

NAME = "off_policy"

POPULATION_STAGES = {"collector": "off_policy", "buffer": "replay"}
"""The kinds a population steps itself (its collection below); members update one after another."""


def wiring(spec: Spec) -> Wiring:
    collector, objective = spec.collector, spec.updater.objective
    return Wiring(NAME, collector.n_envs, batch_size=spec.buffer.batch_size,
                  warmup_steps=collector.warmup_steps, updates_per_round=collector.updates_per_round,
                  policy_freq=getattr(objective, "policy_freq", 1), precision=spec.run.precision,
                  epsilon=_epsilon(collector))


def _epsilon(collector: Any) -> tuple[float, float, int, str] | None:
    """``[collector]``'s epsilon-greedy schedule (D3QN's exploration); None for a collector without one."""
    if not all(hasattr(collector, key) for key in EPSILON_KEYS):
        return None
    return collector.epsilon_start, collector.epsilon_finish, collector.epsilon_anneal_steps, collector.epsilon_coin


def checks(built: Tables) -> Iterable[Problem]:
    yield from sequential_needs_own_actors(built)
    yield from _epsilon_unread(built)
    policy, collector = built.get("policy"), built["collector"]
    if policy is not None and policy.recurrent != "none":
        yield (["policy", "recurrent"],
               f'"{policy.recurrent}" needs on-policy rollouts, but collector.kind = "{collector.kind}" '
               'has no recurrent actors; set policy.recurrent = "none"')
    if policy is not None and policy.share_parameters:
        yield (["policy", "share_parameters"], "off-policy objectives keep one actor per agent; set "
               "policy.share_parameters = false")


def _epsilon_unread(built: Tables) -> Iterable[Problem]:
    """An epsilon schedule set in ``[collector]`` for an objective that explores otherwise (DDPG's and TD3's
    noise, SAC's sampling) would be silently unread: refused, naming the first such key."""
    collector, objective = built["collector"], getattr(built.get("updater"), "objective", None)
    if objective is None or registry.entry_of(objective).extra("epsilon_greedy", False):
        return
    defaults = attrs.fields_dict(type(collector))
    for key in EPSILON_KEYS:
        if key in defaults and getattr(collector, key) != defaults[key].default:
            yield (["collector", key], f'only an epsilon-greedy objective (d3qn) reads it, and updater.objective.kind = '
                   f'"{registry.kind_name(objective)}" explores its own way; remove collector.{key}')
            return


def _per_transition(spaces: EnvSpaces) -> int:
    return replay_bytes_per_transition(spaces.observation_spaces, spaces.action_spaces,
                                       int(np.prod(spaces.state_space.shape)), spaces.state_space)


def _replay_need(spec: Spec, spaces: EnvSpaces, members: int = 1) -> Need:
    per, capacity = _per_transition(spaces), spec.buffer.capacity
    who = f"{members} members x " if members > 1 else ""
    return Need(f"{who}buffer.capacity = {capacity:,}: the replay buffer ({per:,} bytes per transition x "
                f"{capacity:,} transitions, {human(per * capacity * members)})", per * capacity * members,
                "buffer.capacity" + (" (or train fewer seeds at once)" if who else ""))


def memory(spec: Spec, spaces: EnvSpaces) -> list[Need]:
    return [_replay_need(spec, spaces)]


def save_buffer(spec: Spec) -> bool:
    return bool(spec.checkpoint.replay_buffer)


def describe(stages: BuiltStages) -> dict[str, str]:
    spec = stages.spec
    if registry.kind_name(spec.buffer) != "replay":
        return {}
    per, capacity = _per_transition(stages.venv), spec.buffer.capacity
    return {"buffer": f"capacity {capacity:,}, batch {spec.buffer.batch_size}; memory when full: {per:,} bytes "
                      f"per transition x {capacity:,} = {human(per * capacity)}"}


# ------------------------------------------------------------------ populations (--vectorize)


def population_problems(spec: Spec) -> list[str]:
    found = []
    if spec.run.population_update == "batched":
        found.append('run.population_update = "batched" (off-policy members update one after another: '
                     '"auto" or "per_member")')
    for table, expected in POPULATION_STAGES.items():
        if (got := registry.kind_name(getattr(spec, table))) != expected:
            found.append(f'{table}.kind = "{got}" (off-policy populations: "{expected}")')
    return found


def population_memory(spec: Spec, spaces: EnvSpaces, members: int) -> list[Need]:
    return [_replay_need(spec, spaces, members)]


@torch.no_grad()
def collect_population(population: Any, fresh: bool) -> dict[int, CollectStats]:
    """``rollout_length`` vector steps; warm-up actions from each member's own generator, then
    each agent's explore call batched over the members (``Stack``)."""
    alive, E = population.alive, population.n_envs
    members = [population.trainers[s].stages for s in alive]
    lead = members[0].collector
    for m in members:
        m.collector.begin()
    actors = [Stack([m.policy.actors[i] for m in members]) for i in range(population.venv.n_agents)]
    episodes: dict[int, list[dict[str, Any]]] = {s: [] for s in alive}
    for _ in range(lead.config.rollout_length):
        inputs = [m.collector.inputs() for m in members]
        if lead.warming_up:
            drawn = [m.collector.random_actions(masks) for m, (_, masks) in zip(members, inputs)]
            actions = [torch.stack(per_agent) for per_agent in zip(*drawn)]
        else:
            actions = [actor.call("explore", torch.stack([obs[i] for obs, _ in inputs]),
                                  None if inputs[0][1][i] is None else torch.stack([mask[i] for _, mask in inputs]),
                                  lead.env_steps, random=True)
                       for i, actor in enumerate(actors)]
        env_actions = [population.env_actions(a) for a in actions]
        parts = split_step(population.venv.step(env_actions), population.size, E)
        for m, s in zip(members, alive):
            mine = [a[s * E:(s + 1) * E] for a in env_actions]
            episodes[s].extend(m.collector.record(mine, parts[s], m.buffer))
    for m in members:
        m.collector.end()
    return {s: CollectStats(population.steps, episodes[s]) for s in alive}


FAMILY = registry.register_family(Family(
    NAME, "replay, Q critics and n-step targets",
    lambda spec, parts: build_actor_critic(spec, parts, build_off_policy_updater), wiring, checks, memory,
    save_buffer=save_buffer, describe=describe,
    population=Population(population_problems, population_memory, collect_population),
    defaults={"buffer": "replay", "returns": "n_step", "critic": "q", "updater.objective": "sac"}, rank=1))
