"""The environment contracts every adapter and vector backend meets.

One environment, used by a vector backend::

    env = make_env()                        # any MultiAgentEnv
    obs, state, avail = env.reset(seed=1)
    while True:
        step = env.step(actions)            # one action per agent
        if step.terminated or step.truncated:
            obs, state, avail = env.reset()

``obs`` and ``avail`` are lists with one entry per agent, because agents may differ
(observation sizes, action spaces); ``avail`` may be None (no masks at all) or hold None
for an agent without a mask (``[None, mask, None]`` for a team with one discrete agent).
Observations and states may be float64 (they are cast to float32); every number must be
finite.  The vector backends check what ``reset`` and ``step`` return against the
declared spaces on the first steps and name the env, agent and field that is wrong
(``harl.envs.checks``).  ``state`` is the global state of the whole team
(EP state); the critic derives per-agent (FP) states from it.  ``terminated`` (a
terminal state: no bootstrap) and ``truncated`` (a time limit: bootstrap) are kept
apart all the way to the return computer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

import attrs
import numpy as np
from gymnasium import spaces

if TYPE_CHECKING:  # torch is not imported by env workers, which only see numpy
    import torch

    Array = np.ndarray | torch.Tensor


@attrs.define(slots=True)
class EnvStep:
    """What one environment returns from ``step``."""

    obs: list[np.ndarray]
    """One float32 array per agent, shape ``observation_spaces[i].shape``."""
    state: np.ndarray
    """Global state, float32, shape ``state_space.shape``."""
    avail: list[np.ndarray | None] | None
    """Per-agent available-action masks (1 = allowed), or None when the env has none.

    Agent ``i``'s mask has one entry per action of ``action_spaces[i]`` (a MultiDiscrete
    agent: its sub-actions' masks concatenated).  A ``None`` entry means "no mask for this
    agent" (all actions allowed); a Box agent takes None (or an empty array), never a mask.
    """
    rewards: np.ndarray
    """Float32, shape ``(n_agents,)``: one number per agent."""
    terminated: bool
    """The episode reached a terminal state: its value is zero, do not bootstrap."""
    truncated: bool
    """The episode was cut by a time limit: bootstrap from the next state's value."""
    active: np.ndarray | None = None
    """Bool ``(n_agents,)``: which agents are still alive (None: all of them)."""
    info: dict[str, Any] = attrs.Factory(dict)
    """Env-specific episode metrics (e.g. ``win``); numbers only."""


class MultiAgentEnv(Protocol):
    """One multi-agent environment; see the module docstring for the loop.

    Optional, for exact resume: ``get_rng_state() -> Any`` (a picklable snapshot of the
    env's random generator) and ``set_rng_state(state)``.  With them a checkpoint can
    replay how each episode began (``VectorEnv.episode_starts`` / ``restart``); without
    them a resumed env starts from its first seed again.  Optional too: ``summary``, a short
    line ``harl check`` shows beside the env (e.g. where the global state comes from).

    Optional, for exact resume at any rollout length: ``get_state() -> Any`` (a picklable
    snapshot of the whole env mid-episode: its world, step counter, episode accumulators and
    random generator) and ``set_state(state)`` (the env continues from it: its next ``step``
    is the one that would have followed the snapshot).  ``InlineVectorEnv`` offers the vector
    env's ``get_state`` only when every env has them (MPE's does).

    Optional, for teams: ``agent_names: list[str]`` (one unique name per agent, in agent
    order; default ``agent_0 .. agent_{n-1}``) and ``agent_groups: dict[str, list[str]]``
    (the env's own sides, each naming its agents, e.g. ``{"adversary": ["adversary_0"],
    "agent": ["agent_0", "agent_1"]}``; default ``{}``: none declared).  Read them with
    ``harl.envs.names.agent_names`` / ``agent_groups``, which fill in the defaults.
    """

    n_agents: int
    observation_spaces: Sequence[spaces.Box]
    action_spaces: Sequence[spaces.Space]
    state_space: spaces.Box

    def reset(
        self, seed: int | None = None
    ) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray] | None]: ...

    def step(self, actions: Sequence[np.ndarray]) -> EnvStep: ...

    def close(self) -> None: ...


@attrs.define(slots=True)
class VectorStep:
    """A batch of ``EnvStep`` over ``n_envs`` copies, stacked per agent.

    Environments whose episode ended were reset already (auto-reset): ``obs``, ``state``
    and ``avail`` belong to the new episode, and ``final_state`` holds the state the
    ended episode reached (for bootstrapping on truncation).

    The batches are numpy arrays, or torch tensors on the env's ``device`` when the vector
    env is tensor-native (see ``VectorEnv``); shapes and dtypes are the same either way.
    """

    obs: Sequence[Array]
    """Per agent, ``(n_envs, *obs_shape_i)`` float32."""
    state: Array
    """``(n_envs, *state_shape)``."""
    avail: Sequence[Array] | None
    """Per agent, ``(n_envs, n_actions_i)``, or None."""
    rewards: Array
    """``(n_envs, n_agents)`` float32."""
    terminated: Array
    """``(n_envs,)`` bool."""
    truncated: Array
    """``(n_envs,)`` bool."""
    active: Array
    """``(n_envs, n_agents)`` bool, for the step just taken (before any reset)."""
    final_state: Array
    """``(n_envs, *state_shape)``: the pre-reset state where an episode ended, else ``state``."""
    episode_infos: list[dict[str, Any]]
    """One dict per episode that ended this step, in env order: ``return``, ``length`` and env metrics."""
    final_obs: Sequence[Array] | None = None
    """Per agent, the pre-reset observation where an episode ended, else ``obs`` (off-policy
    transitions bootstrap from it on truncation).  None only from backends that lack it."""
    final_avail: Sequence[Array] | None = None
    """Like ``final_obs`` for ``avail`` (None when the env has no masks)."""


class VectorEnv(Protocol):
    """``n_envs`` copies of one environment, stepped together, auto-resetting.

    ::

        venv = make_vector_env(env_config, n_envs=8, backend="inline", seed=1)
        obs, state, avail = venv.reset()
        for t in range(T):
            step = venv.step(actions)   # actions[i]: (n_envs, *action_shape_i)
        venv.close()

    Batches are numpy arrays by default.  A vector env whose simulator computes in torch
    (VMAS) may declare ``tensor_native = True`` and a ``device`` (``torch.device``): its
    ``reset`` / ``restart`` / ``step`` then return torch tensors on that device, and its
    ``step`` takes the actions as tensors (any device; numpy arrays work too) and must not
    modify them (the collector stores the same tensors).  Collectors and the evaluator
    then hand the policy's action tensors straight to the env and copy the results into
    their buffers without a numpy round trip (``is_tensor_native``).  Both attributes are
    optional: without them an env is a numpy env.

    Optional too: ``agent_names`` and ``agent_groups``, taken from its envs (see
    ``MultiAgentEnv``; ``harl.envs.names`` reads them with their defaults).

    Optional, for exact resume mid-episode: ``get_state() -> list[Any] | None``, every env's
    whole state now (one picklable entry per env, in env order: its world, step counter, the
    vector env's episode return and length accumulators; state the envs share, such as one
    generator, in entry 0), or None where it cannot be captured now; and
    ``set_state(states)``, which restores such a list (of these ``n_envs`` envs, or rows of
    several such lists concatenated, as a population splits and joins them) so that the next
    ``step`` continues the captured episodes.  A collector then saves it with its next
    rollout's first observations and resumes exactly at any rollout length; without it a
    resumed run restarts the episodes under way from their starts (``episode_starts`` /
    ``restart``).  Read it with ``get_env_state``; the torch MPE and the inline backend over
    envs with ``get_state`` / ``set_state`` (MPE) offer it.
    """

    n_envs: int
    n_agents: int
    observation_spaces: Sequence[spaces.Box]
    action_spaces: Sequence[spaces.Space]
    state_space: spaces.Box

    def reset(
        self, seed: int | None = None
    ) -> tuple[Sequence[Array], Array, Sequence[Array] | None]: ...

    def step(self, actions: Sequence[Array]) -> VectorStep: ...

    def episode_starts(self) -> list[dict[str, Any]]:
        """How each env's current episode began (picklable; for checkpoints)."""
        ...

    def restart(
        self, starts: Sequence[dict[str, Any]]
    ) -> tuple[Sequence[Array], Array, Sequence[Array] | None]:
        """Begin each env's episode again as it began (``episode_starts``); like ``reset``."""
        ...

    def get_rng_state(self) -> list[Any]: ...

    def set_rng_state(self, states: Sequence[Any]) -> None: ...

    def close(self) -> None: ...


class TensorNativeVectorEnv(VectorEnv, Protocol):
    """A ``VectorEnv`` whose batches are torch tensors on its ``device`` (``is_tensor_native``)."""

    tensor_native: bool
    device: torch.device


def get_env_state(venv: Any) -> list[Any] | None:
    """``venv``'s whole state (its optional ``get_state``, see ``VectorEnv``), or None where it has
    none or cannot give it now."""
    get = getattr(venv, "get_state", None)
    return None if get is None else get()


def can_set_env_state(venv: Any) -> bool:
    """Whether ``venv`` restores ``get_env_state``'s list (its optional ``set_state``)."""
    return callable(getattr(venv, "set_state", None))


def is_tensor_native(venv: Any) -> TypeGuard[TensorNativeVectorEnv]:
    """True when ``venv`` hands out torch tensors on its ``device`` (see ``VectorEnv``)."""
    return bool(getattr(venv, "tensor_native", False))
