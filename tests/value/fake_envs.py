"""A tiny cooperative env for the value family's tests: both agents must name the episode's target.

Two agents, ``Discrete(3)`` actions; each observes the target (one-hot over 3) and the step
(t / length).  Step reward 1 for both when both pick the target, else 0; episodes last
``length`` steps (truncated).  Agent 1 may never take action 2 (its mask says so; taking it
raises).  The target (0 or 1) is drawn from the env's own generator at each reset, whose state
``get_rng_state`` returns, so a checkpoint can begin an episode again exactly.  ``no_state``:
the global state is empty (``(0,)``), for QMIX's refusal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.protocol import EnvStep
from harl.registry import register
from harl.settings import kind_field, setting


@attrs.frozen
class GuessConfig:
    """Both agents must name the target."""

    kind: str = kind_field("guess")
    max_steps: int = setting(4, "steps per episode (truncated)")
    no_state: bool = setting(False, "an empty global state")


class GuessEnv:
    n_agents = 2

    def __init__(self, config: GuessConfig | None = None) -> None:
        self.config = config or GuessConfig()
        self.observation_spaces = [spaces.Box(0.0, 1.0, (4,), np.float32) for _ in range(2)]
        self.action_spaces: list[spaces.Space] = [spaces.Discrete(3), spaces.Discrete(3)]
        self.state_space = spaces.Box(0.0, 1.0, (0 if self.config.no_state else 4,), np.float32)
        self.rng = np.random.default_rng(0)
        self.target = 0
        self.t = 0

    def _observe(self) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray]]:
        o = np.zeros(4, np.float32)
        o[self.target] = 1.0
        o[3] = self.t / self.config.max_steps
        state = np.zeros(0, np.float32) if self.config.no_state else o.copy()
        return [o.copy(), o.copy()], state, [np.ones(3, np.float32), np.array([1, 1, 0], np.float32)]

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray]]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.target = int(self.rng.integers(2))
        self.t = 0
        return self._observe()

    def step(self, actions: Sequence[Any]) -> EnvStep:
        a = [int(np.asarray(x).item()) for x in actions]
        if a[1] == 2:
            raise ValueError("agent 1 took its unavailable action 2")
        self.t += 1
        r = float(a[0] == self.target and a[1] == self.target)
        obs, state, avail = self._observe()
        return EnvStep(obs, state, avail, np.array([r, r], np.float32), False, self.t >= self.config.max_steps)

    def get_rng_state(self) -> Any:
        return self.rng.bit_generator.state

    def set_rng_state(self, state: Any) -> None:
        self.rng.bit_generator.state = state

    def close(self) -> None:
        pass


register("env", GuessConfig, GuessEnv)
