"""``policy.json``: what a deployment needs to know about an exported team, in plain JSON.

One entry per agent: its file, observation and action spaces, the distribution kind, the
model's input and output names with shapes (``"batch"`` for the free first axis) and dtypes,
and the GRU width.  The run's resolved pipeline, the checkpoint and harl's version travel
with it, so an exported team can be traced back to the run that trained it.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from harl.export.deploy import PARAMS, DeployActor
from harl.nets.heads import avail_size
from harl.rundir.files import MANIFEST

FORMAT_VERSION = 1


def harl_version() -> str:
    try:
        return metadata.version("harl")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def describe(space: spaces.Space) -> dict[str, Any]:
    """A gymnasium space as JSON (enough to rebuild it with ``space_of``)."""
    if isinstance(space, spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "dtype": str(space.dtype),
                "low": np.asarray(space.low).ravel().tolist(), "high": np.asarray(space.high).ravel().tolist()}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": np.asarray(space.nvec).ravel().tolist()}
    raise TypeError(f"cannot describe a {type(space).__name__} action space (Box, Discrete, MultiDiscrete)")


def _tensor(name: str, shape: list[Any], dtype: str) -> dict[str, Any]:
    return {"name": name, "shape": shape, "dtype": dtype}


def _action_shape(space: spaces.Space) -> list[Any]:
    if isinstance(space, spaces.Box):
        return ["batch", *space.shape]
    if isinstance(space, spaces.Discrete):
        return ["batch"]
    if isinstance(space, spaces.MultiDiscrete):
        return ["batch", int(np.asarray(space.nvec).size)]
    raise TypeError(f"no action shape for a {type(space).__name__} action space (Box, Discrete, MultiDiscrete)")


def _param_shapes(kind: str, space: spaces.Space) -> list[list[Any]]:
    width = int(np.prod(space.shape)) if isinstance(space, spaces.Box) else avail_size(space)
    return [["batch", width] for _ in PARAMS[kind]]


def agent_entry(index: int, file: str, module: DeployActor, obs_dim: int,
                space: spaces.Space) -> dict[str, Any]:
    inputs = [_tensor("obs", ["batch", obs_dim], "float32")]
    if module.masked:
        inputs.append(_tensor("avail", ["batch", avail_size(space)], "float32"))
    hidden = module.hidden_size
    if module.recurrent:
        inputs.append(_tensor("hidden", ["batch", hidden], "float32"))
    if module.last_action:
        inputs.append(_tensor("last_action", ["batch"], "int64"))
    outputs = [_tensor("action", _action_shape(space), "int64" if module.discrete else "float32")]
    if module.recurrent:
        outputs.append(_tensor("hidden_out", ["batch", hidden], "float32"))
    if module.with_params:
        outputs += [_tensor(n, s, "float32") for n, s in zip(PARAMS[module.kind], _param_shapes(module.kind, space))]
    return {"agent": index, "file": file, "observation_space": {"type": "Box", "shape": [obs_dim]},
            "action_space": describe(space), "distribution": module.kind, "hidden_size": hidden,
            "inputs": inputs, "outputs": outputs}


def joint_agent_entry(index: int, file: str, obs_dim: int, space: spaces.Space) -> dict[str, Any]:
    """An agent of a team that acts through one module (``"joint"`` in the manifest): its spaces."""
    return {"agent": index, "file": file, "observation_space": {"type": "Box", "shape": [obs_dim]},
            "action_space": describe(space), "distribution": "joint", "hidden_size": 0, "joint": True}


def write_manifest(out: Path, fmt: str, agents: list[dict[str, Any]], pipeline: str,
                   checkpoint: Path, joint: dict[str, Any] | None = None) -> Path:
    """``joint``: the one module every agent acts through (MAT), when the team has one."""
    data: dict[str, Any] = {"format_version": FORMAT_VERSION, "harl_version": harl_version(), "format": fmt,
                            "checkpoint": str(checkpoint), "agents": agents, "pipeline": pipeline}
    if joint is not None:
        data["joint"] = joint
    path = out / MANIFEST
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path

