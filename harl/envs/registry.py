"""Which factory builds the environment for a given env config class.

Adding an environment kind is one line in ``ENV_KINDS`` (or one ``register_env_kind``
call, which is how tests add their fakes).  Factories import their simulator lazily, so
importing this module never needs an optional package.

Subprocess workers rebuild environments from a pickled config; unpickling imports the
config class's module, so a kind registered at import time of that module (as the test
fakes do) is registered in the worker too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from harl.envs.mpe import MPEConfig, make_mpe_env
from harl.envs.protocol import MultiAgentEnv

EnvFactory = Callable[[Any], MultiAgentEnv]

ENV_KINDS: dict[type, tuple[str, EnvFactory]] = {
    MPEConfig: ("mpe", make_mpe_env),
}
"""Config class -> (kind name, factory taking that config)."""


def register_env_kind(config_cls: type, factory: EnvFactory) -> None:
    """Add (or replace) a kind; its name is the default of the class's ``kind`` field."""
    kind = attrs.fields(config_cls).kind.default
    ENV_KINDS[config_cls] = (kind, factory)


def make_env(config: Any) -> MultiAgentEnv:
    """Build one environment for ``config``, dispatching on its exact type."""
    try:
        _, factory = ENV_KINDS[type(config)]
    except KeyError:
        known = ", ".join(sorted(kind for kind, _ in ENV_KINDS.values()))
        raise TypeError(
            f"no environment registered for {type(config).__qualname__} (known kinds: {known})"
        ) from None
    return factory(config)
