"""harl: heterogeneous-agent RL as a pipeline of explicit, swappable stages.

::

    import harl
    result = harl.train("pipelines/happo_mpe_spread.toml", ["run.total_env_steps=20_000"])
    rows = harl.read_metrics(result.run_dir)

Every name is imported on first use: ``import harl`` stays light (env worker processes
import ``harl.envs`` and must not pull in torch).  See docs/python-api.md.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    # functions
    "load_pipeline": "harl.api", "pipeline_notes": "harl.api", "build": "harl.api", "start": "harl.api",
    "train": "harl.api", "resume": "harl.api", "evaluate": "harl.api", "read_metrics": "harl.api",
    "register": "harl.api", "check": "harl.api", "open_run": "harl.run.open", "load_policy": "harl.inference",
    "tune": "harl.api", "TuneResult": "harl.tune.command",
    # records and protocols
    "PipelineSpec": "harl.config.spec", "Trainer": "harl.trainer", "TrainResult": "harl.trainer",
    "Counters": "harl.trainer", "EvalStats": "harl.evaluator", "Callback": "harl.callbacks",
    "Sink": "harl.logging.sink", "SinkContext": "harl.logging.sink",
    # errors
    "HarlError": "harl.errors", "ConfigError": "harl.errors", "CheckpointError": "harl.errors",
    "MissingExtraError": "harl.errors", "ResourceError": "harl.errors", "EnvCrashedError": "harl.errors",
    "EnvProtocolError": "harl.errors", "NonFiniteError": "harl.errors", "StageError": "harl.errors",
    "RunLockedError": "harl.rundir.lock",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    """Import ``name`` from its module on first use (lazy: see the module docstring)."""
    if name not in _HOMES:
        raise AttributeError(f"module 'harl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
