"""The PQN family: parallelised Q-learning (Gallici et al., ICLR 2025, arXiv 2407.04811) and its
multi-agent forms PQN-VDN and PQN-IQL (its named algorithms: ``harl.algorithms.algorithms("pqn")``).

No replay and no target network: each iteration is a rollout of many envs acted epsilon-greedy by one
shared LayerNorm Q network, its lambda-returns, then epochs of minibatch regression on that rollout
(JaxMARL's ``baselines/QLearning/pqn_vdn_ff.py``, ``pqn_vdn_rnn.py``; docs/pqn.md).  On-policy in
shape, a value method in what it learns.

Its kinds: the ``pqn`` collector (``harl.collect.pqn``), the ``pqn`` buffer, ``q_lambda`` returns, the
``vdn`` / ``none`` mixers of ``[critic]`` (the value family's, ``harl.update.mixers``), the ``pqn``
updater and its ``pqn_q`` objective; ``[policy]`` is ``PQNPolicyConfig``.

Build order: the policy (the shared Q network), the mixer, the returns, the objective (optimiser),
the updater, the buffer, the collector.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs
import numpy as np
from gymnasium import spaces as gym_spaces

from harl import registry
from harl.families import Built, BuiltStages, Family, Need, Problem, Spec, Tables
from harl.parts import EnvSpaces, Parts
from harl.policy.pqn import PQNPolicy, PQNPolicyConfig
from harl.sizes import human
from harl.update.pqn import PQNUpdater

NAME = "pqn"


@attrs.frozen
class PQNWiring:
    """What the PQN stages read from other tables (``parts.wiring``)."""

    family: str
    n_envs: int
    rollout_length: int
    total_updates: int
    """JaxMARL's NUM_UPDATES: ``run.total_env_steps // (rollout_length x n_envs)`` (epsilon's and the
    learning rate's schedules are fractions of it)."""
    epochs: int
    minibatches: int


def wiring(spec: Spec) -> PQNWiring:
    c = spec.collector
    return PQNWiring(NAME, c.n_envs, c.rollout_length, int(spec.run.total_env_steps) // (c.rollout_length * c.n_envs),
                     spec.updater.epochs, spec.updater.minibatches)


def checks(built: Tables) -> Iterable[Problem]:
    collector, updater, policy, run = built["collector"], built.get("updater"), built.get("policy"), built.get("run")
    recurrent = policy is not None and getattr(policy, "recurrent", "none") != "none"
    if updater is not None and collector is not None:
        rows = collector.n_envs if recurrent else collector.n_envs * collector.rollout_length
        what = ("collector.n_envs" if recurrent else "collector.n_envs x collector.rollout_length")
        if rows % updater.minibatches:
            near = max(d for d in range(1, min(updater.minibatches, rows) + 1) if rows % d == 0)
            yield (["updater", "minibatches"],
                   f"{updater.minibatches} does not divide {what} = {rows} (the "
                   f"{'envs whose sequences' if recurrent else 'steps that'} each epoch splits); set "
                   f"minibatches = {near}, or change {what}")
    buffer = built.get("buffer")
    if buffer is not None and buffer.memory_window and policy is not None and not recurrent:
        yield (["buffer", "memory_window"],
               f"{buffer.memory_window} keeps steps of the previous rollout for a recurrent network's sequences, "
               'but policy.recurrent = "none" trains on single steps (JaxMARL\'s feed-forward PQN keeps none); '
               'set memory_window = 0, or policy.recurrent = "gru"')
    if run is not None and run.precision != "fp32":
        yield (["run", "precision"], f'"{run.precision}" applies to off-policy actor-critic gradient steps; PQN '
               'trains in fp32: remove the key or set precision = "fp32"')


def build(spec: Spec, parts: Parts) -> Built:
    policy = PQNPolicy(parts.obs_spaces, parts.act_spaces, spec.policy, parts.source).to(parts.device)
    parts = attrs.evolve(parts, policy=policy)
    mixer = registry.build(spec.critic, parts).to(parts.device)
    parts = attrs.evolve(parts, critic=mixer)
    returns = registry.build(spec.returns, parts)
    parts = attrs.evolve(parts, returns=returns)
    learner = registry.build(spec.updater.objective, parts)
    updater = PQNUpdater(spec.updater, learner, parts.generator)
    buffer = registry.build(spec.buffer, parts)
    collector = registry.build(spec.collector, parts)
    return Built(policy, mixer, returns, buffer, collector, updater)


def _bytes(spec: Spec, spaces: EnvSpaces) -> int:
    """The buffer's bytes: per row the inputs, masks, max Qs, GRU states, and the step's fields."""
    A = spaces.n_agents
    D = max(int(np.prod(s.shape)) for s in spaces.observation_spaces) + A
    K = max(int(s.n) if isinstance(s, gym_spaces.Discrete) else 1 for s in spaces.action_spaces)
    H = spec.policy.hidden_sizes[-1] if spec.policy.recurrent != "none" else 0
    per_row = 4 * A * (D + K + 1 + H + 1) + 8 * A + 4 * A + 8
    rows = spec.buffer.memory_window + spec.collector.rollout_length + 1
    return per_row * rows * spec.collector.n_envs


def memory(spec: Spec, spaces: EnvSpaces) -> list[Need]:
    total = _bytes(spec, spaces)
    c = spec.collector
    return [Need(f"collector.n_envs = {c.n_envs:,} x (buffer.memory_window + collector.rollout_length + 1 = "
                 f"{spec.buffer.memory_window + c.rollout_length + 1:,}) steps: the PQN buffer ({human(total)})",
                 4 * total, "collector.n_envs or collector.rollout_length")]


def describe(stages: BuiltStages) -> dict[str, str]:
    policy, spec = stages.policy, stages.spec
    if not isinstance(policy, PQNPolicy):
        return {}
    body = " -> ".join(str(h) for h in spec.policy.hidden_sizes)
    return {
        "policy": f"1 shared Q network: {policy.in_dim} -> {body} ({spec.policy.norm})"
                  f"{' -> GRU' if policy.recurrent else ''} -> {policy.n_actions}, "
                  f"{sum(p.numel() for p in policy.parameters()):,} parameters, device {stages.device}",
        "updater": f"{spec.updater.epochs} epochs x {spec.updater.minibatches} minibatches per rollout, "
                   f"{spec.updater.objective.optimizer} lr {spec.updater.objective.lr}, no target network",
    }


FAMILY = registry.register_family(Family(
    NAME, "PQN: rollouts of many envs, lambda-returns from max Q, minibatch Q regression, no replay or target "
    "network", build, wiring, checks, memory, describe=describe, population=None,
    defaults={"buffer": "pqn", "returns": "q_lambda", "critic": "vdn", "updater": "pqn"}, rank=3,
    policy_config=PQNPolicyConfig))
