"""Any registered single-agent gymnasium environment as a one-agent ``MultiAgentEnv``.

::

    [env]
    kind = "gym"
    id = "Pendulum-v1"

The one agent observes the env's observation (flattened to float32; non-Box spaces via
``gymnasium.spaces.flatten``) and the global state is that same observation.  Actions:
Box (clipped into its bounds), Discrete (``start`` honoured) and MultiDiscrete.  The env is
built with ``gymnasium.make``, so its registered time limit applies and ends episodes as
truncated; ``terminated`` comes from the env.  Measured here, gymnasium's wrappers cost
nothing noticeable (Pendulum-v1 steps at ~40k/s with and without them), so unlike the MPE
and MaMuJoCo adapters this one uses the public API as it is.

Environments with their own dependencies (MuJoCo's HalfCheetah-v5 needs ``mujoco``:
``pip install "harl[mujoco]"``) report the missing package when built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.actions import env_action, unsupported_action
from harl.envs.gymnasium_handle import GymnasiumHandle
from harl.envs.protocol import EnvStep
from harl.errors import ConfigError, MissingExtraError
from harl.registry import register
from harl.settings import in_range, kind_field, setting


@attrs.frozen
class GymConfig:
    """``[env] kind = "gym"``: one registered gymnasium environment, played by one agent."""

    kind: str = kind_field("gym")
    id: str = setting("Pendulum-v1", "registered gymnasium id (e.g. CartPole-v1, HalfCheetah-v5)")
    max_episode_steps: int = setting(
        0, "steps per episode before truncation (0: the id's registered limit)", in_range(0)
    )
    kwargs: dict[str, Any] = setting(
        factory=dict, doc="keyword arguments for gymnasium.make ([env.kwargs] table)"
    )


def _make(config: GymConfig, render_mode: str | None) -> Any:
    import gymnasium

    from harl.envs.mamujoco import quiet_mujoco_compiler

    kwargs = dict(config.kwargs)
    if config.max_episode_steps > 0:
        kwargs["max_episode_steps"] = config.max_episode_steps
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    what = f'env kind "gym" (id "{config.id}")'
    try:
        with quiet_mujoco_compiler():
            return gymnasium.make(config.id, **kwargs)
    except gymnasium.error.DependencyNotInstalled as exc:
        if "mujoco" in str(exc).lower():
            raise MissingExtraError(what, "mujoco", "mujoco") from exc
        raise ConfigError(f"{what} needs a package that is not installed: {exc}") from exc
    except gymnasium.error.Error as exc:  # unknown id, bad version, ...
        raise ConfigError(f"env.id: {exc}") from None


def _check_action_space(space: spaces.Space, env_id: str) -> None:
    problem = unsupported_action(space)
    if problem is not None:
        raise ConfigError(f'env.id: "{env_id}" has {problem}')


class GymEnv(GymnasiumHandle):
    """One gymnasium env seen as a team of one (see the module docstring)."""

    n_agents = 1

    def __init__(self, config: GymConfig, render_mode: str | None = None) -> None:
        env = _make(config, render_mode)
        self.config = config
        self._env = env
        obs_space = env.observation_space
        self._box_obs = isinstance(obs_space, spaces.Box)
        self._obs_space = obs_space
        size = int(np.prod(obs_space.shape)) if self._box_obs else spaces.flatdim(obs_space)
        observation = spaces.Box(-np.inf, np.inf, (size,), np.float32)
        action = env.action_space
        _check_action_space(action, config.id)
        self.observation_spaces: list[spaces.Box] = [observation]
        self.action_spaces: list[spaces.Space] = [action]
        self.state_space: spaces.Box = observation
        self._action = action

    def _flat(self, obs: Any) -> np.ndarray:
        if self._box_obs:
            return np.asarray(obs, dtype=np.float32).reshape(-1)
        return np.asarray(spaces.flatten(self._obs_space, obs), dtype=np.float32)

    def reset(
        self, seed: int | None = None
    ) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray] | None]:
        obs, _ = self._env.reset(seed=seed)
        flat = self._flat(obs)
        return [flat], flat, None

    def step(self, actions: Sequence[np.ndarray]) -> EnvStep:
        obs, reward, terminated, truncated, _ = self._env.step(env_action(self._action, actions[0]))
        flat = self._flat(obs)
        terminated = bool(terminated)
        # A terminal state wins over the time limit: its value is zero either way.
        truncated = bool(truncated) and not terminated
        rewards = np.array([reward], dtype=np.float32)
        return EnvStep([flat], flat, None, rewards, terminated, truncated)


def make_gym_env(config: GymConfig, render_mode: str | None = None) -> GymEnv:
    """Build the env; ``render_mode="rgb_array"`` enables ``render()``."""
    return GymEnv(config, render_mode)


register("env", GymConfig, make_gym_env)
