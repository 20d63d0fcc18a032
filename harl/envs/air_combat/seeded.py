"""What the air-combat envs do the same way: their numpy generator, and nothing to close.

Each env draws its episodes' starts from ``self._rng`` (a ``numpy.random.Generator``), so that
generator's state is the exact-resume RNG state; each episode's JSBSim instance is dropped at
the next reset, so ``close`` has nothing to release.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class SeededEnv:
    """Mixin for an air-combat env whose random numbers all come from ``self._rng``."""

    _rng: np.random.Generator

    def get_rng_state(self) -> dict[str, Any]:
        return dict(self._rng.bit_generator.state)

    def set_rng_state(self, state: dict[str, Any]) -> None:
        self._rng.bit_generator.state = state

    def close(self) -> None:
        pass
