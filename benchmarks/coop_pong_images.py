"""PettingZoo's cooperative_pong as a harl image env (``[env] kind = "python"``), max-pooled.

    [env]
    kind = "python"
    factory = "benchmarks.coop_pong_images:make_env"
    [env.kwargs]
    pool = 10             # 10 x 10 max-pool of the 280 x 480 screen: 28 x 48 x 1 uint8
    grayscale = true      # the game draws white on black: one channel says everything

Both paddles see the whole screen (PettingZoo's observation) and the state is the same screen.

Why not PettingZoo's own observations: cooperative_pong (PettingZoo 1.27) draws its screen
only when a ``render_mode`` is set; with the default ``render_mode=None`` every observation is
black.  With ``render_mode="rgb_array"`` the parallel env copies the full screen six times per
step (two renders, four observes) and steps at ~100 env-steps per CPU second here.  This
factory steps PettingZoo's AEC env with no render mode (same game, same RNG, same rewards),
draws the screen once per step with the game's own ``draw()`` and pools the surface's pixels
directly: ~1,300 env-steps per CPU second.  ``tests/envs/test_coop_pong_images.py`` pins its
frames, rewards and episode ends to the pooled observations of
``parallel_env(render_mode="rgb_array")``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from gymnasium import spaces

from harl.envs.protocol import EnvStep
from harl.errors import HarlError, MissingExtraError


def max_pool(image: np.ndarray, pool: int) -> np.ndarray:
    """``pool`` x ``pool`` max-pool over the first two axes of a 3-D image (any strides; edges
    that do not fill a window dropped): a 10-pixel ball stays lit at any position, where
    striding can step over it.  One axis at a time: numpy reduces a single axis far faster."""
    a, b = image.shape[0] // pool, image.shape[1] // pool
    x = image[: a * pool, : b * pool]
    x = x.reshape(a * pool, b, pool, x.shape[2]).max(axis=2)
    return x.reshape(a, pool, b, x.shape[2]).max(axis=1)


class CoopPongImages:
    """Two paddles, Discrete(3) actions each, shared reward, terminated on a miss, truncated at max_cycles."""

    n_agents = 2

    def __init__(self, pool: int = 10, grayscale: bool = True, max_cycles: int = 900) -> None:
        try:
            import pygame
            from pettingzoo.butterfly import cooperative_pong_v6
        except ImportError as exc:
            raise MissingExtraError("benchmarks/coop_pong_images.py", "pettingzoo", exc.name or "pettingzoo") from None
        if pool < 1:
            raise HarlError(f"benchmarks/coop_pong_images.py: env.kwargs.pool = {pool}; it must be 1 or more")
        self._pixels3d = pygame.surfarray.pixels3d
        with warnings.catch_warnings():  # the game's render() warns that no render mode is set
            warnings.simplefilter("ignore")
            self.env = cooperative_pong_v6.raw_env(max_cycles=max_cycles)
        if not all(hasattr(self.env, "env") and hasattr(self.env.env, name) for name in ("draw", "screen")):
            raise HarlError(
                "benchmarks/coop_pong_images.py: this PettingZoo's cooperative_pong has no game object with "
                "draw() and screen (written against PettingZoo 1.27); use kind = \"pettingzoo\" with "
                "[env.kwargs] render_mode = \"rgb_array\" instead"
            )
        self.agents = list(self.env.possible_agents)
        self.pool, self.grayscale = pool, grayscale
        h, w, c = self.env.observation_space(self.agents[0]).shape
        shape = (h // pool, w // pool, 1 if grayscale else c)
        self.observation_spaces = [spaces.Box(0, 255, shape, np.uint8) for _ in self.agents]
        self.action_spaces = [self.env.action_space(a) for a in self.agents]
        self.state_space = spaces.Box(0, 255, shape, np.uint8)

    def frame(self) -> np.ndarray:
        """The screen as the players see it: drawn, pooled, HWC uint8."""
        game = self.env.env
        game.draw()
        surface = self._pixels3d(game.screen)  # (W, H, 3), a view that locks the surface
        if self.grayscale:  # the brightest channel, taken on the view: ~5x faster than pooling RGB
            surface = np.maximum(np.maximum(surface[..., 0], surface[..., 1]), surface[..., 2])[..., None]
        small = max_pool(surface, self.pool)
        del surface
        return np.ascontiguousarray(small.transpose(1, 0, 2))

    def _observe(self) -> tuple[list[np.ndarray], np.ndarray, None]:
        image = self.frame()
        return [image, image.copy()], image, None

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, None]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.env.reset(seed=seed)
        return self._observe()

    def step(self, actions: Sequence[np.ndarray]) -> EnvStep:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for action in actions:  # AEC order: paddle_0 then paddle_1, as parallel_env steps it
                self.env.step(int(np.asarray(action).item()))
        images, state, avail = self._observe()
        r = np.array([self.env.rewards[a] for a in self.agents], dtype=np.float32)
        done_t = any(self.env.terminations[a] for a in self.agents)
        done_c = not done_t and any(self.env.truncations[a] for a in self.agents)
        return EnvStep(images, state, avail, r, done_t, done_c, None, {})

    def get_rng_state(self) -> dict:
        """The game's random stream (the ball's serve angles), for an exact resume."""
        return self.env.randomizer.bit_generator.state

    def set_rng_state(self, state: dict) -> None:
        """The next unseeded reset serves as the run would have."""
        self.env.randomizer.bit_generator.state = state

    def render(self) -> np.ndarray:
        """The full 280 x 480 RGB screen as drawn at the last reset or step (for ``harl render``)."""
        surface = self._pixels3d(self.env.env.screen)
        frame = np.ascontiguousarray(surface.transpose(1, 0, 2))
        del surface
        return frame

    def close(self) -> None:
        self.env.close()


def make_env(pool: int = 10, grayscale: bool = True, max_cycles: int = 900,
             render_mode: str | None = None) -> CoopPongImages:
    """``render_mode`` is taken for ``harl render``; the screen is drawn every step either way."""
    return CoopPongImages(pool, grayscale, max_cycles)
