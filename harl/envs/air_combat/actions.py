"""A policy's action as stick and throttle: continuous or a grid of discrete settings.

Both variants command (aileron, elevator, rudder, throttle).  Surfaces span [-1, 1]
around the trimmed position; the throttle spans [0.4, 0.9] (idle-ish to full military
power, no afterburner), so a centred action is level cruise.

- ``continuous``: ``Box(-1, 1, (4,))``; Gaussian samples outside the box are clipped.
- ``multidiscrete``: ``MultiDiscrete([41, 41, 41, 30])``: surfaces in steps of 0.05,
  throttle in 30 even steps.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

THROTTLE_RANGE = (0.4, 0.9)
GRID = np.array([41, 41, 41, 30])
ACTION_TYPES = ("continuous", "multidiscrete")


def action_space(action_type: str) -> spaces.Space:
    if action_type == "continuous":
        return spaces.Box(-1.0, 1.0, (4,), np.float32)
    return spaces.MultiDiscrete(GRID)


def to_controls(action: np.ndarray, action_type: str) -> np.ndarray:
    """Aileron, elevator, rudder in [-1, 1] and throttle in ``THROTTLE_RANGE``."""
    a = np.asarray(action, dtype=np.float64).reshape(4)
    if action_type == "continuous":
        unit = np.clip(a, -1.0, 1.0)
    else:
        unit = 2.0 * np.clip(a, 0, GRID - 1) / (GRID - 1) - 1.0
    low, high = THROTTLE_RANGE
    controls = unit.copy()
    controls[3] = low + (high - low) * (unit[3] + 1.0) / 2.0
    return controls
