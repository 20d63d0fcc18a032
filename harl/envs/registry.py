"""Building an environment from its config: the env kinds live in ``harl.registry``.

An adapter registers its kind at the bottom of its own module::

    register("env", MPEConfig, make_mpe_env, default=True)              # factory(config) -> one env
    register("env", VMASConfig, make_vmas_vector_env, vectorised=True)  # factory(config, n_envs, seed)

so adding an environment kind is one new module under ``harl/envs/`` (see
``harl.registry`` for how its kinds are found).  Factories import their simulator lazily,
so importing an adapter never needs its optional package.

Subprocess workers rebuild environments from a pickled config; unpickling imports the
config class's module, so its kind is registered in the worker too (tests' fakes rely on it).

A simulator that is vectorised itself (VMAS steps a batch of environments as tensors)
registers with ``vectorised=True``: ``make_vector_env`` then builds one instance for all
``n_envs`` rather than ``n_envs`` copies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from harl import registry
from harl.envs.protocol import MultiAgentEnv, VectorEnv
from harl.errors import deprecated

EnvFactory = Callable[..., MultiAgentEnv]


@attrs.frozen
class VectorFactory:
    """For ``register_env_kind``: a kind whose simulator is vectorised itself, ``make(config, n_envs, seed)``."""

    make: Callable[[Any, int, int], VectorEnv]


def env_entry(config: Any) -> registry.Entry:
    """The registered env kind of ``config``, or a TypeError listing the known kinds."""
    try:
        entry = registry.entry_of(config)
    except KeyError:
        entry = None
    if entry is None or entry.slot != "env":
        known = ", ".join(e.kind for e in registry.kinds("env"))
        raise TypeError(f"no environment registered for {type(config).__qualname__} (known kinds: {known})")
    return entry


def vector_factory(config: Any) -> Callable[[Any, int, int], VectorEnv] | None:
    """The factory of a natively vectorised kind (``factory(config, n_envs, seed)``), else None."""
    entry = env_entry(config)
    return entry.factory if entry.parts.get("vectorised") else None


def register_env_kind(config_cls: type, factory: EnvFactory | VectorFactory) -> None:
    """Add (or replace) a kind: ``harl.registry.register("env", ...)``'s older spelling, with a
    ``HarlDeprecationWarning``."""
    deprecated("harl.envs.registry.register_env_kind(Config, factory)",
               'harl.registry.register("env", Config, factory) (a VectorFactory: factory.make, vectorised=True)')
    if isinstance(factory, VectorFactory):
        registry.register("env", config_cls, factory.make, vectorised=True)
    else:
        registry.register("env", config_cls, factory)


def make_env(config: Any) -> MultiAgentEnv:
    """Build one environment for ``config``, dispatching on its exact type."""
    entry = env_entry(config)
    if entry.parts.get("vectorised"):
        raise TypeError(f'env kind "{entry.kind}" is vectorised natively: build it with make_vector_env')
    assert entry.factory is not None
    env: MultiAgentEnv = entry.factory(config)
    return env


if not TYPE_CHECKING:  # mypy does not see old names, so harl's own code cannot use one
    def __getattr__(name: str) -> Any:
        """``ENV_KINDS`` as before (config class -> (kind, factory)), derived from the registry, with a
        ``HarlDeprecationWarning``; nothing registers by editing it."""
        if name == "ENV_KINDS":
            deprecated("harl.envs.registry.ENV_KINDS",
                       'harl.registry.kinds("env") (or harl.envs.registry.env_entry(config) for one config)')
            return {e.config: (e.kind, VectorFactory(e.factory) if e.parts.get("vectorised") else e.factory)
                    for e in registry.kinds("env")}
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
