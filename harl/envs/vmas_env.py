"""VMAS (torch-vectorised multi-agent scenarios) as a natively vectorised ``VectorEnv``.

VMAS simulates all ``n_envs`` environments as one batch of tensors, so this adapter is a
whole ``VectorEnv`` (registered with ``vectorised=True``): ``make_vector_env`` builds one VMAS
env with ``num_envs = n_envs`` and steps it once per vector step, instead of ``n_envs``
copies of a one-env adapter.  The collector's ``backend`` and ``workers`` do not apply.

The adapter is tensor-native (``tensor_native = True``, ``device``): observations,
states, rewards and episode ends come out as torch tensors on the env's device and actions
go in as tensors, so a collector on the same device never converts to numpy.  Code that
wants numpy arrays wraps it in ``harl.envs.vector.numpy_view.NumpyVectorEnv``.

The global state is the concatenation of the agents' observations (VMAS has no separate
state).  Episodes end as ``terminated`` when the scenario says it is done and as
``truncated`` after ``max_episode_steps``; ended envs are reset in place (``reset_at``) and the
batch's observations are read once afterwards (all of them at once when all ended).

For exact resume, a checkpoint can replay a reset of the whole batch (VMAS's one shared
generator, saved before it) but not a reset of one env: see ``episode_starts``.

vmas is an optional dependency: it is imported only when an environment is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.protocol import VectorStep
from harl.errors import ConfigError, MissingExtraError
from harl.registry import register
from harl.settings import kind_field, positive, setting

SCENARIOS = ("balance", "transport", "navigation", "simple_spread")
"""Scenarios with shipped pipelines and tests; any other VMAS scenario name also works."""

Reset = tuple[list[Any], Any, None]
"""Per-agent observation tensors, the state tensor, no action masks."""


@attrs.frozen
class VMASConfig:
    """``[env] kind = "vmas"``: one VMAS scenario, vectorised by VMAS itself."""

    kind: str = kind_field("vmas")
    scenario: str = setting("transport", f"VMAS scenario (tested: {', '.join(SCENARIOS)})")
    continuous_actions: bool = setting(True, "Box actions when true, Discrete actions when false")
    max_episode_steps: int = setting(100, "steps per episode before truncation (VMAS's max_steps)", positive())
    device: str = setting("cpu", "torch device VMAS simulates on (cpu, cuda, cuda:N)")
    kwargs: dict[str, Any] = setting(
        factory=dict, doc="scenario arguments, e.g. n_agents ([env.kwargs] table)"
    )


def _import_vmas() -> Any:
    try:
        import vmas
    except ImportError as exc:
        raise MissingExtraError('env kind "vmas"', "vmas", "vmas") from exc
    return vmas


def _gymnasium_space(space: Any) -> spaces.Space:
    """VMAS describes spaces with the legacy ``gym`` package; harl uses gymnasium's."""
    name = type(space).__name__
    if name == "Box":
        return spaces.Box(space.low, space.high, space.shape, np.float32)
    if name == "Discrete":
        return spaces.Discrete(int(space.n))
    if name == "MultiDiscrete":
        return spaces.MultiDiscrete(np.asarray(space.nvec))
    raise ConfigError(f"env.scenario: VMAS space {space} is not supported (Box, Discrete, MultiDiscrete)")


class VMASVectorEnv:
    """``n_envs`` environments of one VMAS scenario, stepped as one batch, in torch."""

    tensor_native = True
    """Batches are torch tensors on ``device`` (see ``harl.envs.protocol.VectorEnv``)."""

    def __init__(self, config: VMASConfig, n_envs: int, seed: int = 0) -> None:
        vmas = _import_vmas()
        import torch

        known = [*vmas.scenarios, *vmas.mpe_scenarios, *vmas.debug_scenarios]
        if config.scenario not in known:
            raise ConfigError(
                f'env.scenario: VMAS has no scenario "{config.scenario}" '
                f"(tested here: {', '.join(SCENARIOS)})"
            )
        self._torch = torch
        self.config = config
        self.device = torch.device(config.device)
        self._env = vmas.make_env(
            config.scenario, num_envs=n_envs, device=config.device,
            continuous_actions=config.continuous_actions, max_steps=config.max_episode_steps, seed=seed,
            dict_spaces=False, clamp_actions=True, terminated_truncated=True, **config.kwargs,
        )
        self.n_envs = n_envs
        self.n_agents: int = self._env.n_agents
        self.observation_spaces: list[spaces.Box] = [
            _gymnasium_space(s) for s in self._env.observation_space.spaces  # type: ignore[misc]
        ]
        self.action_spaces: list[spaces.Space] = [
            _gymnasium_space(s) for s in self._env.action_space.spaces
        ]
        state_size = sum(int(np.prod(s.shape)) for s in self.observation_spaces)
        self.state_space = spaces.Box(-np.inf, np.inf, (state_size,), np.float32)
        self._discrete = not config.continuous_actions
        self._seed = seed
        self._reset_before = False
        self._batch_start: dict[str, Any] | None = None
        """The seed of, or the shared generator before, the whole-batch reset every env's
        episode began at; None once an env was reset alone (see ``episode_starts``)."""
        self._returns = torch.zeros(n_envs, dtype=torch.float64, device=self.device)
        self._lengths = torch.zeros(n_envs, dtype=torch.int64, device=self.device)

    def _observations(self) -> list[Any]:
        return self._env.get_from_scenario(
            get_observations=True, get_rewards=False, get_infos=False, get_dones=False
        )[0]

    def _shared_rng(self) -> list[Any]:
        """VMAS's generator states (torch, numpy, random), one list shared by all its envs."""
        return type(self._env).vmas_random_state

    def reset(self, seed: int | None = None) -> Reset:
        """Reset every env; a seed re-seeds VMAS (the constructor's seed on the first call)."""
        if seed is None and not self._reset_before:
            seed = self._seed
        self._reset_before = True
        self._batch_start = {"seed": seed, "rng": None if seed is not None else list(self._shared_rng())}
        obs = self._env.reset(seed=seed)
        self._returns.zero_()
        self._lengths.zero_()
        return obs, self._torch.cat(obs, dim=1), None

    def episode_starts(self) -> list[dict[str, Any]]:
        """How the envs' episodes began, for checkpoints.

        VMAS resets one env from the generator all envs share, so one env's start cannot be
        replayed alone; a start of all envs at once can.  While every env's episode began at
        the same whole-batch reset (the first one, or one where all episodes ended on the same
        step), entry 0 also holds ``batch``: that reset's seed or the generator before it, and
        the generator now.  Otherwise ``restart`` begins every env anew from the first seed.
        """
        starts: list[dict[str, Any]] = [{"seed": None, "rng": None, "steps": int(n)} for n in self._lengths.tolist()]
        if self._batch_start is not None:
            starts[0]["batch"] = {**self._batch_start, "now": list(self._shared_rng())}
        return starts

    def restart(self, starts: Sequence[dict[str, Any]]) -> Reset:
        """Repeat the whole-batch reset ``starts`` describes, then put the generator back where it
        was at the checkpoint: with every env at an episode's first step there, the run continues
        exactly.  Without ``batch``: new episodes from the constructor's seed."""
        if len(starts) != self.n_envs:
            raise ValueError(f"restart needs {self.n_envs} episode starts, got {len(starts)}")
        batch = starts[0].get("batch")
        if batch is None:
            return self.reset(seed=self._seed)
        self._reset_before = True
        if batch["seed"] is None:
            self._shared_rng()[:] = batch["rng"]
        result = self.reset(seed=batch["seed"])
        self._batch_start = {"seed": batch["seed"], "rng": batch["rng"]}
        self._shared_rng()[:] = batch["now"]
        return result

    def get_rng_state(self) -> list[Any]:
        """VMAS draws from one generator for all its envs (in this process): it is entry 0."""
        shared = type(self._env).vmas_random_state
        return [list(shared)] + [None] * (self.n_envs - 1)

    def set_rng_state(self, states: Sequence[Any]) -> None:
        if len(states) != self.n_envs:
            raise ValueError(f"set_rng_state needs {self.n_envs} states, got {len(states)}")
        if states[0] is not None:
            type(self._env).vmas_random_state[:] = states[0]
        self._reset_before = True

    def step(self, actions: Sequence[Any]) -> VectorStep:
        """Step every env with its row of ``actions`` (tensors or arrays); ended episodes are reset."""
        torch = self._torch
        dtype = torch.int64 if self._discrete else torch.float32
        # A no-op for float32 tensors already on the device (the collector's actions).
        batch = [torch.as_tensor(a, device=self.device).to(dtype) for a in actions]
        obs, rewards_list, terminated, truncated, _ = self._env.step(batch)
        rewards = torch.stack(rewards_list, dim=1).to(torch.float32)
        # A terminal state wins over the time limit: its value is zero either way.
        truncated = truncated & ~terminated
        self._returns += rewards.mean(dim=1, dtype=torch.float64)
        self._lengths += 1
        final_obs = obs
        final_state = torch.cat(obs, dim=1)
        state = final_state
        ended = terminated | truncated
        episode_infos: list[dict[str, Any]] = []
        ended_index = ended.nonzero().flatten().tolist()
        if ended_index:
            returns, lengths = self._returns[ended].tolist(), self._lengths[ended].tolist()
            episode_infos = [{"return": r, "length": int(n)} for r, n in zip(returns, lengths)]
            self._returns[ended] = 0.0
            self._lengths[ended] = 0
            if len(ended_index) == self.n_envs:
                self._batch_start = {"seed": None, "rng": list(self._shared_rng())}
                self._env.reset(return_observations=False)
            else:
                self._batch_start = None
                for k in ended_index:
                    self._env.reset_at(k, return_observations=False)
            obs = self._observations()
            state = torch.cat(obs, dim=1)
        return VectorStep(
            obs=obs, state=state, avail=None, rewards=rewards, terminated=terminated,
            truncated=truncated,
            active=torch.ones(self.n_envs, self.n_agents, dtype=torch.bool, device=self.device),
            final_state=final_state, episode_infos=episode_infos, final_obs=final_obs,
        )

    def close(self) -> None:
        """Nothing to release (VMAS holds tensors only)."""


def make_vmas_vector_env(config: VMASConfig, n_envs: int, seed: int = 0) -> VMASVectorEnv:
    """One VMAS env simulating ``n_envs`` environments."""
    return VMASVectorEnv(config, n_envs, seed)


register("env", VMASConfig, make_vmas_vector_env, vectorised=True)
