"""One agent's PettingZoo observation as harl sees it: an observation array and a mask.

A Box observation is kept as it is (an image stays ``(H, W, C)`` and uint8, for an image
encoder); any other space harl flattens with gymnasium (a Discrete observation becomes
one-hot).  A Dict with an ``action_mask`` entry (PettingZoo's convention) splits into its
``observation`` entry and the agent's available-action mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.checks import avail_width


@attrs.frozen
class ObservationView:
    """How agent ``name``'s raw observations become harl's (see the module docstring)."""

    name: str
    raw: spaces.Space
    """The observation part of the env's space (a Dict's ``observation`` entry)."""
    space: spaces.Box
    """What harl sees."""
    masked: bool
    """The env's space is a Dict with ``action_mask``."""
    mask_width: int

    def observe(self, raw: Any) -> tuple[np.ndarray, np.ndarray | None]:
        """(observation, mask or None) from what the env returned for this agent."""
        mask = None
        if self.masked:
            mask = np.asarray(raw["action_mask"], dtype=np.float32).reshape(self.mask_width)
            raw = raw["observation"]
        if isinstance(self.raw, spaces.Box):  # reshaped: flattened where the view is flat
            return np.asarray(raw, dtype=self.space.dtype).reshape(self.space.shape), mask
        return np.asarray(spaces.flatten(self.raw, raw), dtype=np.float32), mask

    def blank(self) -> np.ndarray:
        """The observation of an agent that has left the episode: zeros."""
        return np.zeros(self.space.shape, dtype=self.space.dtype)


def observation_view(name: str, space: spaces.Space, action_space: spaces.Space,
                     flatten: bool = False) -> ObservationView | str:
    """The view of agent ``name`` (``flatten``: 1-D even for a Box), or why harl cannot read it."""
    masked = isinstance(space, spaces.Dict) and "action_mask" in space.spaces
    width = avail_width(action_space)
    if masked and isinstance(space, spaces.Dict):
        if set(space.spaces) != {"observation", "action_mask"}:
            return (f"agent {name!r} observes {space}: a Dict with an action_mask must hold exactly "
                    "observation and action_mask")
        mask_shape = space["action_mask"].shape
        if width == 0 or mask_shape is None or int(np.prod(mask_shape)) != width:
            return (f"agent {name!r} has an action_mask of shape {mask_shape} for action space "
                    f"{action_space}, which needs {width} entries")
        space = space["observation"]
    if isinstance(space, spaces.Box):
        return ObservationView(name, space, flat_box(space) if flatten else space, masked, width)
    try:
        flat = spaces.flatten_space(space)
    except (NotImplementedError, TypeError, ValueError):
        flat = None
    if not isinstance(flat, spaces.Box):
        return (f"agent {name!r} observes {space}, which harl cannot flatten into an array "
                "(Box, Discrete, MultiDiscrete, MultiBinary, Tuple and Dict spaces can be)")
    box = spaces.Box(flat.low.astype(np.float32), flat.high.astype(np.float32), dtype=np.float32)
    return ObservationView(name, space, box, masked, width)


def flat_box(box: spaces.Box) -> spaces.Box:
    """``box`` as a 1-D Box of the same dtype and bounds."""
    return spaces.Box(box.low.reshape(-1), box.high.reshape(-1), dtype=box.dtype)


def side_by_side(boxes: Sequence[spaces.Box]) -> tuple[spaces.Box, bool]:
    """The space of the agents' observations side by side, and whether they stack as channels.

    Images of one height and width stack along their last axis (``(H, W, C1 + C2 + ...)``,
    still an image); anything else is flattened and concatenated.
    """
    images = all(len(b.shape) == 3 for b in boxes) and len({b.shape[:2] for b in boxes}) == 1
    dtype = np.result_type(*[b.dtype for b in boxes])
    if images:
        low = np.concatenate([b.low for b in boxes], axis=-1)
        high = np.concatenate([b.high for b in boxes], axis=-1)
    else:
        low = np.concatenate([b.low.reshape(-1) for b in boxes])
        high = np.concatenate([b.high.reshape(-1) for b in boxes])
    return spaces.Box(low.astype(dtype), high.astype(dtype), dtype=dtype), images


def put_side_by_side(obs: Sequence[np.ndarray], images: bool) -> np.ndarray:
    """The agents' observations as one state (see ``side_by_side``)."""
    return np.concatenate(obs, axis=-1) if images else np.concatenate([o.reshape(-1) for o in obs])
