"""Two different agents meet at a target: train with `harl train examples/custom_env.toml`."""

import numpy as np
from gymnasium import spaces

from harl.envs.protocol import EnvStep


def box(n: int) -> spaces.Box:
    return spaces.Box(-np.inf, np.inf, (n,), np.float32)


class Rendezvous:
    """A glider (Box action: a velocity) and a walker (MultiDiscrete: a grid step) chase a target."""

    n_agents = 2

    def __init__(self, max_steps: int, step_size: float) -> None:
        self.max_steps, self.step_size = max_steps, step_size
        self.observation_spaces = [box(4), box(6)]  # own position + target (+ the glider's position)
        self.action_spaces = [spaces.Box(-1.0, 1.0, (2,), np.float32), spaces.MultiDiscrete([3, 3])]
        self.state_space = box(6)  # glider, walker, target
        self.rng = np.random.default_rng()

    def _observe(self):
        state = self.pos.reshape(-1).astype(np.float32)
        return [state[[0, 1, 4, 5]], state[[2, 3, 4, 5, 0, 1]]], state, None

    def reset(self, seed=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.pos, self.t = self.rng.uniform(-1, 1, size=(3, 2)), 0
        return self._observe()

    def step(self, actions):
        self.pos[0] += self.step_size * np.clip(actions[0], -1.0, 1.0)
        self.pos[1] += self.step_size * (np.asarray(actions[1]) - 1)  # {0, 1, 2} -> {-1, 0, +1}
        self.t += 1
        distance = np.linalg.norm(self.pos[:2] - self.pos[2], axis=1)
        terminated = bool((distance < self.step_size).all())  # both arrived: the episode ends
        truncated = not terminated and self.t >= self.max_steps
        rewards = np.full(2, -distance.sum(), np.float32)  # one team reward
        info = {"final_distance": float(distance.sum())} if terminated or truncated else {}
        return EnvStep(*self._observe(), rewards, terminated, truncated, info=info)

    def close(self):
        pass


def make_env(max_steps: int = 25, step_size: float = 0.1) -> Rendezvous:
    return Rendezvous(max_steps, step_size)
