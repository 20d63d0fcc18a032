"""Which factory builds the environment for a given env config class.

Adding an environment kind is one line in ``ENV_KINDS`` (or one ``register_env_kind``
call, which is how tests add their fakes).  Factories import their simulator lazily, so
importing this module never needs an optional package.

Subprocess workers rebuild environments from a pickled config; unpickling imports the
config class's module, so a kind registered at import time of that module (as the test
fakes do) is registered in the worker too.

A simulator that is vectorised itself (VMAS steps a batch of environments as tensors)
registers a ``VectorFactory`` instead: ``make_vector_env`` then builds one instance for
all ``n_envs`` rather than ``n_envs`` copies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from harl.envs.air_combat import AirCombatConfig, make_air_combat_env
from harl.envs.football import FootballConfig, make_football_env
from harl.envs.gym_env import GymConfig, make_gym_env
from harl.envs.gymma import GymmaConfig, make_gymma_env
from harl.envs.mamujoco import MaMuJoCoConfig, make_mamujoco_env
from harl.envs.mpe import MPEConfig, make_mpe_env
from harl.envs.mpe_torch import MPETorchConfig, make_mpe_torch_vector_env
from harl.envs.pettingzoo import PettingZooConfig, make_pettingzoo_env
from harl.envs.protocol import MultiAgentEnv, VectorEnv
from harl.envs.python_env import PythonEnvConfig, make_python_env
from harl.envs.smax import SMAXConfig, make_smax_vector_env
from harl.envs.vmas_env import VMASConfig, make_vmas_vector_env

EnvFactory = Callable[[Any], MultiAgentEnv]


@attrs.frozen
class VectorFactory:
    """A kind whose simulator is vectorised itself: ``make(config, n_envs, seed) -> VectorEnv``."""

    make: Callable[[Any, int, int], VectorEnv]


ENV_KINDS: dict[type, tuple[str, EnvFactory | VectorFactory]] = {
    MPEConfig: ("mpe", make_mpe_env),
    MaMuJoCoConfig: ("mamujoco", make_mamujoco_env),
    GymConfig: ("gym", make_gym_env),
    VMASConfig: ("vmas", VectorFactory(make_vmas_vector_env)),
    PythonEnvConfig: ("python", make_python_env),
    SMAXConfig: ("smax", VectorFactory(make_smax_vector_env)),
    MPETorchConfig: ("mpe_torch", VectorFactory(make_mpe_torch_vector_env)),
    FootballConfig: ("football", make_football_env),
    AirCombatConfig: ("air_combat", make_air_combat_env),
    PettingZooConfig: ("pettingzoo", make_pettingzoo_env),
    GymmaConfig: ("gymma", make_gymma_env),
}
"""Config class -> (kind name, factory taking that config, or a ``VectorFactory``)."""


def vector_factory(config: Any) -> Callable[[Any, int, int], VectorEnv] | None:
    """The ``VectorFactory.make`` of a natively vectorised kind, else None."""
    entry = ENV_KINDS.get(type(config))
    return entry[1].make if entry is not None and isinstance(entry[1], VectorFactory) else None


def register_env_kind(config_cls: type, factory: EnvFactory | VectorFactory) -> None:
    """Add (or replace) a kind; its name is the default of the class's ``kind`` field."""
    kind = attrs.fields(config_cls).kind.default
    ENV_KINDS[config_cls] = (kind, factory)


def make_env(config: Any) -> MultiAgentEnv:
    """Build one environment for ``config``, dispatching on its exact type."""
    try:
        kind, factory = ENV_KINDS[type(config)]
    except KeyError:
        known = ", ".join(sorted(kind for kind, _ in ENV_KINDS.values()))
        raise TypeError(
            f"no environment registered for {type(config).__qualname__} (known kinds: {known})"
        ) from None
    if isinstance(factory, VectorFactory):
        raise TypeError(f'env kind "{kind}" is vectorised natively: build it with make_vector_env')
    return factory(config)
