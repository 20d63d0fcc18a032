"""What a family's build steps hand each other: ``Parts``, one frozen, typed record.

The composition root makes the first one (the envs' spaces, the device, the generator and seeds,
``[policy]``'s config, the family's ``wiring``); each build step that makes something a later
step reads advances it with ``attrs.evolve``, so what each step sees is what was handed to it::

    parts = attrs.evolve(parts, policy=policy)     # the learners and the collector act with it
    parts = attrs.evolve(parts, critic=critic)     # the critic learner, the collector, the returns
    parts = attrs.evolve(parts, returns=returns)   # the updater

A factory gets it as ``factory(config, parts)`` (``harl.registry.build``).  It lives in the learning
layer, above the registry, because its fields' types do (the ``VectorEnv`` protocol, the stage
protocols); the composition root, the teams' build and every family import it from here.
``harl.registry.Parts``, its older name, still works, with a deprecation warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import attrs
import torch
from gymnasium import spaces

from harl.envs.protocol import VectorEnv
from harl.errors import deprecated
from harl.protocols import ReturnComputer


class FamilyWiring(Protocol):
    """What every family's ``wiring(spec)`` has (``harl.families.actor_critic.Wiring``,
    ``harl.families.value.ValueWiring`` and a user family's own add the rest)."""

    @property
    def n_envs(self) -> int:
        """The training envs' count."""
        ...


class EnvSpaces(Protocol):
    """The spaces of a pipeline's env, as a ``VectorEnv`` (or ``harl.envs.footprint.Spaces``) has them."""

    @property
    def observation_spaces(self) -> Sequence[spaces.Box]: ...

    @property
    def action_spaces(self) -> Sequence[spaces.Space]: ...

    @property
    def state_space(self) -> spaces.Box: ...

    @property
    def n_agents(self) -> int: ...


NO_STATE = spaces.Box(0.0, 0.0, (0,))
"""The state space of an env without a global state (``state_dim`` 0)."""


@attrs.frozen
class Parts:
    """What a factory gets besides its own config: the spaces, device and seeds first, then what
    earlier build steps made (``policy``, ``critic``, ``returns``: None until that step ran)."""

    obs_spaces: list[spaces.Box]
    act_spaces: list[spaces.Space]
    state_dim: int
    n_agents: int
    venv: VectorEnv
    """The training envs (a collector steps them)."""
    device: torch.device
    generator: torch.Generator
    """The run's torch generator for minibatch order and agent order (seeded by ``run.seed``)."""
    env_seed: int
    policy_config: Any
    """The ``[policy]`` config (actor widths, activation, recurrence): its class is the family's."""
    wiring: FamilyWiring
    """The values read from other tables: the family's ``wiring(spec)``."""
    source: str = "pipeline"
    """The pipeline file, for errors."""
    state_space: spaces.Box = NO_STATE
    """The env's global state space (an image state gets a CNN critic)."""
    policy: torch.nn.Module | None = None
    """The agents' acting networks, once built."""
    critic: torch.nn.Module | None = None
    """The critic network (a V or Q critic, a mixer), once built."""
    returns: ReturnComputer | None = None
    """The returns stage, once built."""
    shared: dict[str, Any] = attrs.field(factory=dict)
    """Objects one build's learners share, made by the first that needs one (SAC's critic temperature);
    every record ``attrs.evolve`` makes from this one holds the same dict."""

    @property
    def team(self) -> torch.nn.Module | None:
        """The policy's older name (``parts.policy``), with a ``HarlDeprecationWarning``."""
        deprecated("Parts.team", "Parts.policy")
        return self.policy
