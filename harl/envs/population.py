"""One vector env for the whole population, and each member's view of its slice.

Member ``s`` owns worlds ``s * E .. (s + 1) * E - 1`` of one vector env of ``S * E`` worlds
(a torch-native env steps them as one batch; a numpy env through its backend's workers).
The population steps that env; a member's stages see a ``MemberView``: its spaces, its
``E`` worlds' episode starts (what its checkpoint saves), and nothing they could step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from harl.envs.protocol import VectorEnv, VectorStep, get_env_state


class MemberView:
    """The slice of member ``index`` (``n_envs`` worlds) of the population's ``venv``."""

    def __init__(self, venv: VectorEnv, index: int, n_envs: int) -> None:
        self.population_venv = venv
        self.index, self.n_envs = index, n_envs
        self.n_agents = venv.n_agents
        self.observation_spaces = venv.observation_spaces
        self.action_spaces = venv.action_spaces
        self.state_space = venv.state_space
        self.tensor_native = bool(getattr(venv, "tensor_native", False))
        if self.tensor_native:
            self.device = venv.device  # type: ignore[attr-defined]

    @property
    def rows(self) -> slice:
        return slice(self.index * self.n_envs, (self.index + 1) * self.n_envs)

    def episode_starts(self) -> list[dict[str, Any]]:
        return self.population_venv.episode_starts()[self.rows]

    def get_state(self) -> list[Any] | None:
        """Its worlds' whole state (the population env's ``get_state`` rows), or None where that has none."""
        states = get_env_state(self.population_venv)
        return None if states is None else states[self.rows]

    def _driven(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a population member's envs are stepped by its population (harl.population)")

    reset = step = restart = set_state = _driven

    def get_rng_state(self) -> list[Any]:
        return self.population_venv.get_rng_state()

    def set_rng_state(self, states: Sequence[Any]) -> None:
        self.population_venv.set_rng_state(states)

    def close(self) -> None:
        """The population closes its env once, after every member."""

    def __getattr__(self, name: str) -> Any:  # an env's own words (``summary``, ``envs``) for describe()
        return getattr(self.population_venv, name)


def _part(x: Any, rows: slice) -> Any:
    return None if x is None else x[rows]


def split_step(step: VectorStep, members: int, n_envs: int) -> list[VectorStep]:
    """``step`` of ``members * n_envs`` worlds as one ``VectorStep`` per member (views, not copies).

    Reads the envs' flags on the host only when an episode ended (to hand each member its
    episodes' infos): a step of a torch-native env on a GPU otherwise stays on the GPU."""
    bounds = np.zeros(members + 1, dtype=np.int64)
    if step.episode_infos:
        ended = np.asarray(torch.as_tensor(step.terminated).cpu() | torch.as_tensor(step.truncated).cpu())
        bounds[1:] = np.cumsum(ended.reshape(members, n_envs).sum(1))
    out = []
    for s in range(members):
        rows = slice(s * n_envs, (s + 1) * n_envs)
        out.append(VectorStep(
            obs=[o[rows] for o in step.obs], state=step.state[rows],
            avail=None if step.avail is None else [_part(a, rows) for a in step.avail],
            rewards=step.rewards[rows], terminated=step.terminated[rows], truncated=step.truncated[rows],
            active=step.active[rows], final_state=step.final_state[rows],
            episode_infos=step.episode_infos[bounds[s]:bounds[s + 1]],
            final_obs=None if step.final_obs is None else [o[rows] for o in step.final_obs],
            final_avail=None if step.final_avail is None else [_part(a, rows) for a in step.final_avail]))
    return out


def split_start(obs: Sequence[Any], state: Any, avail: Sequence[Any] | None, members: int,
                n_envs: int) -> list[tuple[list[Any], Any, list[Any] | None]]:
    """A reset's ``(obs, state, avail)`` of all worlds as one triple per member."""
    out = []
    for s in range(members):
        rows = slice(s * n_envs, (s + 1) * n_envs)
        out.append(([o[rows] for o in obs], state[rows], None if avail is None else [_part(a, rows) for a in avail]))
    return out
