"""The on-policy actor-critic family: rollouts, a V critic, advantages (its named algorithms:
``harl.algorithms.algorithms("on_policy")``).

Its kinds: the ``on_policy`` collector, the ``rollout`` buffer, ``gae`` returns, V critics and
the ``ppo`` / ``trpo`` / ``a2c`` objectives; the updater is ``harl.update.on_policy``'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from harl import registry
from harl.collect.on_policy import Acting
from harl.collect.stats import CollectStats
from harl.envs.population import split_step
from harl.families import Family, Need, Population, Problem, Spec, Tables
from harl.families.actor_critic import Wiring, build_actor_critic, build_policy, sequential_needs_own_actors
from harl.nets.population import Stack
from harl.parts import EnvSpaces
from harl.sizes import UPDATE_FACTOR, human, planned_record_bytes, record_field_bytes, rollout_bytes_per_step
from harl.update.on_policy import build_on_policy_updater

NAME = "on_policy"

BATCHED_OBJECTIVES = ("ppo", "a2c")
"""Objectives whose learner is the ratio-surrogate loop (``SurrogateLearner``) that a population
updates in batched calls (``harl.population.update``); TRPO's line search is not (yet)."""

POPULATION_STAGES = {"collector": "on_policy", "buffer": "rollout", "critic": "v"}
"""The kinds a population steps itself (its collection below) and evaluates batched."""


def wiring(spec: Spec) -> Wiring:
    collector, policy = spec.collector, spec.policy
    length = {"none": 0, "naive": collector.rollout_length, "chunked": policy.chunk_length}[policy.recurrent]
    return Wiring(NAME, collector.n_envs, collector.rollout_length, length,
                  getattr(spec.critic, "state_type", "EP") == "FP")


def checks(built: Tables) -> Iterable[Problem]:
    yield from sequential_needs_own_actors(built)
    run, policy, collector = built.get("run"), built.get("policy"), built["collector"]
    if run is not None and run.precision != "fp32":
        yield (["run", "precision"], f'"{run.precision}" applies to off-policy gradient steps only; on-policy '
               'updates run in fp32: remove the key or set precision = "fp32"')
    if policy is not None and policy.agent_id and not policy.share_parameters:
        yield (["policy", "agent_id"], "appends the agent's id for one actor shared by the agents, but "
               "policy.share_parameters = false gives each agent its own actor; set share_parameters = true, "
               "or remove agent_id")
    if policy is not None and policy.recurrent == "chunked" and collector.rollout_length % policy.chunk_length:
        length = collector.rollout_length
        near = max(d for d in range(1, min(policy.chunk_length, length) + 1) if length % d == 0)
        yield (["policy", "chunk_length"],
               f"expected a divisor of collector.rollout_length ({length}), got "
               f"{policy.chunk_length}; for example chunk_length = {near}")


def _per_step(spec: Spec, spaces: EnvSpaces) -> int:
    """Bytes the rollout buffer holds per env step (GRU states counted at the actors' width, the policy's
    own step-record fields from the objective's config)."""
    hidden = spec.policy.hidden_sizes[-1] if spec.policy.recurrent != "none" else 0
    state_dim = int(np.prod(spaces.state_space.shape))
    extras = planned_record_bytes(getattr(spec.updater, "objective", None), len(spaces.action_spaces))
    return rollout_bytes_per_step(spaces.observation_spaces, spaces.action_spaces, state_dim,
                                  getattr(spec.critic, "state_type", "EP") == "FP", hidden, hidden,
                                  spaces.state_space, extras)


def _rollout_need(spec: Spec, spaces: EnvSpaces, members: int = 1) -> Need:
    per, col = _per_step(spec, spaces), spec.collector
    steps = (col.rollout_length + 1) * col.n_envs * members
    who = f"{members} members x " if members > 1 else ""
    return Need(f"{who}collector.n_envs = {col.n_envs:,} x (collector.rollout_length = {col.rollout_length:,} + 1) "
                f"steps: the rollout buffer ({per:,} bytes per env step, {human(per * steps)}) and the update's "
                "batches", UPDATE_FACTOR * per * steps,
                "collector.rollout_length or collector.n_envs" + (" (or train fewer seeds at once)" if who else ""))


def memory(spec: Spec, spaces: EnvSpaces) -> list[Need]:
    return [_rollout_need(spec, spaces)]


def describe(stages: Any) -> dict[str, str]:  # reads the on-policy stages' own members (widths, lengths)
    buffer, venv = stages.buffer, stages.venv
    if not hasattr(buffer, "fp_state"):  # a user's buffer kind: the generic row
        return {}
    per = rollout_bytes_per_step(venv.observation_spaces, venv.action_spaces, int(np.prod(venv.state_space.shape)),
                                 buffer.fp_state, stages.policy.hidden_size, stages.critic.hidden_size,
                                 venv.state_space, record_field_bytes(getattr(stages.policy, "record_fields", None)))
    return {"buffer": f"{per:,} bytes per env step, {buffer.length} x {buffer.n_envs} steps"}


# ------------------------------------------------------------------ populations (--vectorize)


def population_problems(spec: Spec) -> list[str]:
    kind = registry.kind_name
    found = []
    objective = kind(spec.updater.objective)
    if objective not in BATCHED_OBJECTIVES:
        found.append(f'updater.objective.kind = "{objective}" (on-policy populations: '
                     f'{", ".join(BATCHED_OBJECTIVES)}; TRPO runs as separate processes, --jobs N)')
    for table, expected in POPULATION_STAGES.items():
        if (got := kind(getattr(spec, table))) != expected:
            found.append(f'{table}.kind = "{got}" (on-policy populations: "{expected}")')
    if getattr(spec.policy, "recurrent", "none") != "none":
        found.append(f'policy.recurrent = "{spec.policy.recurrent}" (batched: feed-forward actors, "none")')
    if getattr(spec.policy, "share_parameters", False):
        found.append("policy.share_parameters = true (batched: one actor per agent)")
    if getattr(spec.policy, "agent_id", False):
        found.append("policy.agent_id = true (batched: actors on the observations alone)")
    return found


def population_memory(spec: Spec, spaces: EnvSpaces, members: int) -> list[Need]:
    return [_rollout_need(spec, spaces, members)]


@torch.no_grad()
def collect_population(population: Any, fresh: bool) -> dict[int, CollectStats]:
    """One rollout of every live member: each agent's actor and the critics evaluated as one call
    over the members (``Stack``), each member's buffer filled by its own collector's ``observe``."""
    alive = population.alive
    members = [population.trainers[s].stages for s in alive]
    if not fresh:
        for m in members:
            m.buffer.roll_over()
    n_agents = population.venv.n_agents
    actors = [Stack([m.policy.actor(i) for m in members]) for i in range(n_agents)]
    critic = Stack([m.critic for m in members])
    episodes: dict[int, list[dict[str, Any]]] = {s: [] for s in alive}
    for t in range(population.trainers[alive[0]].spec.collector.rollout_length):
        inputs = [m.buffer.inputs(t) for m in members]
        actions, log_probs = [], []
        for i in range(n_agents):
            obs = torch.stack([x.obs[i] for x in inputs])
            avail = None if inputs[0].avail[i] is None else torch.stack([x.avail[i] for x in inputs])
            a, lp = actors[i].call("act", obs, avail, random=True, pick=2)
            actions.append(a)
            log_probs.append(lp)
        values = critic.call("value", torch.stack([x.state for x in inputs]))
        step = population.venv.step([population.env_actions(a) for a in actions])
        parts = split_step(step, population.size, population.n_envs)
        for j, s in enumerate(alive):
            m = members[j]
            acting = Acting([a[j] for a in actions], [lp[j] for lp in log_probs], values[j], None, None)
            m.buffer.insert(m.collector.observe(acting, parts[s]))
            episodes[s].extend(parts[s].episode_infos)
    for m in members:
        m.collector.finish(m.buffer)
    return {s: CollectStats(population.steps, episodes[s]) for s in alive}


FAMILY = registry.register_family(Family(
    NAME, "rollouts, a V critic and advantages",
    lambda spec, parts: build_actor_critic(spec, parts, build_on_policy_updater), wiring, checks, memory,
    describe=describe, population=Population(population_problems, population_memory, collect_population, batched_update=True),
    rank=0, policy=build_policy))
