"""The in-process backend: environments stepped one after the other, with auto-reset."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn, cast

import numpy as np
from gymnasium import spaces

from harl.envs import names
from harl.envs.checks import EnvOutputCheck, as_stored, check_finite, describe_env, stack_avail
from harl.envs.protocol import EnvStep, VectorStep
from harl.envs.registry import make_env
from harl.errors import EnvCrashedError, HarlError
from harl.rundir.signals import WATCH

if TYPE_CHECKING:
    from harl.envs.protocol import Array

Reset = tuple[list[np.ndarray], np.ndarray, list[np.ndarray] | None]


def per_env(items: Sequence[Any], n_envs: int, command: str, what: str) -> None:
    """One of ``items`` per env (every backend's ``restart`` and ``set_rng_state``), else a ValueError."""
    if len(items) != n_envs:
        raise ValueError(f"{command} needs {n_envs} {what}, got {len(items)}")


def _rng_state(env: Any) -> Any:
    """The env's RNG state (its optional ``get_rng_state``), or None."""
    get = getattr(env, "get_rng_state", None)
    return None if get is None else get()


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


class InlineVectorEnv:
    """All environments in this process, stepped in a loop (also the worker's engine).

    An exception from an env becomes ``EnvCrashedError`` naming the env, chained to the
    original (``wrap_errors=False`` lets it through unchanged, for subprocess workers,
    which report the raw traceback themselves, and ``failed_env`` with it).

    Every env call is marked on ``harl.rundir.signals.WATCH``: one that hangs longer than
    ``step_timeout_s`` (0: no limit; a worker's engine has none, its parent times it) is
    interrupted with an ``EnvCrashedError``, and one that hangs after a stop request (Ctrl-C,
    SIGTERM) with ``StopNow``, so a hung in-process env stops like a hung worker.
    """

    def __init__(
        self, env_config: Any, n_envs: int, seed: int = 0, *, wrap_errors: bool = True, step_timeout_s: float = 0.0
    ) -> None:
        self._wrap_errors = wrap_errors
        self._timeout_s = step_timeout_s
        self.failed_env: int | None = None
        """The env whose exception was let through (``wrap_errors=False``)."""
        self.envs = [make_env(env_config) for _ in range(n_envs)]
        first = self.envs[0]
        self.n_envs = n_envs
        self.n_agents: int = first.n_agents
        self.observation_spaces: Sequence[spaces.Box] = first.observation_spaces
        self.action_spaces: Sequence[spaces.Space] = first.action_spaces
        self.state_space: spaces.Box = first.state_space
        self.agent_names: list[str] = names.agent_names(first)
        self.agent_groups: dict[str, list[str]] = names.agent_groups(first)
        self._check = EnvOutputCheck(describe_env(env_config), self.n_agents, self.observation_spaces,
                                     self.action_spaces, self.state_space)
        self._seed = seed
        self._reset_before = False
        # Running episode return (sum over steps of the mean agent reward) and length.
        self._returns = np.zeros(n_envs)
        self._lengths = np.zeros(n_envs, dtype=np.int64)
        # How each env's current episode began (see ``episode_starts``).
        self._starts: list[dict[str, Any]] = [{"seed": seed + k, "rng": None} for k in range(n_envs)]

    def reset(self, seed: int | None = None) -> Reset:
        """Reset every env; env ``k`` gets ``seed + k`` (the constructor's seed on the first call)."""
        if seed is None and not self._reset_before:
            seed = self._seed
        return self._reset_all([None if seed is None else seed + k for k in range(self.n_envs)])

    def episode_starts(self) -> list[dict[str, Any]]:
        """How each env's current episode began, for ``restart``; plain picklable dicts.

        ``seed``: the seed of a seeded reset, else None; ``rng``: the env's RNG state just
        before an unseeded reset (None when the env has no ``get_rng_state``); ``steps``: how
        far the episode has run since.  Checkpoints store this list.
        """
        return [{**start, "steps": int(steps)} for start, steps in zip(self._starts, self._lengths)]

    def restart(self, starts: Sequence[dict[str, Any]]) -> Reset:
        """Begin each env's episode again exactly as ``starts`` (from ``episode_starts``) says.

        An episode that had run some steps starts over from its first one.  An env whose
        RNG state could not be read (no ``get_rng_state``) starts from its first seed.
        """
        per_env(starts, self.n_envs, "restart", "episode starts")
        seeds: list[int | None] = []
        for k, (env, start) in enumerate(zip(self.envs, starts)):
            seed = start["seed"]
            if seed is None:
                if start["rng"] is not None and hasattr(env, "set_rng_state"):
                    env.set_rng_state(start["rng"])
                else:
                    seed = self._seed + k
            seeds.append(seed)
        return self._reset_all(seeds)

    def get_state(self) -> list[dict[str, Any]] | None:
        """Every env's whole state now (``harl.envs.protocol.VectorEnv``): its own ``get_state``, how
        its episode began and the episode's return and length so far; None unless every env has
        ``get_state`` and ``set_state``."""
        if not all(callable(getattr(env, "get_state", None)) and callable(getattr(env, "set_state", None))
                   for env in self.envs):
            return None
        return [{"env": cast(Any, env).get_state(), "start": dict(start), "return": float(ret), "length": int(length)}
                for env, start, ret, length in zip(self.envs, self._starts, self._returns, self._lengths)]

    def set_state(self, states: Sequence[dict[str, Any]]) -> None:
        """Restore ``get_state``'s list: the next ``step`` continues the episodes it captured."""
        per_env(states, self.n_envs, "set_state", "env states")
        for k, (env, state) in enumerate(zip(self.envs, states)):
            call = WATCH.enter(self._timeout_s, (self._check.name, k, "restoring its state"))
            try:
                cast(Any, env).set_state(state["env"])
            except Exception as exc:
                self._raise_crashed(k, "restoring its state", exc)
            finally:
                WATCH.leave(call)
            self._starts[k] = dict(state["start"])
            self._returns[k] = state["return"]
            self._lengths[k] = state["length"]
        self._reset_before = True

    def get_rng_state(self) -> list[Any]:
        """Each env's RNG state now (None for an env without ``get_rng_state``)."""
        return [_rng_state(env) for env in self.envs]

    def set_rng_state(self, states: Sequence[Any]) -> None:
        """Restore ``get_rng_state``'s states; the next unseeded ``reset`` continues from them."""
        per_env(states, self.n_envs, "set_rng_state", "states")
        for env, state in zip(self.envs, states):
            if state is not None and hasattr(env, "set_rng_state"):
                env.set_rng_state(state)
        self._reset_before = True

    def _reset_one(self, k: int, seed: int | None) -> Reset:
        env = self.envs[k]
        call = WATCH.enter(self._timeout_s, (self._check.name, k, "resetting"))
        try:
            self._starts[k] = {"seed": seed, "rng": None if seed is not None else _rng_state(env)}
            result = env.reset(seed)
        except Exception as exc:
            self._raise_crashed(k, "resetting", exc)
        finally:
            WATCH.leave(call)
        return self._check.reset(k, result) if self._check.active else result

    def _reset_all(self, seeds: Sequence[int | None]) -> Reset:
        self._reset_before = True
        results = [self._reset_one(k, seed) for k, seed in enumerate(seeds)]
        self._returns[:] = 0.0
        self._lengths[:] = 0
        obs = [as_stored(np.stack([result[0][i] for result in results])) for i in range(self.n_agents)]
        state = as_stored(np.stack([result[1] for result in results]))
        self._check_finite(obs, state, None)
        return obs, state, stack_avail([result[2] for result in results], self._check.widths)

    def _check_finite(self, obs: list[np.ndarray], state: np.ndarray, rewards: np.ndarray | None) -> None:
        name = self._check.name
        for i, o in enumerate(obs):
            check_finite(name, "obs", o, i)
        check_finite(name, "state", state)
        if rewards is not None:
            check_finite(name, "rewards", rewards)

    def step(self, actions: Sequence[Array]) -> VectorStep:
        """Step every env with its row of ``actions`` (arrays; CPU tensors are read as arrays);
        ended episodes are reset (unseeded)."""
        arrays = [np.asarray(a) for a in actions]
        n, n_agents = self.n_envs, self.n_agents
        rewards = np.empty((n, n_agents), dtype=np.float32)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        active = np.ones((n, n_agents), dtype=bool)
        steps: list[EnvStep] = []
        name, timeout_s = self._check.name, self._timeout_s
        for k, env in enumerate(self.envs):
            call = WATCH.enter(timeout_s, (name, k, "stepping"))
            try:
                step = env.step([agent_actions[k] for agent_actions in arrays])
            except Exception as exc:
                self._raise_crashed(k, "stepping", exc)
            finally:
                WATCH.leave(call)
            if self._check.active:
                step = self._check.step(k, step)
            steps.append(step)
            rewards[k] = step.rewards
            if step.active is not None:
                active[k] = step.active
            terminated[k] = step.terminated
            truncated[k] = step.truncated
        if self._check.active:
            self._check.counted_step()
        final_state = as_stored(np.stack([step.state for step in steps]))
        obs = [as_stored(np.stack([step.obs[i] for step in steps])) for i in range(n_agents)]
        self._check_finite(obs, final_state, rewards)
        self._returns += rewards.mean(axis=1, dtype=np.float64)
        self._lengths += 1
        avail = stack_avail([step.avail for step in steps], self._check.widths)
        state = final_state.copy()
        ended = np.flatnonzero(terminated | truncated).tolist()
        # The ended episodes' last observations, before the resets below overwrite them.
        final_obs = [o.copy() for o in obs] if ended else obs
        final_avail = avail if avail is None or not ended else [a.copy() for a in avail]
        episode_infos: list[dict[str, Any]] = []
        for k in ended:
            episode_infos.append(
                {**steps[k].info, "return": float(self._returns[k]), "length": int(self._lengths[k])}
            )
            self._returns[k] = 0.0
            self._lengths[k] = 0
            obs_k, state_k, avail_k = self._reset_one(k, None)
            state[k] = state_k
            fresh = None if avail is None else stack_avail([avail_k or [None] * n_agents], self._check.widths)
            for i in range(n_agents):
                obs[i][k] = obs_k[i]
                if avail is not None and fresh is not None:
                    avail[i][k] = fresh[i][0]
        if ended:  # the new episodes' first observations
            self._check_finite(obs, state, None)
        return VectorStep(
            obs=obs, state=state, avail=avail, rewards=rewards, terminated=terminated,
            truncated=truncated, active=active, final_state=final_state,
            episode_infos=episode_infos, final_obs=final_obs, final_avail=final_avail,
        )

    def _raise_crashed(self, k: int, doing: str, exc: Exception) -> NoReturn:
        if isinstance(exc, HarlError):
            raise exc
        if not self._wrap_errors:
            self.failed_env = k
            raise exc
        raise EnvCrashedError(f"Environment {k} raised {_one_line(exc)} while {doing}.") from exc

    def close(self) -> None:
        for env in self.envs:
            env.close()


# --------------------------------------------------------------------------- numpy view
