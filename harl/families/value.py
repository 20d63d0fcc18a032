"""The value-decomposition family: agent Q networks, a mixer, one joint TD loss (its named
algorithms: ``harl.algorithms.algorithms("value")``).

Its kinds: the ``episodes`` collector (epsilon-greedy, whole episodes), the ``episodes``
buffer (a padded replay of whole episodes), ``episode_td`` returns (1-step, n-step or
TD(lambda) targets per sampled batch), the mixers ``none`` (IQL), ``vdn`` and ``qmix`` in
``[critic]``, the ``q_learning`` updater and its ``joint_td`` objective, which holds the
agents' networks (``harl.policy.agent_q``, set in ``[policy]``: ``AgentQPolicyConfig``).  docs/value-decomposition.md has the tables.

Build order: the agents' networks (from ``[policy]``), the mixer, the returns, the objective
(target networks, optimiser), the updater, the buffer, the collector; with ``[updater] timing =
"per_episode"`` (the default) the collector tells the updater of each vector step's finished
episodes, which takes their gradient steps there (EPyMARL's loop).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np

from harl import registry
from harl.buffers.episodes import episode_bytes
from harl.collect.episodes import EpisodeCollector
from harl.errors import ConfigError
from harl.families import Built, BuiltStages, Family, Need, Problem, Spec, Tables
from harl.parts import EnvSpaces, Parts
from harl.policy.agent_q import AgentQNetworks
from harl.policy.config import AgentQPolicyConfig
from harl.sizes import human
from harl.update.q_learning import JointTD, QUpdater

NAME = "value"

LIMIT_KEYS = ("max_episode_steps", "max_steps", "max_cycles")
"""``[env]`` keys that state an episode's time limit, in the order they are read (harl's own name first;
the others are what a user's env kind may still call it)."""


@attrs.frozen
class ValueWiring:
    """What the value family's stages read from other tables (``parts.wiring``)."""

    family: str
    n_envs: int
    max_length: int
    """Steps of the longest episode: ``buffer.max_length``, else the env's time limit."""
    batch_size: int


def env_limit(env: Any) -> tuple[str, int] | None:
    """(key, value) of the ``[env]`` setting that limits an episode's steps, if it has one (> 0)."""
    for key in LIMIT_KEYS:
        value = getattr(env, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return key, value
    return None


def max_length(spec: Spec) -> int:
    if spec.buffer.max_length > 0:
        return int(spec.buffer.max_length)
    found = env_limit(spec.env)
    return found[1] if found else 0


def wiring(spec: Spec) -> ValueWiring:
    return ValueWiring(NAME, spec.collector.n_envs, max_length(spec), spec.buffer.batch_size)


def checks(built: Tables) -> Iterable[Problem]:
    buffer, env, run = built.get("buffer"), built.get("env"), built.get("run")
    if buffer is not None and buffer.max_length == 0 and env is not None and env_limit(env) is None:
        kind = registry.kind_name(env)
        yield (["buffer", "max_length"],
               f'0 reads the episode limit from [env] ({", ".join(LIMIT_KEYS)}), but env.kind = "{kind}" sets '
               "none of them; set buffer.max_length to the env's longest episode (LBF: 50; EPyMARL's gymma "
               "time_limit), or give the env a time limit")
    if buffer is not None and buffer.batch_size > buffer.capacity:
        yield (["buffer", "batch_size"],
               f"{buffer.batch_size} episodes per batch, but buffer.capacity = {buffer.capacity} episodes are kept; "
               f"set batch_size to at most {buffer.capacity} (EPyMARL: 32 of 5000)")
    if run is not None and run.precision != "fp32":
        yield (["run", "precision"], f'"{run.precision}" applies to off-policy actor-critic gradient steps; the '
               'value family trains in fp32: remove the key or set precision = "fp32"')


def _state_checks(spec: Spec, parts: Parts) -> None:
    """What needs the env: QMIX mixes over a global state."""
    if registry.kind_name(spec.critic) == "qmix" and parts.state_dim == 0:
        raise ConfigError(
            f'{parts.source}: critic.kind: "qmix" makes its mixing weights from the global state, but env.kind = '
            f'"{registry.kind_name(spec.env)}" has none (state_space {tuple(parts.state_space.shape)}); set '
            'critic.kind = "vdn" (a sum, no state), or give the env a state (kind = "pettingzoo": '
            'state = "observations")')


def build(spec: Spec, parts: Parts) -> Built:
    _state_checks(spec, parts)
    objective = spec.updater.objective
    policy = spec.policy
    agent_qs = AgentQNetworks(parts.obs_spaces, parts.act_spaces, policy.hidden_sizes[0], policy.recurrent != "none",
                              policy.share_parameters, policy.agent_id, policy.last_action, parts.source)
    parts = attrs.evolve(parts, policy=agent_qs.to(parts.device))
    critic = registry.build(spec.critic, parts).to(parts.device)
    parts = attrs.evolve(parts, critic=critic)
    returns = registry.build(spec.returns, parts)
    parts = attrs.evolve(parts, returns=returns)
    learner: JointTD = registry.build(objective, parts)
    updater = QUpdater(spec.updater, learner, spec.buffer.batch_size, parts.generator)
    buffer = registry.build(spec.buffer, parts)
    collector = registry.build(spec.collector, parts)
    if spec.updater.update_timing == "per_episode" and isinstance(collector, EpisodeCollector):
        collector.updates_with(updater)  # the gradient steps follow the episodes inside collection, as EPyMARL's loop
    return Built(agent_qs, critic, returns, buffer, collector, updater)


def _per_episode(spec: Spec, spaces: EnvSpaces) -> int:
    return episode_bytes(spaces.observation_spaces, spaces.action_spaces, int(np.prod(spaces.state_space.shape)),
                         max_length(spec), spaces.state_space)


def memory(spec: Spec, spaces: EnvSpaces) -> list[Need]:
    per, capacity, length = _per_episode(spec, spaces), spec.buffer.capacity, max_length(spec)
    return [Need(f"buffer.capacity = {capacity:,} episodes x (buffer.max_length = {length:,} + 1) steps: the episode "
                 f"replay ({per:,} bytes per padded episode, {human(per * capacity)})", per * capacity,
                 "buffer.capacity or buffer.max_length")]


def save_buffer(spec: Spec) -> bool:
    return bool(spec.checkpoint.replay_buffer)


def describe(stages: BuiltStages) -> dict[str, str]:
    spec, agent_qs = stages.spec, stages.policy
    if not isinstance(agent_qs, AgentQNetworks):
        return {}
    per, capacity = _per_episode(spec, stages.venv), spec.buffer.capacity
    nets = "1 shared network" if agent_qs.share_parameters else f"{agent_qs.n_agents} networks"
    body = f"GRU {agent_qs.hidden_dim}" if agent_qs.recurrent else f"MLP {agent_qs.hidden_dim}x{agent_qs.hidden_dim}"
    return {
        "buffer": f"{capacity:,} episodes of up to {max_length(spec)} steps, batch {spec.buffer.batch_size}; memory "
                  f"when full: {per:,} bytes per episode x {capacity:,} = {human(per * capacity)}",
        "policy": f"agent Qs: {nets}, {body}, {sum(p.numel() for p in agent_qs.parameters()):,} parameters, "
                  f"device {stages.device}",
        "updater": f"objective {registry.kind_name(spec.updater.objective)}, target copy every "
                   f"{spec.updater.target_update_interval} steps" if spec.updater.target_update_interval
                   else f"objective {registry.kind_name(spec.updater.objective)}, soft targets polyak {spec.updater.polyak}",
    }


FAMILY = registry.register_family(Family(
    NAME, "agent Q networks, a mixer and one joint TD loss over a replay of whole episodes",
    build, wiring, checks, memory, save_buffer=save_buffer, describe=describe, population=None,
    defaults={"buffer": "episodes", "returns": "episode_td", "critic": "qmix", "updater": "q_learning"}, rank=2,
    policy_config=AgentQPolicyConfig))
