"""harl's actions as an environment takes them, for the adapters of gymnasium-style spaces.

harl's actors emit one array per agent: Box actions as floats, Discrete as a one-element
integer array counted from 0, MultiDiscrete as integers.  Environments want Box actions
inside their bounds, a Discrete action as a plain ``int`` offset by the space's ``start``,
and MultiDiscrete in the space's dtype and shape.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

SUPPORTED = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete)
"""The action spaces harl's actors have heads for."""


def unsupported_action(space: spaces.Space) -> str | None:
    """Why harl cannot act in ``space`` (None when it can)."""
    if isinstance(space, SUPPORTED):
        return None
    return f"action space {space}; harl's actors support Box, Discrete and MultiDiscrete"


def env_action(space: spaces.Space, action: Any) -> Any:
    """``action`` from harl's actor as ``space``'s env expects it (Box clipped into its bounds)."""
    if isinstance(space, spaces.Box):
        return np.clip(np.asarray(action, dtype=space.dtype).reshape(space.shape), space.low, space.high)
    if isinstance(space, spaces.Discrete):
        return int(np.asarray(action).item()) + int(space.start)
    return np.asarray(action).astype(space.dtype).reshape(space.shape)
