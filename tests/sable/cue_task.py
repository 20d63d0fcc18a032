"""A tiny task for Sable's learning test: remember the cue shown at an episode's first step.

Each of two agents sees a one-hot cue (one of three) at the episode's first step and zeros after
it (with a flag for the first step), and scores 1 at every step its action is the cue; an episode
is 4 steps.  A policy without memory gets at most 1 + 3 * 1/3 = 2 per agent and episode, one with
memory 4.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from harl.envs.protocol import EnvStep

N_CUES, LENGTH = 3, 4


class CueTask:
    n_agents = 2

    def __init__(self) -> None:
        self.observation_spaces = [spaces.Box(0.0, 1.0, (N_CUES + 1,), np.float32) for _ in range(2)]
        self.action_spaces = [spaces.Discrete(N_CUES) for _ in range(2)]
        self.state_space = spaces.Box(0.0, 1.0, (N_CUES + 1,), np.float32)
        self.rng = np.random.default_rng()
        self.cue, self.t = 0, 0

    def _observe(self) -> tuple[list[np.ndarray], np.ndarray, None]:
        obs = np.zeros(N_CUES + 1, np.float32)
        if self.t == 0:
            obs[self.cue], obs[-1] = 1.0, 1.0
        return [obs.copy(), obs.copy()], obs, None

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, None]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.cue, self.t = int(self.rng.integers(N_CUES)), 0
        return self._observe()

    def step(self, actions: list[np.ndarray]) -> EnvStep:
        rewards = np.array([float(int(np.asarray(a).reshape(-1)[0]) == self.cue) for a in actions], np.float32)
        self.t += 1
        return EnvStep(*self._observe(), rewards, False, self.t >= LENGTH, info={})

    def close(self) -> None:
        pass


def make_env() -> CueTask:
    return CueTask()
