"""PettingZoo's cooperative_pong as a harl image env (``[env] kind = "python"``), downsampled.

    [env]
    kind = "python"
    factory = "benchmarks.coop_pong_images:make_env"
    [env.kwargs]
    stride = 8            # every 8th pixel of the 280 x 480 RGB screen: 35 x 60 x 3 uint8

Both paddles see the screen (HWC uint8, as PettingZoo gives it) and the state is the same
screen.  The learning and throughput figures of docs/images.md use it; once PettingZoo's
own kind (``kind = "pettingzoo"`` with a resize wrapper) is in, it is the general path.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gymnasium import spaces

from harl.envs.protocol import EnvStep
from harl.errors import MissingExtraError


class CoopPongImages:
    """Two paddles, Discrete(3) actions each, per-agent rewards, terminated on a miss, truncated at max_cycles."""

    n_agents = 2

    def __init__(self, stride: int = 8, max_cycles: int = 900) -> None:
        try:
            from pettingzoo.butterfly import cooperative_pong_v6
        except ImportError as exc:
            raise MissingExtraError("benchmarks/coop_pong_images.py", "pettingzoo", exc.name or "pettingzoo") from None

        self.env = cooperative_pong_v6.parallel_env(max_cycles=max_cycles)
        self.agents = list(self.env.possible_agents)
        self.stride = stride
        h, w, c = self.env.observation_space(self.agents[0]).shape
        shape = (-(-h // stride), -(-w // stride), c)
        self.observation_spaces = [spaces.Box(0, 255, shape, np.uint8) for _ in self.agents]
        self.action_spaces = [self.env.action_space(a) for a in self.agents]
        self.state_space = spaces.Box(0, 255, shape, np.uint8)

    def _small(self, image: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(image[:: self.stride, :: self.stride])

    def _observe(self, obs: dict) -> tuple[list[np.ndarray], np.ndarray, None]:
        images = [self._small(obs[a]) for a in self.agents]
        return images, images[0], None

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, None]:
        obs, _ = self.env.reset(seed=seed)
        self._last = obs
        return self._observe(obs)

    def step(self, actions: Sequence[np.ndarray]) -> EnvStep:
        act = {a: int(np.asarray(x).item()) for a, x in zip(self.agents, actions)}
        obs, rewards, terminated, truncated, _ = self.env.step(act)
        self._last = obs or self._last  # PettingZoo returns no observations once every agent is done
        images, state, avail = self._observe(self._last)
        r = np.array([rewards.get(a, 0.0) for a in self.agents], dtype=np.float32)
        done_t = any(terminated.get(a, False) for a in self.agents)
        done_c = not done_t and any(truncated.get(a, False) for a in self.agents)
        return EnvStep(images, state, avail, r, done_t, done_c, None, {})

    def close(self) -> None:
        self.env.close()


def make_env(stride: int = 8, max_cycles: int = 900) -> CoopPongImages:
    return CoopPongImages(stride, max_cycles)
