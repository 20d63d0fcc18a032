"""A deterministic fake environment whose numbers are easy to predict in tests.

Agents deliberately differ (observation sizes, Box / Discrete / MultiDiscrete actions)
so that per-agent stacking bugs show.  Importing this module registers the "counting"
kind, which also happens in subprocess workers when they unpickle a ``CountingConfig``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.protocol import EnvStep
from harl.registry import register
from harl.settings import kind_field, setting

OBS_SIZES = (3, 5, 4)
STATE_SIZE = 4
FORBIDDEN_ACTION = 3
"""Agent 1 may never pick this action (its avail mask says so)."""


@attrs.frozen
class CountingConfig:
    """Settings of the fake env; the ``*_at`` counters are steps since construction."""

    kind: str = kind_field("counting")
    episode_length: int = setting(3, "steps before truncation")
    terminate_at: int | None = setting(None, "episode step that terminates instead")
    crash_at: int | None = setting(None, "lifetime step that raises RuntimeError")
    die_at: int | None = setting(None, "lifetime step that kills the process (exit code 3)")


class CountingEnv:
    """Observations, state and rewards are functions of (seed, episode, step) only.

    The observation of agent ``i`` is filled with ``seed * 1000 + episode * 100 + t + i / 10``;
    the reward of agent ``i`` after step ``t`` is ``t + i`` (mean over agents: ``t + 1``).
    Agent 2 is inactive from step 2 on; step 1 reports ``active=None`` (all alive).
    """

    n_agents = 3

    def __init__(self, config: CountingConfig | None = None) -> None:
        self.config = config or CountingConfig()
        self.observation_spaces = [
            spaces.Box(-np.inf, np.inf, (size,), np.float32) for size in OBS_SIZES
        ]
        self.action_spaces: list[spaces.Space] = [
            spaces.Box(-1.0, 1.0, (2,), np.float32),
            spaces.Discrete(4),
            spaces.MultiDiscrete([2, 3]),
        ]
        self.state_space = spaces.Box(-np.inf, np.inf, (STATE_SIZE,), np.float32)
        self.seed = 0
        self.episode = 0
        self.t = 0
        self.lifetime_steps = 0
        self.last_actions: list[np.ndarray] = []
        self.closed = False

    def _observe(self) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray]]:
        base = self.seed * 1000 + self.episode * 100 + self.t
        obs = [np.full(size, base + i / 10, dtype=np.float32) for i, size in enumerate(OBS_SIZES)]
        state = np.array([self.seed, self.episode, self.t, base], dtype=np.float32)
        avail = [
            np.zeros(0, dtype=np.float32),  # Box actions: no discrete choices to mask
            np.array([1, 1, 1, 0], dtype=np.float32),
            np.ones(5, dtype=np.float32),  # MultiDiscrete([2, 3]): masks concatenated
        ]
        return obs, state, avail

    def reset(
        self, seed: int | None = None
    ) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray] | None]:
        if seed is not None:
            self.seed = seed
            self.episode = 0
        else:
            self.episode += 1
        self.t = 0
        return self._observe()

    def step(self, actions: Sequence[np.ndarray]) -> EnvStep:
        config = self.config
        self.lifetime_steps += 1
        if config.crash_at is not None and self.lifetime_steps >= config.crash_at:
            raise RuntimeError(f"counting env crashed at step {self.lifetime_steps}")
        if config.die_at is not None and self.lifetime_steps >= config.die_at:
            os._exit(3)
        if np.shape(actions[0]) != (2,) or np.shape(actions[2]) != (2,):
            raise ValueError(f"bad action shapes {[np.shape(a) for a in actions]}")
        if int(np.asarray(actions[1]).item()) == FORBIDDEN_ACTION:
            raise ValueError("agent 1 took its forbidden action")
        self.last_actions = [np.array(a, copy=True) for a in actions]
        self.t += 1
        obs, state, avail = self._observe()
        rewards = np.array([self.t + i for i in range(self.n_agents)], dtype=np.float32)
        terminated = config.terminate_at is not None and self.t >= config.terminate_at
        truncated = not terminated and self.t >= config.episode_length
        active = None if self.t == 1 else np.array([True, True, self.t < 2])
        return EnvStep(
            obs, state, avail, rewards, terminated, truncated, active, {"counter": float(self.t)}
        )

    def close(self) -> None:
        self.closed = True


register("env", CountingConfig, CountingEnv)
