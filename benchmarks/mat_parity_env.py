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


MPE2_LABEL = (0, 2, 1, 4, 3)
"""MAT's discrete action -> mpe2's with the same move (MAT: 1 = +x, 2 = -x, 3 = +y, 4 = -y; mpe2 the reverse)."""


def against_mpe2(episodes: int = 20, seed: int = 0) -> dict[str, float]:
    """Replay random actions in MAT's env and in harl's ``mpe`` env (mpe2's simple_spread_v3 with
    ``variant = "pettingzoo_1.22"``) from MAT's initial positions: the largest differences of the
    observations' first 18 numbers and of MAT's team reward against twice harl's, and the mean
    initial distance of a landmark from the origin on each side (MAT draws landmarks in
    ``0.8 * U(-1, 1)``, mpe2 in ``U(-1, 1)``)."""
    from harl.envs.mpe import MPEConfig, make_mpe_env

    mat = MATSpread()
    ours = make_mpe_env(MPEConfig(scenario="simple_spread", continuous_actions=False, variant="pettingzoo_1.22"))
    rng = np.random.default_rng(seed)
    obs_diff = reward_diff = 0.0
    radius = {"mat": [], "mpe2": []}
    for episode in range(episodes):
        mat.reset(seed + episode)
        ours.reset(seed + episode)
        radius["mpe2"] += [float(np.abs(lm.state.p_pos).max()) for lm in ours._world.landmarks]
        world = mat._env.world
        radius["mat"] += [float(np.abs(lm.state.p_pos).max()) for lm in world.landmarks]
        for theirs, mine in zip(world.agents + world.landmarks, ours._world.agents + ours._world.landmarks,
                                strict=True):
            mine.state.p_pos = theirs.state.p_pos.copy()
            mine.state.p_vel = theirs.state.p_vel.copy()
        for _ in range(25):
            actions = rng.integers(0, 5, size=3)
            a = mat.step(list(actions))
            b = ours.step([MPE2_LABEL[int(x)] for x in actions])
            obs_diff = max(obs_diff, max(float(np.abs(x[:18] - y).max()) for x, y in zip(a.obs, b.obs, strict=True)))
            reward_diff = max(reward_diff, float(np.abs(a.rewards - 2.0 * b.rewards).max()))
    return {"max_obs_diff": obs_diff, "max_reward_diff_mat_vs_2x_harl_legacy": reward_diff,
            "landmark_max_abs_coordinate_mat": max(radius["mat"]), "landmark_max_abs_coordinate_mpe2": max(radius["mpe2"])}


if __name__ == "__main__":
    print(against_mpe2())
