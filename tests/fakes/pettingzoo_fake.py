"""A tiny PettingZoo parallel env whose three agents differ in every way harl must handle.

- ``walker``: Box(3) observations, Box(2) actions in [-1, 1];
- ``picker``: a Dict observation with ``observation`` Box(4) and ``action_mask`` (3 actions,
  the one equal to ``step % 3`` forbidden), Discrete(3, start=1) actions;
- ``counter``: a Discrete(5) observation (the step), MultiDiscrete([2, 3]) actions; it leaves
  the episode (terminated) after ``leave_at`` steps.

Rewards: walker 0.5 + its clipped first action, picker its action, counter 1.  The episode
is truncated after ``max_steps`` steps, or terminated there when ``end = "terminate"``.
Every action received is recorded in ``received`` (to check what leaving agents are sent).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo.utils.env import AECEnv, ParallelEnv

AGENTS = ["walker", "picker", "counter"]


class FakeParallelEnv(ParallelEnv):
    metadata = {"name": "fake_v0", "is_parallelizable": True}

    def __init__(self, max_steps: int = 4, leave_at: int = 2, end: str = "truncate", has_state: bool = True,
                 action_space: str = "Box", render_mode: str | None = None) -> None:
        self.possible_agents = list(AGENTS)
        self.max_steps, self.leave_at, self.end = max_steps, leave_at, end
        self.render_mode = render_mode
        walker_action = (spaces.Box(-1.0, 1.0, (2,), np.float32) if action_space == "Box"
                         else spaces.MultiBinary(2))
        self._obs = {"walker": spaces.Box(-10.0, 10.0, (3,), np.float32),
                     "picker": spaces.Dict({"observation": spaces.Box(0.0, 1.0, (4,), np.float32),
                                            "action_mask": spaces.Box(0, 1, (3,), np.int8)}),
                     "counter": spaces.Discrete(5)}
        self._act = {"walker": walker_action, "picker": spaces.Discrete(3, start=1),
                     "counter": spaces.MultiDiscrete([2, 3])}
        if has_state:
            self.state_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.received: list[dict[str, Any]] = []
        self.t = 0
        self.offset = 0.0

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self._act[agent]

    def state(self) -> np.ndarray:
        if not hasattr(self, "state_space"):
            raise NotImplementedError
        return np.array([self.t, self.offset], dtype=np.float32)

    def _observe(self) -> dict[str, Any]:
        mask = np.ones(3, dtype=np.int8)
        mask[self.t % 3] = 0
        raw = {"walker": np.full(3, self.t + self.offset, dtype=np.float32),
               "picker": {"observation": np.full(4, 0.25, dtype=np.float32), "action_mask": mask},
               "counter": min(self.t, 4)}
        return {name: raw[name] for name in self.agents}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.offset = float(np.random.default_rng(seed).integers(100))
        self.t = 0
        self.agents = list(AGENTS)
        return self._observe(), {name: {} for name in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        self.received.append(actions)
        self.t += 1
        values = {"walker": 0.5 + float(np.clip(actions.get("walker", [0.0])[0], -1, 1)),
                  "picker": float(actions.get("picker", 0)), "counter": 1.0}
        rewards = {name: values[name] for name in self.agents}
        last = self.t >= self.max_steps
        terminations = {name: (last and self.end == "terminate") or (name == "counter" and self.t >= self.leave_at)
                        for name in self.agents}
        truncations = {name: last and self.end == "truncate" for name in self.agents}
        obs = self._observe()
        self.agents = [name for name in self.agents if not (terminations[name] or truncations[name])]
        return obs, rewards, terminations, truncations, {name: {} for name in rewards}

    def render(self) -> np.ndarray:
        return np.zeros((4, 4, 3), dtype=np.uint8)


def make(**kwargs: Any) -> FakeParallelEnv:
    return FakeParallelEnv(**kwargs)


def not_an_env() -> dict[str, int]:
    return {"agents": 2}


class _TurnBased(AECEnv):
    metadata = {"name": "turns_v0"}

    def __init__(self) -> None:
        self.possible_agents = ["x", "o"]


def turn_based() -> AECEnv:
    return _TurnBased()
