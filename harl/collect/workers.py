"""How a collector's training envs run: the ``[collector]`` keys every collector kind shares.

``EnvWorkers`` holds ``backend``, ``workers``, ``restart_workers`` and ``step_timeout_s`` once;
a collector's config inherits them and lists them after its own keys::

    @attrs.frozen(field_transformer=own_first)
    class MyCollectorConfig(EnvWorkers):
        kind: str = kind_field("my_collector")
        n_envs: int = ...

``EnvWorkers.vector_options()`` is what ``harl.envs.vector.make_vector_env`` takes of them
(``harl.compose.env_backend`` reads it; a collector config without them gets ``EnvWorkers()``'s).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from harl.settings import in_range, one_of, setting

BACKENDS = ("inline", "subprocess", "ray")


@attrs.frozen
class EnvWorkers:
    """The ``[collector]`` keys that say how the training envs run (every collector kind has them)."""

    backend: str = setting("inline", "inline (one process), subprocess (worker processes) or ray (Ray actors, any node)",
                           one_of(BACKENDS))
    workers: int = setting(0, "subprocess workers or Ray actors (0: one per CPU core, at most n_envs)", in_range(0, None))
    restart_workers: bool = setting(False, "subprocess and ray backends: restart a dead or hung worker and reset "
                                    "its envs instead of stopping")
    step_timeout_s: float = setting(300.0, "subprocess and ray backends: seconds one env call may take before its "
                                    "worker is taken as hung (0: no limit)", in_range(0, None))

    def vector_options(self) -> dict[str, Any]:
        """``make_vector_env``'s keyword arguments for these settings."""
        return {"backend": self.backend, "workers": self.workers, "restart_workers": self.restart_workers,
                "step_timeout_s": self.step_timeout_s}


def backend_checks(config: EnvWorkers, built: Any) -> Iterator[tuple[list[str], str]]:
    """``restart_workers`` restarts worker processes or Ray actors: not inline envs."""
    if config.restart_workers and config.backend == "inline":
        yield (["collector", "restart_workers"], 'applies to backend = "subprocess" or "ray", but '
               'backend = "inline"; remove the key or set backend = "subprocess"')
