"""Vector environments: ``n_envs`` copies stepped together, with auto-reset.

One backend per module: ``inline`` steps its environments one after the other in this
process and does all the per-step bookkeeping (stacking, auto-reset, episode returns);
``subprocess`` splits them into chunks, one ``InlineVectorEnv`` per worker process, so
that logic is written once (``ray_actors`` does the same with Ray actors; ``chunks`` has
what the two share), and ``shared`` lays out the shared-memory segment its workers
write each step into.  ``numpy_view`` shows a tensor-native vector env (VMAS)
through numpy arrays, for code that wants them.
"""

from __future__ import annotations

import os
from typing import Any

from harl.envs.protocol import VectorEnv
from harl.envs.registry import vector_factory
from harl.envs.vector.chunks import STEP_TIMEOUT_S
from harl.envs.vector.inline import InlineVectorEnv
from harl.envs.vector.numpy_view import NumpyVectorEnv, as_numpy
from harl.envs.vector.subprocess import SubprocessVectorEnv

__all__ = ["BACKENDS", "InlineVectorEnv", "NumpyVectorEnv", "SubprocessVectorEnv", "as_numpy", "make_vector_env"]

BACKENDS = ("inline", "subprocess", "ray")


def make_vector_env(
    env_config: Any, n_envs: int, backend: str = "inline", workers: int = 0, seed: int = 0,
    restart_workers: bool = False, step_timeout_s: float | None = None,
) -> VectorEnv:
    """``n_envs`` copies of the env that ``env_config`` describes; env ``k`` is seeded ``seed + k``.

    ``workers`` (subprocess and ray backends): 0 means one per env, at most one per CPU of
    this machine.  ``restart_workers`` (subprocess and ray backends): restart a dead or hung worker
    instead of stopping.  ``step_timeout_s`` (every backend; inline since issue 38): how long one env call may take
    before its worker is taken as hung (None: ``chunks.STEP_TIMEOUT_S``, 300 s; 0: no limit).
    A natively vectorised kind (a ``VectorFactory``, e.g. VMAS) is built as one simulator
    of ``n_envs`` environments in this process; ``backend`` and ``workers`` do not apply.
    """
    if n_envs < 1:
        raise ValueError(f"n_envs must be at least 1, got {n_envs}")
    native = vector_factory(env_config)
    if native is not None:
        return native(env_config, n_envs, seed)
    if backend == "inline":  # in-process envs are timed too (harl.rundir.signals.EnvWatch)
        return InlineVectorEnv(env_config, n_envs, seed, step_timeout_s=STEP_TIMEOUT_S if step_timeout_s is None else step_timeout_s)
    if workers <= 0:
        workers = min(n_envs, os.cpu_count() or 1)
    if backend == "subprocess":
        return SubprocessVectorEnv(env_config, n_envs, workers, seed, restart_workers, step_timeout_s)
    if backend == "ray":  # imports ray only when chosen
        from harl.envs.vector.ray_actors import RayVectorEnv

        return RayVectorEnv(env_config, n_envs, workers, seed, restart_workers, step_timeout_s)
    raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
