"""What the two actor-critic families (on-policy, off-policy) build alike: a policy of actors,
a critic, one learner per actor and a critic learner, handed to the family's updater.

Build order (each step sees what the steps before it made, ``attrs.evolve``-d into its ``Parts``):
the policy (the objective's ``policy`` builder), the critic, the returns stage, one learner per
actor (the objective), the critic learner (the critic kind's ``learner``), the family's updater,
the buffer, the collector.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from harl import registry
from harl.families import Built, Problem, Spec, Tables
from harl.parts import Parts
from harl.policy.on_policy import stochastic_policy
from harl.protocols import Updater

UpdaterBuilder = Callable[[Any, list[Any], Any, Parts], Updater]
"""``build(updater_config, learners, critic_learner, parts)`` -> the family's updater."""


@attrs.frozen
class Wiring:
    """What an actor-critic stage needs from another slot's table, read once and passed explicitly."""

    family: str
    n_envs: int
    rollout_length: int = 0
    """On-policy: vector steps per rollout (the rollout buffer's length)."""
    sequence_length: int = 0
    """Recurrent training: steps per sequence (0: feed-forward actors)."""
    fp_state: bool = False
    """The critic takes one state per agent (the buffer stores them)."""
    batch_size: int = 0
    warmup_steps: int = 0
    updates_per_round: int = 0
    policy_freq: int = 1
    """Off-policy: critic steps per actor step (the objective's ``policy_freq``, else 1)."""
    epsilon: tuple[float, float, int, str] | None = None
    """Off-policy: ``[collector]``'s epsilon-greedy schedule (start, finish, anneal steps, coin) for D3QN's actors."""
    precision: str = "fp32"
    """``[run] precision``: "bf16" runs each off-policy gradient step under bfloat16 autocast."""


def build_policy(spec: Spec, parts: Parts) -> Any:
    """The actors alone, as ``build_actor_critic`` makes them (its objective's ``policy`` builder, else
    ``stochastic_policy``): what a frozen or self-play team plays with."""
    objective = spec.updater.objective
    return registry.entry_of(objective).extra("policy", stochastic_policy)(objective, parts).to(parts.device)


def build_actor_critic(spec: Spec, parts: Parts, make_updater: UpdaterBuilder) -> Built:
    """The stages of an actor-critic pipeline, in the order above; each step gets the parts the
    steps before it made (``attrs.evolve``)."""
    objective = spec.updater.objective
    policy = build_policy(spec, parts)
    parts = attrs.evolve(parts, policy=policy)
    critic = registry.build(spec.critic, parts).to(parts.device)
    parts = attrs.evolve(parts, critic=critic)
    returns = registry.build(spec.returns, parts)
    parts = attrs.evolve(parts, returns=returns)
    learners = [registry.build(objective, parts, i) for i in range(len(policy.actors))]
    critic_learner = registry.entry_of(spec.critic).parts["learner"](critic, spec.critic, parts)
    updater = make_updater(spec.updater, learners, critic_learner, parts)
    buffer = registry.build(spec.buffer, parts)
    collector = registry.build(spec.collector, parts)
    return Built(policy, critic, returns, buffer, collector, updater)


def sequential_needs_own_actors(built: Tables) -> Iterable[Problem]:
    """HA's sequential update needs one actor per agent."""
    updater, policy = built.get("updater"), built.get("policy")
    if updater is not None and policy is not None and policy.share_parameters and updater.kind == "sequential":
        yield (["updater", "kind"],
               '"sequential" updates agents one after another, which needs one actor per agent, '
               "but policy.share_parameters = true makes one actor for all; set "
               'policy.share_parameters = false, or updater.kind = "simultaneous"')
