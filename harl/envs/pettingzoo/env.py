"""A PettingZoo parallel env as a ``MultiAgentEnv``.

The team is the env's ``possible_agents``, in that order.  An agent that leaves the
episode early (PettingZoo drops it from ``agents`` once it is terminated or truncated) is
inactive from then on: its observation is zeros, its reward 0, it is sent no action, and
``EnvStep.active`` says so, so its steps do not train.  The episode ends when no agent is
left (or every agent that acted was done): ``truncated`` when any of the last ones was
truncated (a time limit: bootstrap), else ``terminated``.

``agent_names`` are the ``possible_agents`` (as strings); ``agent_groups`` groups them by the
part of the name before its last ``_`` (``archer_0``, ``archer_1``, ``knight_0``: ``archer``
and ``knight``), PettingZoo's naming convention for an agent's kind or side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from harl.envs.actions import env_action, unsupported_action
from harl.envs.names import groups_by_prefix
from harl.envs.pettingzoo.build import build_parallel
from harl.envs.pettingzoo.spaces import (
    ObservationView,
    flat_box,
    observation_view,
    put_side_by_side,
    side_by_side,
)
from harl.envs.protocol import EnvStep
from harl.errors import ConfigError, EnvCrashedError
from harl.settings import InvalidSetting


def _refuse(config: Any, message: str) -> InvalidSetting:
    key = "factory" if config.factory else "env"
    what = config.factory or config.env
    return InvalidSetting(key, f'"{what}": {message}', suggest_default=False)


class PettingZooEnv:
    """One PettingZoo parallel env (see the module docstring)."""

    def __init__(self, config: Any, render_mode: str | None = None) -> None:
        self.config = config
        env = build_parallel(config, render_mode)
        self._env = env
        try:
            self._set_up(config, env)
        except InvalidSetting:
            env.close()
            raise

    def _set_up(self, config: Any, env: Any) -> None:
        self._names: list[str] = list(env.possible_agents)
        if not self._names:
            raise _refuse(config, "the env has no possible_agents")
        self._index = {name: i for i, name in enumerate(self._names)}
        self.n_agents = len(self._names)
        self.agent_names: list[str] = [str(name) for name in self._names]
        self.agent_groups: dict[str, list[str]] = groups_by_prefix(self.agent_names)
        self.action_spaces: list[spaces.Space] = [env.action_space(name) for name in self._names]
        views: list[ObservationView] = []
        for name, action_space in zip(self._names, self.action_spaces):
            problem = unsupported_action(action_space)
            if problem is not None:
                raise _refuse(config, f"agent {name!r} has {problem}")
            view = observation_view(name, env.observation_space(name), action_space, config.flatten)
            if isinstance(view, str):
                raise _refuse(config, view)
            views.append(view)
        self._views = views
        self.observation_spaces: list[spaces.Box] = [view.space for view in views]
        self._masked = any(view.masked for view in views)
        self._all_allowed = [np.ones(view.mask_width, dtype=np.float32) if view.masked else None
                             for view in views]
        env_state = _state_space(env)
        if env_state is not None and config.flatten:
            env_state = flat_box(env_state)
        if config.state == "env" and env_state is None:
            raise InvalidSetting("state", f'"{config.factory or config.env}" has no state_space / state(); '
                                          'use state = "observations" (the agents\' observations side by '
                                          "side)", suggest_default=False)
        self._use_env_state = env_state is not None and config.state != "observations"
        if self._use_env_state and env_state is not None:
            self.state_space: spaces.Box = env_state
            self.summary = f"state: env.state() {tuple(env_state.shape)}"
        else:
            self.state_space, self._images = side_by_side(self.observation_spaces)
            self.summary = (f"state: the agents' observations side by side {tuple(self.state_space.shape)}"
                            + ("" if env_state is None else f" (env.state() {tuple(env_state.shape)} unused)"))
        self._live: list[str] = []

    def _observe(self, raw: dict[str, Any], terminal: bool = False
                 ) -> tuple[list[np.ndarray], np.ndarray, list[Any] | None]:
        obs: list[np.ndarray] = []
        masks: list[Any] = []
        for name, view, allowed in zip(self._names, self._views, self._all_allowed):
            if name in raw:
                o, mask = view.observe(raw[name])
            else:
                o, mask = view.blank(), allowed
            obs.append(o)
            masks.append(mask)
        if self._use_env_state and terminal:
            state = np.zeros(self.state_space.shape, self.state_space.dtype)  # its value is 0: never read
        elif self._use_env_state:
            state = np.asarray(self._read_state(), dtype=self.state_space.dtype).reshape(self.state_space.shape)
        else:
            state = put_side_by_side(obs, self._images)
        return obs, state, masks if self._masked else None

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, list[Any] | None]:
        raw, _ = self._env.reset(seed=seed)
        self._live = [name for name in self._env.agents if name in self._index]
        return self._observe(raw)

    def step(self, actions: Sequence[Any]) -> EnvStep:
        live = self._live
        joint = {name: env_action(self.action_spaces[self._index[name]], actions[self._index[name]])
                 for name in live}
        raw, rewards, terminations, truncations, _ = self._env.step(joint)
        reward = np.zeros(self.n_agents, dtype=np.float32)
        for name, value in rewards.items():
            if name in self._index:
                reward[self._index[name]] = value
        remaining = set(self._env.agents)
        done = {name for name in live if terminations.get(name, False) or truncations.get(name, False)}
        self._live = [name for name in self._names if name in remaining and name not in done]
        ended = not self._live
        truncated = ended and any(truncations.get(name, False) for name in live)
        terminated = ended and not truncated
        obs, state, avail = self._observe(raw, terminal=terminated)
        active = np.array([name in self._live for name in self._names])
        return EnvStep(obs, state, avail, reward, terminated, truncated, active)

    def _read_state(self) -> Any:
        try:
            return self._env.state()
        except Exception as exc:  # noqa: BLE001 - e.g. multiwalker's state() once a walker was removed
            raise EnvCrashedError(
                f"{self.config.factory or self.config.env}: env.state() raised {type(exc).__name__}: {exc} "
                'during an episode; set [env] state = "observations" to use the agents\' observations side '
                "by side as the global state instead"
            ) from exc

    def render(self) -> Any:
        """A frame; needs ``make_pettingzoo_env(config, render_mode="rgb_array")``."""
        return self._env.render()

    def close(self) -> None:
        self._env.close()


def _state_space(env: Any) -> spaces.Box | None:
    """The env's global state space, or None when it has no ``state()``."""
    try:
        space = env.state_space
    except (AttributeError, NotImplementedError):
        return None
    return space if isinstance(space, spaces.Box) else None


def make_pettingzoo_env(config: Any, render_mode: str | None = None) -> PettingZooEnv:
    """Build the ``PettingZooConfig``'s env; ``render_mode="rgb_array"`` enables ``render()``."""
    try:
        return PettingZooEnv(config, render_mode)
    except InvalidSetting as exc:  # normally found when the config was validated
        raise ConfigError(f"env.{exc.key}: {exc.message}") from None
