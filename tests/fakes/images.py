"""A tiny image env: each agent sees a lit pixel and must say which half of its image it is in.

Observations are ``uint8`` images, HWC (``channels = "last"``) or CHW (``"first"``); the
global state is an image too (every agent's lit pixel, HWC) or a vector of the sides
(``state = "vector"``).  A right answer pays 1 (Discrete(2) actions), or ``1 - |a - target|``
with ``target = -0.5 / +0.5`` for left / right (Box actions), so a random policy scores about
half of what a policy that reads the picture does.  ``render()`` draws the pixels (for
``harl render``).  Importing registers the ``"images"`` kind.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.protocol import EnvStep
from harl.registry import register
from harl.settings import kind_field, one_of, setting

SIZE = 6
N_AGENTS = 2


@attrs.frozen
class ImagesConfig:
    kind: str = kind_field("images")
    channels: str = setting("last", "HWC (last) or CHW (first) observations", one_of(("last", "first")))
    state: str = setting("image", "an image state or a vector one", one_of(("image", "vector")))
    actions: str = setting("discrete", "Discrete(2) or Box(1) actions", one_of(("discrete", "box")))
    episode_length: int = setting(4, "steps per episode")
    blank_agent: int = setting(-1, "an agent whose images stay black, as an env that never draws (-1: none)")


class ImagesEnv:
    n_agents = N_AGENTS

    def __init__(self, config: ImagesConfig | None = None, render_mode: str | None = None) -> None:
        self.config = config or ImagesConfig()
        shape = (SIZE, SIZE, 3) if self.config.channels == "last" else (3, SIZE, SIZE)
        self.observation_spaces = [spaces.Box(0, 255, shape, np.uint8) for _ in range(N_AGENTS)]
        self.action_spaces: list[spaces.Space] = [
            spaces.Discrete(2) if self.config.actions == "discrete" else spaces.Box(-1.0, 1.0, (1,), np.float32)
            for _ in range(N_AGENTS)]
        self.state_space = (spaces.Box(0, 255, (SIZE, SIZE, 3), np.uint8) if self.config.state == "image"
                            else spaces.Box(0.0, 1.0, (N_AGENTS,), np.float32))
        self.rng = np.random.default_rng(0)
        self.t = 0
        self.pixels = np.zeros((N_AGENTS, 2), dtype=np.int64)

    def _observe(self) -> tuple[list[np.ndarray], np.ndarray, None]:
        self.pixels = self.rng.integers(0, SIZE, size=(N_AGENTS, 2))
        state = np.zeros((SIZE, SIZE, 3), dtype=np.uint8)
        obs = []
        for i, (row, col) in enumerate(self.pixels):
            image = np.zeros((SIZE, SIZE, 3), dtype=np.uint8)
            image[row, col, i] = 0 if i == self.config.blank_agent else 255
            state[row, col, i] = 255
            obs.append(image if self.config.channels == "last" else image.transpose(2, 0, 1).copy())
        if self.config.state == "vector":
            return obs, (self.pixels[:, 1] >= SIZE // 2).astype(np.float32), None
        return obs, state, None

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, None]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        return self._observe()

    def step(self, actions: Sequence[np.ndarray]) -> EnvStep:
        right = self.pixels[:, 1] >= SIZE // 2
        if self.config.actions == "discrete":
            rewards = np.array([float(int(np.asarray(a).item()) == int(r)) for a, r in zip(actions, right)])
        else:
            target = np.where(right, 0.5, -0.5)
            rewards = np.array([1.0 - abs(float(np.asarray(a).item()) - t) for a, t in zip(actions, target)])
        self.t += 1
        obs, state, avail = self._observe()
        return EnvStep(obs, state, avail, rewards.astype(np.float32), False,
                       self.t >= self.config.episode_length, None, {})

    def render(self) -> np.ndarray:
        """The lit pixels of every agent, 4x enlarged: a (24, 24, 3) uint8 frame for ``harl render``."""
        frame = np.zeros((SIZE, SIZE, 3), dtype=np.uint8)
        for i, (row, col) in enumerate(self.pixels):
            frame[row, col, i] = 255
        return frame.repeat(4, 0).repeat(4, 1)

    def close(self) -> None:
        pass


register("env", ImagesConfig, ImagesEnv)
