"""HARL's runner API (``RUNNER_REGISTRY``, the six runner classes) as thin facades over harl.

Each runner converts HARL's ``(args, algo_args, env_args)`` into a harl pipeline, builds
its stages and forwards HARL's methods to them; it holds no algorithm.  HA and MA runners
differ only in ``[updater] kind``.  Importing this package makes a script that does not
catch harl's errors end as ``harl train`` does (``harl.runners.exits``).
"""

from __future__ import annotations

import difflib
from typing import Any

from harl.runners.exits import UnknownAlgorithmError, install_excepthook
from harl.runners.off_policy_base_runner import OffPolicyBaseRunner
from harl.runners.off_policy_ha_runner import OffPolicyHARunner
from harl.runners.off_policy_ma_runner import OffPolicyMARunner
from harl.runners.on_policy_base_runner import OnPolicyBaseRunner
from harl.runners.on_policy_ha_runner import OnPolicyHARunner
from harl.runners.on_policy_ma_runner import OnPolicyMARunner


class RunnerRegistry(dict):
    """HARL's algorithm name -> runner class; an unknown name is a ``ConfigError`` (and a ``KeyError``)."""

    def __missing__(self, name: Any) -> Any:
        hint = difflib.get_close_matches(str(name), list(self), n=1)
        near = f' (did you mean "{hint[0]}"?)' if hint else ""
        raise UnknownAlgorithmError(
            f'args["algo"]: unknown algorithm "{name}"{near}; harl.runners.RUNNER_REGISTRY has '
            f"{', '.join(self)}; pass one of them as --algo"
        )


RUNNER_REGISTRY: dict[str, type] = RunnerRegistry({
    "happo": OnPolicyHARunner,
    "hatrpo": OnPolicyHARunner,
    "haa2c": OnPolicyHARunner,
    "haddpg": OffPolicyHARunner,
    "hatd3": OffPolicyHARunner,
    "hasac": OffPolicyHARunner,
    "had3qn": OffPolicyHARunner,
    "maddpg": OffPolicyMARunner,
    "matd3": OffPolicyMARunner,
    "mappo": OnPolicyMARunner,
})

install_excepthook()

__all__ = ["RUNNER_REGISTRY", "OffPolicyBaseRunner", "OffPolicyHARunner", "OffPolicyMARunner",
           "OnPolicyBaseRunner", "OnPolicyHARunner", "OnPolicyMARunner"]
