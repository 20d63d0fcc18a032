"""MAT's own MPE simple_spread (PKU-MARL/Multi-Agent-Transformer, ``mat/envs/mpe``) as a harl env.

The parity runs of ``benchmarks/mat_parity.py`` train harl's MAT on the very env code MAT's
MPE runner steps, so that the two sides differ only in the learning code.  This module wraps
that env for ``[env] kind = "python"``::

    [env]
    kind = "python"
    factory = "benchmarks.mat_parity_env:make_env"

MAT's env is imported from a checkout of MAT's repository (``MAT_REF``, default
``/work/mat_ref``); its ``import gym`` is answered by gymnasium (only ``gym.Env``,
``gym.Space`` and ``gym.spaces`` are used).  ``mat/envs/__init__.py`` (absl flags for SMAC)
is skipped.  What the wrapper adds is the harl protocol only:

* actions: harl's Discrete index ``a`` is handed to MAT's env as the one-hot row it expects
  (MAT's runner does ``np.eye(5)[a]``);
* the random generator: MAT's scenario draws from numpy's global generator (``env.seed``
  seeds it); each copy here keeps its own ``RandomState`` and swaps it in around MAT's
  ``reset`` (the only place the scenario draws), so copies and the evaluator's envs do not
  reseed each other;
* the episode: MAT's env reports ``done`` after ``episode_length`` steps (25); here that is a
  truncation (a time limit), as it is for MAT's buffer patch ("MPE's last step is a timeout").

Rewards and observations are MAT's as they are: every agent gets the sum of the agents'
rewards (``shared_reward``), each observation ends with the agent's one-hot id (21 numbers
for 3 agents); the state is the observations concatenated (MAT's ``share_obs``).
"""

from __future__ import annotations

import os
import sys
import types
from argparse import Namespace
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from harl.envs.protocol import EnvStep

MAT_REF = Path(os.environ.get("MAT_REF", "/work/mat_ref"))


def import_mat_mpe() -> Any:
    """MAT's ``mat.envs.mpe.MPE_env`` module from ``MAT_REF``, without ``mat/envs/__init__.py``."""
    if "mat.envs.mpe.MPE_env" in sys.modules:
        return sys.modules["mat.envs.mpe.MPE_env"]
    root = MAT_REF / "mat"
    if not (root / "envs" / "mpe" / "MPE_env.py").is_file():
        raise FileNotFoundError(f"MAT's MPE env is not at {root}/envs/mpe (set MAT_REF to a checkout of "
                                "PKU-MARL/Multi-Agent-Transformer)")
    import gymnasium

    sys.modules.setdefault("gym", gymnasium)
    sys.modules.setdefault("gym.spaces", gymnasium.spaces)
    sys.modules.setdefault("gym.envs", gymnasium.envs)
    sys.modules.setdefault("gym.envs.registration", gymnasium.envs.registration)
    for name, path in (("mat", root), ("mat.envs", root / "envs")):
        if name not in sys.modules:  # bare packages: their __init__ is not run
            package = types.ModuleType(name)
            package.__path__ = [str(path)]
            sys.modules[name] = package
    import importlib

    return importlib.import_module("mat.envs.mpe.MPE_env")


class MATSpread:
    """MAT's ``MPEEnv(simple_spread)`` behind harl's ``MultiAgentEnv`` protocol."""

    def __init__(self, n_agents: int = 3, episode_length: int = 25) -> None:
        module = import_mat_mpe()
        args = Namespace(scenario_name="simple_spread", num_agents=n_agents, num_landmarks=n_agents,
                         episode_length=episode_length)
        self._env = module.MPEEnv(args)
        self.n_agents = n_agents
        self._n_actions = int(self._env.action_space[0].n)
        self._eye = np.eye(self._n_actions)
        obs_dim = int(self._env.observation_space[0].shape[0])
        self.observation_spaces = [spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32) for _ in range(n_agents)]
        self.action_spaces = [spaces.Discrete(self._n_actions) for _ in range(n_agents)]
        self.state_space = spaces.Box(-np.inf, np.inf, (obs_dim * n_agents,), np.float32)
        self._rng = np.random.RandomState()
        self.summary = "PKU-MARL MAT's own MPE simple_spread (benchmarks/mat_parity_env.py)"

    def _pack(self, obs_n: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
        obs = [np.asarray(o, dtype=np.float32) for o in obs_n]
        return obs, np.concatenate(obs)

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, None]:
        if seed is not None:
            self._rng = np.random.RandomState(seed)
        outside = np.random.get_state()
        np.random.set_state(self._rng.get_state())
        try:
            obs_n = self._env.reset()
        finally:
            self._rng.set_state(np.random.get_state())
            np.random.set_state(outside)
        obs, state = self._pack(obs_n)
        return obs, state, None

    def step(self, actions: Any) -> EnvStep:
        one_hot = [self._eye[int(np.asarray(a).reshape(-1)[0])] for a in actions]
        obs_n, reward_n, done_n, _ = self._env.step(one_hot)
        obs, state = self._pack(obs_n)
        rewards = np.array([r[0] for r in reward_n], dtype=np.float32)
        truncated = bool(all(done_n))
        return EnvStep(obs, state, None, rewards, False, truncated)

    def get_rng_state(self) -> Any:
        return self._rng.get_state()

    def set_rng_state(self, state: Any) -> None:
        self._rng.set_state(state)

    def close(self) -> None:
        pass


def make_env(n_agents: int = 3, episode_length: int = 25) -> MATSpread:
    return MATSpread(n_agents, episode_length)
