"""Gymnasium-registered multi-agent envs (EPyMARL's "gymma"): LBF, RWARE and their kin.

::

    [env]
    kind = "gymma"
    id = "lbforaging:Foraging-8x8-2p-2f-coop-v3"   # "module:EnvId": gymnasium imports the module
    team_reward = true                              # every agent gets the sum (EPyMARL's common reward)

Such an env speaks gymnasium's API with one entry per agent: a ``Tuple`` of observation
and action spaces, a list of rewards, one ``terminated`` flag (or one per agent).  Level-Based
Foraging (``lbforaging``) and the multi-robot warehouse (``rware``) register themselves
this way.  Each agent's observation is flattened to float32; the global state is the
agents' observations side by side (as EPyMARL's wrapper does); all actions are always
available (no masks).  An episode that hits the time limit of ``gymnasium.make``
(``max_episode_steps``) is truncated; LBF and RWARE also end episodes themselves, which
they report as terminated.
"""

from __future__ import annotations

import importlib.util
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

PACKAGES = {"lbforaging": "lbforaging", "rware": "rware"}
"""Id prefixes of the suites harl's ``pettingzoo`` extra installs."""


@attrs.frozen
class GymmaConfig:
    """``[env] kind = "gymma"``: a multi-agent env registered with gymnasium (LBF, RWARE)."""

    kind: str = kind_field("gymma")
    id: str = setting("lbforaging:Foraging-8x8-2p-2f-coop-v3",
                      'gymnasium id, "module:EnvId" to import its package first (e.g. "rware:rware-tiny-2ag-v2")')
    max_episode_steps: int = setting(
        0, "steps per episode before truncation (0: the env's own limit)", in_range(0))
    team_reward: bool = setting(
        True, "every agent gets the sum of all agents' rewards (EPyMARL's common reward; returns then "
              "compare with EPyMARL's), else each agent its own")
    kwargs: dict[str, Any] = setting(factory=dict, doc="keyword arguments for gymnasium.make ([env.kwargs] table)")


def _make(config: GymmaConfig, render_mode: str | None) -> Any:
    import gymnasium

    kwargs = dict(config.kwargs)
    if config.max_episode_steps > 0:
        kwargs["max_episode_steps"] = config.max_episode_steps
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    module = config.id.partition(":")[0] if ":" in config.id else ""
    if module in PACKAGES and importlib.util.find_spec(module) is None:
        raise MissingExtraError(f'env kind "gymma" (id "{config.id}")', "pettingzoo", PACKAGES[module])
    try:
        return gymnasium.make(config.id, **kwargs)
    except ModuleNotFoundError as exc:
        raise ConfigError(f'env.id: importing "{module or config.id}" failed: {exc}') from None
    except gymnasium.error.Error as exc:  # unknown id, bad version, ...
        raise ConfigError(f"env.id: {exc}") from None


def _per_agent(space: spaces.Space, what: str, env_id: str) -> list[spaces.Space]:
    if not isinstance(space, spaces.Tuple):
        raise ConfigError(f'env.id: "{env_id}" has {what} space {space}, not a Tuple with one entry per '
                          'agent, so it is not a multi-agent env; for a single-agent env use kind = "gym"')
    return list(space.spaces)


class GymmaEnv(GymnasiumHandle):
    """One gymnasium multi-agent env (see the module docstring)."""

    def __init__(self, config: GymmaConfig, render_mode: str | None = None) -> None:
        env = _make(config, render_mode)
        self.config = config
        self._env = env
        self._raw_spaces = _per_agent(env.observation_space, "observation", config.id)
        self.action_spaces: list[spaces.Space] = _per_agent(env.action_space, "action", config.id)
        for i, space in enumerate(self.action_spaces):
            problem = unsupported_action(space)
            if problem is not None:
                raise ConfigError(f'env.id: "{config.id}": agent {i} has {problem}')
        self.n_agents = len(self.action_spaces)
        if len(self._raw_spaces) != self.n_agents:
            raise ConfigError(f'env.id: "{config.id}" has {len(self._raw_spaces)} observation spaces for '
                              f"{self.n_agents} action spaces")
        self.observation_spaces: list[spaces.Box] = [
            spaces.Box(-np.inf, np.inf, (spaces.flatdim(s),), np.float32) for s in self._raw_spaces]
        size = sum(s.shape[0] for s in self.observation_spaces)
        self.state_space: spaces.Box = spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.summary = f"state: the agents' observations side by side ({size},)"

    def _observe(self, raw: Sequence[Any]) -> tuple[list[np.ndarray], np.ndarray]:
        obs = [np.asarray(spaces.flatten(s, o), dtype=np.float32) for s, o in zip(self._raw_spaces, raw)]
        return obs, np.concatenate(obs)

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, None]:
        raw, _ = self._env.reset(seed=seed)
        obs, state = self._observe(raw)
        return obs, state, None

    def step(self, actions: Sequence[Any]) -> EnvStep:
        joint = tuple(env_action(s, a) for s, a in zip(self.action_spaces, actions))
        raw, rewards, terminated, truncated, _ = self._env.step(joint)
        obs, state = self._observe(raw)
        reward = np.asarray(rewards, dtype=np.float32).reshape(self.n_agents)
        if self.config.team_reward:
            reward = np.full(self.n_agents, reward.sum(), dtype=np.float32)
        terminated = bool(np.all(terminated))
        # A terminal state wins over the time limit: its value is zero either way.
        truncated = bool(np.all(truncated)) and not terminated
        return EnvStep(obs, state, None, reward, terminated, truncated)


def make_gymma_env(config: GymmaConfig, render_mode: str | None = None) -> GymmaEnv:
    """Build the env; ``render_mode="rgb_array"`` enables ``render()``."""
    return GymmaEnv(config, render_mode)


register("env", GymmaConfig, make_gymma_env)
