"""HARL's vector-env face (``reset`` / ``step`` of ``(n_threads, n_agents, dim)`` arrays) over harl's.

HARL stacks agents on axis 1, so agents of different sizes (mixed teams) are padded to the
largest: observations to the widest observation, actions to the widest action
(Box: its dimensions, Discrete: 1 index, MultiDiscrete: one index per sub-action),
available-action masks to the longest mask.  Padding is 0; an agent without a mask
(Box) has all zeros in ``available_actions``.  ``share_obs`` repeats the global state for
every agent.  The view keeps harl's own ``VectorStep`` (``last_step``) and the arrays the
actions were taken on (``before``), so ``insert`` stores harl's exact terminated /
truncated / final-state data rather than what HARL's ``dones`` and ``infos`` can say.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from harl.nets.heads import action_width, avail_size


def to_numpy(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if torch.is_tensor(x) else np.asarray(x)


def pad_agents(arrays: Sequence[Any], width: int) -> np.ndarray:
    """Per-agent ``(n, ...)`` arrays -> ``(n, n_agents, width)`` float32, zero padded."""
    flat = [to_numpy(a).reshape(len(a), -1) for a in arrays]
    out = np.zeros((flat[0].shape[0], len(flat), width), dtype=np.float32)
    for i, a in enumerate(flat):
        out[:, i, :a.shape[1]] = a
    return out


def unpad_agents(x: Any, widths: Sequence[int]) -> list[np.ndarray]:
    """``(n, n_agents, >= width_i)`` -> per agent ``(n, width_i)`` (the padding dropped)."""
    x = to_numpy(x)
    return [np.ascontiguousarray(x[:, i, :w]) for i, w in enumerate(widths)]


class HarlVecEnv:
    """HARL's ``ShareVecEnv`` API over a harl ``VectorEnv`` (which it does not own)."""

    def __init__(self, venv: Any, seed: int | None) -> None:
        self.venv = venv
        self.seed = seed
        """The first ``reset`` seeds the envs as harl's collector would; later ones continue."""
        self.num_envs = venv.n_envs
        self.n_agents = venv.n_agents
        self.observation_space = list(venv.observation_spaces)
        self.share_observation_space = [venv.state_space] * venv.n_agents
        self.action_space = list(venv.action_spaces)
        self.obs_widths = [int(np.prod(s.shape)) for s in self.observation_space]
        self.action_widths = [action_width(s) for s in self.action_space]
        self.avail_widths = [avail_size(s) for s in self.action_space]
        self.before: tuple[list[Any], Any, list[Any] | None] | None = None
        """harl's (obs, state, avail) the next actions are taken on."""
        self.previous: tuple[list[Any], Any, list[Any] | None] | None = None
        """harl's (obs, state, avail) the last ``step``'s actions were taken on."""
        self.last_step: Any = None
        """harl's ``VectorStep`` of the last ``step``."""

    @property
    def masked(self) -> bool:
        return any(w > 0 and not isinstance(s, spaces.Box) for w, s in zip(self.avail_widths, self.action_space))

    def reset(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``obs (n, A, obs)``, ``share_obs (n, A, state)``, ``available_actions (n, A, m)`` or ``(n,)`` of None."""
        obs, state, avail = self.venv.reset(seed=self.seed)
        self.seed = None
        self.before, self.last_step = (obs, state, avail), None
        return self._obs(obs), self._share(state), self._avail(avail)

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                          list[list[dict[str, Any]]], np.ndarray]:
        """HARL's ``step``: actions ``(n, A, dim)``; returns obs, share_obs, rewards ``(n, A, 1)``,
        dones ``(n, A)``, infos (``n`` lists of ``A`` dicts) and available_actions."""
        if self.before is None:
            self.reset()
        step = self.venv.step(self.env_actions(actions))
        self.previous, self.before, self.last_step = self.before, (step.obs, step.state, step.avail), step
        terminated, truncated = to_numpy(step.terminated).astype(bool), to_numpy(step.truncated).astype(bool)
        ended = terminated | truncated
        dones = ended[:, None] | ~to_numpy(step.active).astype(bool)
        rewards = to_numpy(step.rewards).astype(np.float32)[..., None]
        return (self._obs(step.obs), self._share(step.state), rewards, dones,
                self._infos(step, terminated, truncated), self._avail(step.avail))

    def env_actions(self, actions: Any) -> list[np.ndarray]:
        """HARL's padded ``(n, A, dim)`` actions -> harl's per-agent ``(n, k_i)``."""
        x = to_numpy(actions)
        if x.ndim == 2:  # (n, A): one discrete index per agent
            x = x[..., None]
        return [a.astype(np.float32) for a in unpad_agents(x, self.action_widths)]

    def masks(self, available_actions: Any) -> list[np.ndarray | None]:
        """HARL's ``(n, A, m)`` masks (or ``(n,)`` of None) -> harl's per-agent masks."""
        x = np.asarray(available_actions) if available_actions is not None else None
        if x is None or x.dtype == object or x.ndim != 3:
            return [None] * self.n_agents
        return [m if w else None for m, w in zip(unpad_agents(x.astype(np.float32), self.avail_widths),
                                                 self.avail_widths)]

    def _obs(self, obs: Sequence[Any]) -> np.ndarray:
        return pad_agents(obs, max(self.obs_widths))

    def _share(self, state: Any) -> np.ndarray:
        s = to_numpy(state).reshape(self.num_envs, -1).astype(np.float32)
        return np.repeat(s[:, None, :], self.n_agents, axis=1)

    def _avail(self, avail: Sequence[Any] | None) -> np.ndarray:
        if avail is None or not self.masked:
            return np.array([None] * self.num_envs, dtype=object)
        width = max(self.avail_widths)
        parts = [np.ones((self.num_envs, w), np.float32) if a is None else a for a, w in zip(avail, self.avail_widths)]
        return pad_agents(parts, width)

    def _infos(self, step: Any, terminated: np.ndarray, truncated: np.ndarray) -> list[list[dict[str, Any]]]:
        """Per env, per agent: ``bad_transition`` (a time limit ended it), and where an episode
        ended ``original_obs`` / ``original_state`` (pre-reset) and harl's episode numbers."""
        ended = np.flatnonzero(terminated | truncated)
        final_obs = pad_agents(step.final_obs if step.final_obs is not None else step.obs, max(self.obs_widths))
        final_state = to_numpy(step.final_state).reshape(self.num_envs, -1)
        episodes = dict(zip(ended.tolist(), step.episode_infos)) if len(step.episode_infos) == len(ended) else {}
        infos = []
        for e in range(self.num_envs):
            row = []
            for i in range(self.n_agents):
                info: dict[str, Any] = {"bad_transition": bool(truncated[e] and not terminated[e])}
                if e in episodes or terminated[e] or truncated[e]:
                    info.update(episodes.get(e, {}), original_obs=final_obs[e, i],
                                original_state=final_state[e])
                row.append(info)
            infos.append(row)
        return infos

    def close(self) -> None:
        """The stages own the harl vector env; the runner's ``close`` closes it."""
