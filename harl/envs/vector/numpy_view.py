"""A tensor-native vector env (VMAS) seen through numpy arrays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from harl.envs import names
from harl.envs.protocol import VectorEnv, VectorStep, is_tensor_native
from harl.envs.vector.inline import Reset


def _array(x: Any) -> np.ndarray:
    """A numpy array of a batch (a torch tensor: a view on the CPU, a copy from a GPU)."""
    return x if isinstance(x, np.ndarray) else x.detach().cpu().numpy()


@overload
def _arrays(xs: Sequence[Any]) -> list[np.ndarray]: ...


@overload
def _arrays(xs: Sequence[Any] | None) -> list[np.ndarray] | None: ...


def _arrays(xs: Sequence[Any] | None) -> list[np.ndarray] | None:
    return None if xs is None else [_array(x) for x in xs]


def as_numpy(venv: VectorEnv) -> VectorEnv:
    """``venv`` itself if it hands out numpy arrays, else a ``NumpyVectorEnv`` over it."""
    return NumpyVectorEnv(venv) if is_tensor_native(venv) else venv


class NumpyVectorEnv:
    """A tensor-native vector env (e.g. VMAS) seen through the numpy protocol.

    Batches come out as numpy arrays; actions may go in as arrays or tensors.  For code
    written against numpy batches, and to check that the tensor path and the numpy path
    give the same rollouts.  On the CPU the arrays are views of the env's tensors.
    """

    tensor_native = False

    def __init__(self, venv: VectorEnv) -> None:
        self.venv = venv
        self.n_envs = venv.n_envs
        self.n_agents = venv.n_agents
        self.observation_spaces = venv.observation_spaces
        self.action_spaces = venv.action_spaces
        self.state_space = venv.state_space
        self.agent_names = names.agent_names(venv)
        self.agent_groups = names.agent_groups(venv)

    def reset(self, seed: int | None = None) -> Reset:
        obs, state, avail = self.venv.reset(seed)
        return _arrays(obs), _array(state), _arrays(avail)

    def restart(self, starts: Sequence[dict[str, Any]]) -> Reset:
        obs, state, avail = self.venv.restart(starts)
        return _arrays(obs), _array(state), _arrays(avail)

    def step(self, actions: Sequence[Any]) -> VectorStep:
        s = self.venv.step(actions)
        return VectorStep(
            obs=_arrays(s.obs), state=_array(s.state), avail=_arrays(s.avail),
            rewards=_array(s.rewards), terminated=_array(s.terminated), truncated=_array(s.truncated),
            active=_array(s.active), final_state=_array(s.final_state), episode_infos=s.episode_infos,
            final_obs=_arrays(s.final_obs), final_avail=_arrays(s.final_avail),
        )

    def episode_starts(self) -> list[dict[str, Any]]:
        return self.venv.episode_starts()

    def get_rng_state(self) -> list[Any]:
        return self.venv.get_rng_state()

    def set_rng_state(self, states: Sequence[Any]) -> None:
        self.venv.set_rng_state(states)

    def close(self) -> None:
        self.venv.close()


# --------------------------------------------------------------------------- subprocess
