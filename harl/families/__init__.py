"""Families: what one kind of algorithm builds, in which order, and what its runs need.

A family is one module that ends with ``registry.register_family(Family(...))``, the way an
objective or an env kind registers (docs/architecture.md, "Families").  harl's own are the
modules of this package; a user's is a module of their own package, registered when it is
imported (naming one of its stage kinds, ``"my_pkg.family:CollectorConfig"``, does that)::

    spec (validated) --family.checks--> problems, one paragraph each
    family.memory(spec, spaces)       -> what its buffers will take, refused before allocation
    family.build(spec, parts)         -> Built(policy, critic, returns, buffer, collector, updater)
    Trainer: collector.collect -> returns.compute -> updater.update -> evaluator (the one loop)

A pipeline's family is its collector kind's (``register("collector", ..., family="value")``);
the stage kinds of every other table must belong to it (or to any family).  Kept free of
imports of harl's stages: a family module imports what it builds, this package nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import attrs
import torch

from harl.envs.protocol import VectorEnv
from harl.evaluator import EvaluatorConfig
from harl.parts import EnvSpaces, FamilyWiring, Parts
from harl.protocols import Buffer, Collected, Collector, ReturnComputer, Updater

Problem = tuple[list[str], str]
Tables = Mapping[str, Any]
"""A pipeline's tables as built, by name (``"collector"``: its config object): what a family's
``checks`` reads, each table's own attrs class."""
"""A cross-table problem: (key path, message)."""


class Spec(Protocol):
    """What a family reads of a pipeline (``harl.config.spec.PipelineSpec``, a layer above): its tables.

    A kind's table (``env``, ``collector``, ``buffer``, ``returns``, ``critic``, ``updater``) is whatever
    config class that kind registered, so it has no one type; ``run`` and ``checkpoint`` are
    ``harl.config.run``'s (the configuration layer's), which a family may not import."""

    @property
    def run(self) -> Any: ...

    @property
    def env(self) -> Any: ...

    @property
    def collector(self) -> Any: ...

    @property
    def buffer(self) -> Any: ...

    @property
    def returns(self) -> Any: ...

    @property
    def critic(self) -> Any: ...

    @property
    def updater(self) -> Any: ...

    @property
    def policy(self) -> Any:
        """``[policy]``: its class is the family's (``PolicyConfig`` for harl's actor-critic families)."""
        ...

    @property
    def evaluator(self) -> EvaluatorConfig: ...

    @property
    def checkpoint(self) -> Any: ...


class BuiltStages(Protocol):
    """What a family's ``describe`` reads of the built stages (``harl.compose.Stages``, a layer above)."""

    @property
    def spec(self) -> Any: ...

    @property
    def venv(self) -> VectorEnv: ...

    @property
    def policy(self) -> torch.nn.Module: ...

    @property
    def critic(self) -> torch.nn.Module: ...

    @property
    def buffer(self) -> Buffer: ...

    @property
    def device(self) -> torch.device: ...


@attrs.frozen
class Built:
    """The stages a family builds; the composition root adds the envs and the Evaluator."""

    policy: torch.nn.Module
    """The agents' acting networks (``torch.nn.Module``): what evaluation, rendering and export act with
    (``initial_hidden(n_envs, device)``, ``act(obs, avail, deterministic, hidden=, starts=)``)."""
    critic: torch.nn.Module
    """The network the updater fits besides the policy (a V or Q critic, a mixer); a checkpoint holds it."""
    returns: ReturnComputer
    buffer: Buffer
    collector: Collector
    updater: Updater


@attrs.frozen
class Need:
    """One allocation a pipeline will make, said before it is made."""

    what: str
    """What it holds, with the sizes that make it ("the rollout buffer: 8 envs x 201 steps x 1,234 bytes")."""
    bytes: int
    keys: str
    """The keys that size it, for the message that refuses it ("collector.n_envs or collector.rollout_length")."""


@attrs.frozen
class Population:
    """What a population (``--vectorize``) of a family batches: its checks and its batched collection.

    ``collect(population, fresh)`` steps the shared env once per vector step for every live member
    and hands each member's buffer its records (``harl.population.driver`` calls it); the
    Trainer's loop does the rest of each member's iteration.
    """

    problems: Callable[[Spec], list[str]]
    """``problems(spec)``: each stage a population cannot batch, as ``table.key = value (why)``."""
    memory: Callable[[Spec, EnvSpaces, int], list[Need]]
    """``memory(spec, spaces, members)``: the population's buffers."""
    collect: Callable[[Any, bool], Mapping[int, Collected]]
    batched_update: bool = False
    """Its members' updates can run as one batched call (``[run] population_update``; the on-policy
    family's PPO/A2C learners), else each member updates alone."""


def _no_problems(built: Tables) -> Iterable[Problem]:
    return ()


def _no_needs(spec: Spec, spaces: EnvSpaces) -> list[Need]:
    return []


def _no_buffer(spec: Spec) -> bool:
    return False


def _no_rows(stages: BuiltStages) -> dict[str, str]:
    return {}


@attrs.frozen
class Family:
    """One family of algorithms: registered with ``harl.registry.register_family``."""

    name: str
    """What its stage kinds name in ``register(..., family=name)``."""
    doc: str
    """One line for ``harl stages`` (what the family is, which algorithms it makes)."""
    build: Callable[[Spec, Parts], Built]
    """``build(spec, parts)``: its stages, in its own order (``parts``: ``harl.parts.Parts``,
    whose ``wiring`` is this family's ``wiring(spec)``; ``harl.registry.build(config, parts)`` builds the
    stage of one table; a step hands the next ``attrs.evolve(parts, policy=...)``)."""
    wiring: Callable[[Spec], FamilyWiring]
    """``wiring(spec)``: the values its stages read from other tables, read once (``parts.wiring``);
    it has ``n_envs`` (the training envs' count)."""
    checks: Callable[[Tables], Iterable[Problem]] = _no_problems
    """``checks(built_tables)``: settings valid alone but not together in this family."""
    memory: Callable[[Spec, EnvSpaces], list[Need]] = _no_needs
    """``memory(spec, spaces)``: its buffers' bytes (``spaces``: ``observation_spaces``,
    ``action_spaces``, ``state_space``, ``n_agents``, as a ``VectorEnv`` has them)."""
    save_buffer: Callable[[Spec], bool] = _no_buffer
    """Whether a checkpoint also holds the buffer's contents (``[checkpoint] replay_buffer``)."""
    describe: Callable[[BuiltStages], dict[str, str]] = _no_rows
    """``describe(stages)``: ``harl check`` rows of its own (slot -> what was built), over the generic ones."""
    population: Population | None = None
    """How ``--vectorize`` batches it; None: refused, naming the family."""
    defaults: Mapping[str, str] = attrs.field(factory=dict)
    """slot -> the kind a table of its pipelines gets without ``kind`` (else the slot's default)."""
    rank: int = 100
    """Where listings (``harl stages``, kind tables) show it and its kinds: lower first."""
    policy: Callable[[Spec, Parts], torch.nn.Module] | None = None
    """``policy(spec, parts)``: its acting networks alone, for a team that plays but does not learn
    (frozen, self-play); None: ``build`` everything and keep its ``policy``."""
    policy_config: type | None = None
    """The config class of its pipelines' ``[policy]`` table (the networks that act); None:
    ``harl.policy.config.PolicyConfig``, the actor-critic families' actors."""

    @property
    def keeps_replay(self) -> bool:
        """Its buffer is a replay that a checkpoint holds only on request (``[checkpoint] replay_buffer``):
        left out, a resumed run starts it empty and updates unlike an uninterrupted one."""
        return self.save_buffer is not _no_buffer
