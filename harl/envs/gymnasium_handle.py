"""What every adapter around one gymnasium env does the same way: RNG state, render, close.

``GymEnv`` (one agent) and ``GymmaEnv`` (EPyMARL's multi-agent gymnasium envs) both hold
their env in ``self._env``; the exact-resume RNG state is the unwrapped env's ``np_random``.
"""

from __future__ import annotations

from typing import Any

import gymnasium


class GymnasiumHandle:
    """Mixin for an adapter whose gymnasium env is ``self._env``."""

    _env: gymnasium.Env

    def get_rng_state(self) -> dict[str, Any]:
        """The env's ``np_random`` state (what an unseeded ``reset`` draws from)."""
        return dict(self._env.unwrapped.np_random.bit_generator.state)

    def set_rng_state(self, state: dict[str, Any]) -> None:
        self._env.unwrapped.np_random.bit_generator.state = state

    def render(self) -> Any:
        """A frame; needs the env built with ``render_mode="rgb_array"``."""
        return self._env.render()

    def close(self) -> None:
        self._env.close()
