"""The frozen low-level flight controller of the ``*_hierarchy`` tasks: harl's own heading pilot.

LAG's hierarchical tasks put a high-level policy over a trained flight controller: each step
the policy picks a change of altitude, heading and speed (``MultiDiscrete([3, 5, 3])``), the
controller turns it into stick and throttle.  harl's controller is the actor of its own
``heading`` task (``pipelines/happo_air_combat_heading.toml``), whose observation is the
errors to a target followed by the aircraft's own features, so the stage is:

    high-level action -> (delta altitude, heading, speed) -> the heading task's observation
    (``controller_observation``) -> frozen actor (its deterministic mean) -> stick and throttle

The deltas are LAG's: altitude +100 / 0 / -100 m, heading -30 / -15 / 0 / +15 / +30 degrees,
speed +0.05 / 0 / -0.05 Mach (17 m/s); the heading observation's "fraction of the target's
time left" is held at ``TIME_LEFT``.

The weights ship with harl (``harl/envs/air_combat/data/heading_controller.pt``, a plain
state dict: ``base.*`` harl's MLP, ``head.mean.*`` the action mean).  They were made by::

    harl train pipelines/happo_air_combat_heading.toml --set run.total_env_steps=400000 \\
        --run-dir runs/heading-controller
    python -m harl.envs.air_combat.controller runs/heading-controller/checkpoints/iter_0000200.pt \\
        harl/envs/air_combat/data/heading_controller.pt

``[env] controller = "PATH"`` swaps in another (the same extraction from any checkpoint of a
heading run; ``controller_hidden_sizes`` / ``controller_activation`` if its network differs).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from harl.envs.air_combat.aircraft import OWN_FEATURES, FlightState, own_features
from harl.nets.mlp import MLP

SHIPPED = Path(__file__).parent / "data" / "heading_controller.pt"
"""The controller harl ships (module docstring for the command that made it)."""
DELTA_ALTITUDE_M = (100.0, 0.0, -100.0)
DELTA_HEADING_RAD = (-math.pi / 6, -math.pi / 12, 0.0, math.pi / 12, math.pi / 6)
DELTA_SPEED_MPS = (0.05 * 340.0, 0.0, -0.05 * 340.0)
HIGH_LEVEL_NVEC = (len(DELTA_ALTITUDE_M), len(DELTA_HEADING_RAD), len(DELTA_SPEED_MPS))
TIME_LEFT = 1.0
"""The heading task's time-left feature the controller sees: a target just set."""
OBS_SIZE = 4 + OWN_FEATURES
"""The heading task's observation size."""
ACTION_SIZE = 4


class _Head(nn.Module):
    def __init__(self, in_dim: int) -> None:
        super().__init__()
        self.mean = nn.Linear(in_dim, ACTION_SIZE)


class ControllerNet(nn.Module):
    """The heading task's actor as far as acting needs it: harl's MLP base and the action mean."""

    def __init__(self, hidden_sizes: Sequence[int], activation: str) -> None:
        super().__init__()
        self.base = MLP(OBS_SIZE, hidden_sizes, activation)
        self.head = _Head(self.base.out_dim)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head.mean(self.base(obs)).clamp(-1.0, 1.0)


def controller_observation(action: Sequence[int], state: FlightState) -> np.ndarray:
    """The heading task's observation for a high-level ``(altitude, heading, speed)`` choice."""
    return np.array([DELTA_ALTITUDE_M[int(action[0])] / 1000.0, DELTA_HEADING_RAD[int(action[1])] / math.pi,
                     DELTA_SPEED_MPS[int(action[2])] / 340.0, TIME_LEFT, *own_features(state)], np.float32)


def weights_problem(path: Path, hidden_sizes: Sequence[int], activation: str) -> str | None:
    """Why the weight file at ``path`` cannot drive the controller's network, or None."""
    if not path.is_file():
        return f"there is no file {path}"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same answer
        return f"{path} is not a torch weight file (torch.load could not read it: {type(exc).__name__})"
    if not isinstance(state, dict):
        return f"{path} holds a {type(state).__name__}, not a state dict"
    try:
        ControllerNet(hidden_sizes, activation).load_state_dict(state)
    except RuntimeError:
        return f"{path} does not fit it: {_shape_summary(state, hidden_sizes)}"
    return None


_NUMPY_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "leaky_relu": lambda x: np.where(x > 0, x, 0.01 * x),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
}


def _shape_summary(state: dict[str, Any], hidden_sizes: Sequence[int]) -> str:
    """What a mismatched state dict holds, against what the network expects, in one sentence."""
    linear = [state[key] for key in sorted(state, key=_layer_order)
              if key.endswith("weight") and getattr(state[key], "ndim", 0) == 2]
    if not linear or not all(key.startswith(("base.body.", "head.mean.")) for key in state):
        keys = ", ".join(list(state)[:3])
        return (f"it is not a controller's state dict (base.body.* and head.mean.*; its first keys: {keys}), "
                f"made by python -m harl.envs.air_combat.controller")
    found = [int(w.shape[0]) for w in linear[:-1]]
    return (f"it holds hidden sizes {found} over {int(linear[0].shape[1])} observations with "
            f"{int(linear[-1].shape[0])} actions; the controller is built with hidden sizes "
            f"{list(hidden_sizes)} over the heading task's {OBS_SIZE} observations and {ACTION_SIZE} actions")


def _layer_order(key: str) -> tuple[int, int]:
    parts = key.split(".")
    return (1, 0) if key.startswith("head.") else (0, int(parts[2]) if parts[2].isdigit() else 0)


class Controller:
    """The frozen controller: high-level actions of several aircraft in, stick and throttle out.

    It acts in numpy, layer by layer as ``ControllerNet`` (the same numbers to float32
    rounding): a torch call from inside an env worker would contend for the trainer's threads,
    which made a step 100 times slower on a loaded machine.
    """

    def __init__(self, path: Path, hidden_sizes: Sequence[int], activation: str) -> None:
        net = ControllerNet(hidden_sizes, activation)
        net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        self._layers: list[tuple[str, np.ndarray, np.ndarray]] = []
        for module in [*net.base.body, net.head.mean]:
            if isinstance(module, nn.Linear):
                self._layers.append(("linear", module.weight.detach().numpy().T.copy(),
                                     module.bias.detach().numpy().copy()))
            elif isinstance(module, nn.LayerNorm):
                self._layers.append(("norm", module.weight.detach().numpy().copy(),
                                     module.bias.detach().numpy().copy()))
            else:
                self._layers.append(("act", np.empty(0), np.empty(0)))
        self._activation = _NUMPY_ACTIVATIONS[activation]

    def act(self, observations: Sequence[np.ndarray]) -> np.ndarray:
        """``(n, 4)`` actions in [-1, 1] (``actions.to_controls``' continuous variant)."""
        x = np.stack(observations).astype(np.float32)
        for kind, a, b in self._layers:
            if kind == "linear":
                x = x @ a + b
            elif kind == "norm":
                mean = x.mean(-1, keepdims=True)
                var = ((x - mean) ** 2).mean(-1, keepdims=True)
                x = (x - mean) / np.sqrt(var + 1e-5) * a + b
            else:
                x = self._activation(x)
        return np.clip(x, -1.0, 1.0)


def extract(checkpoint: Path, out: Path, agent: int = 0) -> None:
    """Write the acting part of agent ``agent``'s actor in a heading run's checkpoint to ``out``."""
    state: dict[str, Any] = torch.load(checkpoint, map_location="cpu", weights_only=False)["policy"]
    prefix = f"actors.{agent}."
    kept = {key[len(prefix):]: value for key, value in state.items()
            if key.startswith(prefix) and not key.endswith("log_std")}
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(kept, out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m harl.envs.air_combat.controller CHECKPOINT OUT")
    extract(Path(sys.argv[1]), Path(sys.argv[2]))
