"""Vector environments: ``n_envs`` copies stepped together, with auto-reset.

``InlineVectorEnv`` steps its environments one after the other in this process; it
also does all the per-step bookkeeping (stacking, auto-reset, episode returns).
``SubprocessVectorEnv`` splits the environments into contiguous chunks, one per worker
process, and each worker runs an ``InlineVectorEnv`` over its chunk, so that logic is
written once; the parent only concatenates the chunks.  ``NumpyVectorEnv`` shows a
tensor-native vector env (VMAS) through numpy arrays, for code that wants them.

Workers are started with "spawn" rather than "fork": a forked worker would inherit the
learner's memory and threads (torch, CUDA, OpenMP pools), which is unsafe to fork and
costly to copy, while a spawned one imports only numpy, gymnasium and the simulator.
Start-up costs a few tenths of a second, paid once per run.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import pickle
import signal
import sys
import time
import traceback
import types
import weakref
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection
from typing import Any, NoReturn

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.checks import EnvOutputCheck, as_float32, check_finite, describe_env, stack_avail
from harl.envs.protocol import EnvStep, VectorEnv, VectorStep, is_tensor_native
from harl.envs.registry import make_env, vector_factory
from harl.errors import EnvCrashedError, HarlError
from harl.signals import ignore_in_worker

Reset = tuple[list[np.ndarray], np.ndarray, list[np.ndarray] | None]

BACKENDS = ("inline", "subprocess")


def make_vector_env(
    env_config: Any, n_envs: int, backend: str = "inline", workers: int = 0, seed: int = 0
) -> VectorEnv:
    """``n_envs`` copies of the env that ``env_config`` describes; env ``k`` is seeded ``seed + k``.

    ``workers`` (subprocess backend only): 0 means one per env, at most one per CPU.
    A natively vectorised kind (a ``VectorFactory``, e.g. VMAS) is built as one simulator
    of ``n_envs`` environments in this process; ``backend`` and ``workers`` do not apply.
    """
    if n_envs < 1:
        raise ValueError(f"n_envs must be at least 1, got {n_envs}")
    native = vector_factory(env_config)
    if native is not None:
        return native(env_config, n_envs, seed)
    if backend == "inline":
        return InlineVectorEnv(env_config, n_envs, seed)
    if backend == "subprocess":
        if workers <= 0:
            workers = min(n_envs, os.cpu_count() or 1)
        return SubprocessVectorEnv(env_config, n_envs, workers, seed)
    raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")


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
    which report the raw traceback themselves).
    """

    def __init__(
        self, env_config: Any, n_envs: int, seed: int = 0, *, wrap_errors: bool = True
    ) -> None:
        self._wrap_errors = wrap_errors
        self.envs = [make_env(env_config) for _ in range(n_envs)]
        first = self.envs[0]
        self.n_envs = n_envs
        self.n_agents: int = first.n_agents
        self.observation_spaces: Sequence[spaces.Box] = first.observation_spaces
        self.action_spaces: Sequence[spaces.Space] = first.action_spaces
        self.state_space: spaces.Box = first.state_space
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
        if len(starts) != self.n_envs:
            raise ValueError(f"restart needs {self.n_envs} episode starts, got {len(starts)}")
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

    def get_rng_state(self) -> list[Any]:
        """Each env's RNG state now (None for an env without ``get_rng_state``)."""
        return [_rng_state(env) for env in self.envs]

    def set_rng_state(self, states: Sequence[Any]) -> None:
        """Restore ``get_rng_state``'s states; the next unseeded ``reset`` continues from them."""
        if len(states) != self.n_envs:
            raise ValueError(f"set_rng_state needs {self.n_envs} states, got {len(states)}")
        for env, state in zip(self.envs, states):
            if state is not None and hasattr(env, "set_rng_state"):
                env.set_rng_state(state)
        self._reset_before = True

    def _reset_one(self, k: int, seed: int | None) -> Reset:
        env = self.envs[k]
        try:
            self._starts[k] = {"seed": seed, "rng": None if seed is not None else _rng_state(env)}
            result = env.reset(seed)
        except Exception as exc:
            self._raise_crashed(k, "resetting", exc)
        return self._check.reset(k, result) if self._check.active else result

    def _reset_all(self, seeds: Sequence[int | None]) -> Reset:
        self._reset_before = True
        results = [self._reset_one(k, seed) for k, seed in enumerate(seeds)]
        self._returns[:] = 0.0
        self._lengths[:] = 0
        obs = [as_float32(np.stack([result[0][i] for result in results])) for i in range(self.n_agents)]
        state = as_float32(np.stack([result[1] for result in results]))
        self._check_finite(obs, state, None)
        return obs, state, stack_avail([result[2] for result in results], self._check.widths)

    def _check_finite(self, obs: list[np.ndarray], state: np.ndarray, rewards: np.ndarray | None) -> None:
        name = self._check.name
        for i, o in enumerate(obs):
            check_finite(name, "obs", o, i)
        check_finite(name, "state", state)
        if rewards is not None:
            check_finite(name, "rewards", rewards)

    def step(self, actions: Sequence[np.ndarray]) -> VectorStep:
        """Step every env with its row of ``actions``; ended episodes are reset (unseeded)."""
        n, n_agents = self.n_envs, self.n_agents
        rewards = np.empty((n, n_agents), dtype=np.float32)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        active = np.ones((n, n_agents), dtype=bool)
        steps: list[EnvStep] = []
        for k, env in enumerate(self.envs):
            try:
                step = env.step([agent_actions[k] for agent_actions in actions])
            except Exception as exc:
                self._raise_crashed(k, "stepping", exc)
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
        final_state = as_float32(np.stack([step.state for step in steps]))
        obs = [as_float32(np.stack([step.obs[i] for step in steps])) for i in range(n_agents)]
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
                if fresh is not None:
                    avail[i][k] = fresh[i][0]  # type: ignore[index]
        if ended:  # the new episodes' first observations
            self._check_finite(obs, state, None)
        return VectorStep(
            obs=obs, state=state, avail=avail, rewards=rewards, terminated=terminated,
            truncated=truncated, active=active, final_state=final_state,
            episode_infos=episode_infos, final_obs=final_obs, final_avail=final_avail,
        )

    def _raise_crashed(self, k: int, doing: str, exc: Exception) -> NoReturn:
        if not self._wrap_errors or isinstance(exc, HarlError):
            raise exc
        raise EnvCrashedError(f"Environment {k} raised {_one_line(exc)} while {doing}.") from exc

    def close(self) -> None:
        for env in self.envs:
            env.close()


# --------------------------------------------------------------------------- numpy view


def _array(x: Any) -> np.ndarray:
    """A numpy array of a batch (a torch tensor: a view on the CPU, a copy from a GPU)."""
    return x if isinstance(x, np.ndarray) else x.detach().cpu().numpy()


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

    def reset(self, seed: int | None = None) -> Reset:
        obs, state, avail = self.venv.reset(seed)
        return _arrays(obs), _array(state), _arrays(avail)  # type: ignore[return-value]

    def restart(self, starts: Sequence[dict[str, Any]]) -> Reset:
        obs, state, avail = self.venv.restart(starts)
        return _arrays(obs), _array(state), _arrays(avail)  # type: ignore[return-value]

    def step(self, actions: Sequence[Any]) -> VectorStep:
        s = self.venv.step(actions)
        return VectorStep(
            obs=_arrays(s.obs), state=_array(s.state), avail=_arrays(s.avail),  # type: ignore[arg-type]
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

_POLL_S = 0.2
"""How often a waiting parent checks that the worker it waits on is still alive."""
_JOIN_S = 2.0
"""How long ``close`` waits for workers to exit before terminating them."""
_HINT = 'Try [collector] backend = "inline" to see the full traceback.'


class _RemoteTraceback(Exception):
    """Carries a worker's formatted traceback as the ``__cause__`` of ``EnvCrashedError``."""

    def __str__(self) -> str:
        return str(self.args[0])


@attrs.define
class _Worker:
    index: int
    start: int
    stop: int
    process: Any  # multiprocessing.Process (the spawn context's subclass)
    conn: Connection

    def envs_text(self) -> str:
        last = self.stop - 1
        return f"env {self.start}" if last == self.start else f"envs {self.start}-{last}"


@contextlib.contextmanager
def _parent_main_hidden() -> Iterator[None]:
    """Keep spawned workers from re-importing the parent's ``__main__``.

    multiprocessing's spawn re-runs the parent's main module in each child (so that
    objects defined there unpickle), which would import the whole CLI and torch in every
    env worker.  Nothing a worker receives lives in ``__main__``: configs are pickled by
    the parent and unpickled inside the worker, which reports a failure like any other.
    """
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _worker_main(conn: Connection, config_bytes: bytes, n_envs: int, seed: int) -> None:
    """A worker: build an ``InlineVectorEnv`` over the chunk and serve commands until closed."""
    # Ctrl-C (and a scheduler's SIGTERM) reach the whole process group; the parent decides
    # when workers stop.
    ignore_in_worker()
    venv: InlineVectorEnv | None = None
    try:
        venv = InlineVectorEnv(pickle.loads(config_bytes), n_envs, seed, wrap_errors=False)
        conn.send(
            ("ok", (venv.n_agents, venv.observation_spaces, venv.action_spaces, venv.state_space))
        )
        while True:
            try:
                command, argument = conn.recv()
            except EOFError:  # the parent is gone
                break
            if command == "step":
                conn.send(("ok", venv.step(argument)))
            elif command == "reset":
                conn.send(("ok", venv.reset(argument)))
            elif command in ("episode_starts", "restart", "get_rng_state", "set_rng_state"):
                method = getattr(venv, command)
                conn.send(("ok", method() if argument is None else method(argument)))
            elif command == "close":
                break
            else:
                raise ValueError(f"unknown worker command {command!r}")
    except Exception:
        with contextlib.suppress(Exception):
            conn.send(("error", traceback.format_exc()))
    finally:
        if venv is not None:
            with contextlib.suppress(Exception):
                venv.close()
        conn.close()


def _shutdown(workers: list[_Worker]) -> None:
    """Ask workers to exit, then terminate (and finally kill) any that do not; idempotent."""
    for worker in workers:
        with contextlib.suppress(Exception):
            if worker.process.is_alive():
                worker.conn.send(("close", None))
    deadline = time.monotonic() + _JOIN_S
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
    for worker in workers:
        if worker.process.is_alive():
            worker.process.terminate()
            worker.process.join(1.0)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(1.0)
        worker.conn.close()
    workers.clear()


def _concat_steps(parts: list[VectorStep]) -> VectorStep:
    if len(parts) == 1:
        return parts[0]
    n_agents = len(parts[0].obs)
    avail = None
    if parts[0].avail is not None:
        avail = [np.concatenate([p.avail[i] for p in parts]) for i in range(n_agents)]  # type: ignore[index]
    return VectorStep(
        obs=[np.concatenate([p.obs[i] for p in parts]) for i in range(n_agents)],
        state=np.concatenate([p.state for p in parts]),
        avail=avail,
        rewards=np.concatenate([p.rewards for p in parts]),
        terminated=np.concatenate([p.terminated for p in parts]),
        truncated=np.concatenate([p.truncated for p in parts]),
        active=np.concatenate([p.active for p in parts]),
        final_state=np.concatenate([p.final_state for p in parts]),
        episode_infos=[info for p in parts for info in p.episode_infos],
        final_obs=[np.concatenate([p.final_obs[i] for p in parts]) for i in range(n_agents)]  # type: ignore[index]
        if parts[0].final_obs is not None else None,
        final_avail=[np.concatenate([p.final_avail[i] for p in parts]) for i in range(n_agents)]  # type: ignore[index]
        if parts[0].final_avail is not None else None,
    )


def _concat_resets(parts: list[Reset]) -> Reset:
    if len(parts) == 1:
        return parts[0]
    n_agents = len(parts[0][0])
    obs = [np.concatenate([p[0][i] for p in parts]) for i in range(n_agents)]
    state = np.concatenate([p[1] for p in parts])
    avail = None
    if parts[0][2] is not None:
        avail = [np.concatenate([p[2][i] for p in parts]) for i in range(n_agents)]  # type: ignore[index]
    return obs, state, avail


class SubprocessVectorEnv:
    """Environments in ``workers`` spawned processes, each stepping a contiguous chunk."""

    def __init__(self, env_config: Any, n_envs: int, workers: int, seed: int = 0) -> None:
        workers = max(1, min(workers, n_envs))
        self.n_envs = n_envs
        self._workers: list[_Worker] = []
        self._closed = False
        # Runs close's cleanup on garbage collection and at interpreter exit, without
        # keeping ``self`` alive.
        self._finalizer = weakref.finalize(self, _shutdown, self._workers)

        context = mp.get_context("spawn")
        config_bytes = pickle.dumps(env_config)
        bounds = np.linspace(0, n_envs, workers + 1).round().astype(int)
        with _parent_main_hidden():
            for index in range(workers):
                start, stop = int(bounds[index]), int(bounds[index + 1])
                parent_conn, child_conn = context.Pipe()
                process = context.Process(
                    target=_worker_main,
                    args=(child_conn, config_bytes, stop - start, seed + start),
                    name=f"harl-env-worker-{index}",
                    daemon=True,
                )
                process.start()
                # Only the child holds its end now, so its death shows as EOF here.
                child_conn.close()
                self._workers.append(_Worker(index, start, stop, process, parent_conn))

        ready = [self._receive(worker, "starting") for worker in self._workers]
        self.n_agents: int = ready[0][0]
        self.observation_spaces: Sequence[spaces.Box] = ready[0][1]
        self.action_spaces: Sequence[spaces.Space] = ready[0][2]
        self.state_space: spaces.Box = ready[0][3]

    def reset(self, seed: int | None = None) -> Reset:
        """Reset every env; env ``k`` gets ``seed + k`` (the constructor's seed on the first call)."""
        for worker in self._check_open():
            self._send(worker, ("reset", None if seed is None else seed + worker.start), "resetting")
        return _concat_resets([self._receive(worker, "resetting") for worker in self._workers])

    def step(self, actions: Sequence[np.ndarray]) -> VectorStep:
        """Step every env with its row of ``actions``; ended episodes are reset (unseeded)."""
        for worker in self._check_open():
            chunk = [agent_actions[worker.start : worker.stop] for agent_actions in actions]
            self._send(worker, ("step", chunk), "stepping")
        return _concat_steps([self._receive(worker, "stepping") for worker in self._workers])

    def episode_starts(self) -> list[dict[str, Any]]:
        """How each env's current episode began (see ``InlineVectorEnv.episode_starts``)."""
        return [s for part in self._call("episode_starts", None, "reporting its episodes") for s in part]

    def restart(self, starts: Sequence[dict[str, Any]]) -> Reset:
        """Begin each env's episode again as ``starts`` says (see ``InlineVectorEnv.restart``)."""
        if len(starts) != self.n_envs:
            raise ValueError(f"restart needs {self.n_envs} episode starts, got {len(starts)}")
        chunks = [list(starts[w.start:w.stop]) for w in self._workers]
        return _concat_resets(self._call("restart", chunks, "resetting"))

    def get_rng_state(self) -> list[Any]:
        """Each env's RNG state now (None for an env without ``get_rng_state``)."""
        return [s for part in self._call("get_rng_state", None, "reporting its RNG state") for s in part]

    def set_rng_state(self, states: Sequence[Any]) -> None:
        """Restore ``get_rng_state``'s states; the next unseeded ``reset`` continues from them."""
        if len(states) != self.n_envs:
            raise ValueError(f"set_rng_state needs {self.n_envs} states, got {len(states)}")
        self._call("set_rng_state", [list(states[w.start:w.stop]) for w in self._workers],
                   "restoring its RNG state")

    def _call(self, command: str, arguments: list[Any] | None, doing: str) -> list[Any]:
        """Send ``command`` to every worker (with its own argument) and collect the replies."""
        workers = self._check_open()
        for k, worker in enumerate(workers):
            self._send(worker, (command, None if arguments is None else arguments[k]), doing)
        return [self._receive(worker, doing) for worker in workers]

    def close(self) -> None:
        """Stop the workers; safe to call more than once."""
        self._closed = True
        self._finalizer()

    def _check_open(self) -> list[_Worker]:
        if self._closed:
            raise RuntimeError("this vector env is closed")
        return self._workers

    def _send(self, worker: _Worker, message: tuple[str, Any], doing: str) -> None:
        try:
            worker.conn.send(message)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            raise self._crashed(worker, doing, None) from None

    def _receive(self, worker: _Worker, doing: str) -> Any:
        """The worker's next reply; never blocks on a worker that has died."""
        conn = worker.conn
        while not conn.poll(_POLL_S):
            # Re-check the pipe after seeing the process gone: it may have replied first.
            if not worker.process.is_alive() and not conn.poll(0):
                raise self._crashed(worker, doing, None)
        try:
            status, payload = conn.recv()
        except (EOFError, ConnectionResetError, OSError):
            raise self._crashed(worker, doing, None) from None
        if status == "error":
            raise self._crashed(worker, doing, payload) from _RemoteTraceback(payload)
        return payload

    def _crashed(self, worker: _Worker, doing: str, remote_traceback: str | None) -> EnvCrashedError:
        """Shut every worker down and describe what happened to this one."""
        process = worker.process
        where = f"Environment worker {worker.index} (hosting {worker.envs_text()})"
        self.close()
        if remote_traceback is not None:
            last_line = remote_traceback.strip().splitlines()[-1]
            what = f"raised {last_line} while {doing}"
        else:
            code = process.exitcode
            if code is not None and code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"signal {-code}"
                what = f"was killed by {name} while {doing}"
            else:
                what = f"died with exit code {code} while {doing}"
        return EnvCrashedError(f"{where} {what}. {_HINT}")
