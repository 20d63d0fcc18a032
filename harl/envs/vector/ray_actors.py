"""The Ray backend: the environments split into chunks, one Ray actor per chunk.

Each actor runs an ``InlineVectorEnv`` over its chunk, as a subprocess worker does, but
may live on any node of the Ray cluster this process is connected to, so a run can use
more cores than one machine has.  A vector step is one remote call per actor, gathered
with ``ray.get``; the learner stays in this process.  Chunks and seeds are those of the
subprocess backend, so a seed gives the same numbers with every backend.

Ray is connected to ``RAY_ADDRESS`` when it is set (or used as it is when this process
already runs inside Ray, e.g. a trial of a Ray sweep); otherwise a local Ray is started
with one CPU per actor and a small object store, and stopped again by ``close``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import socket
import warnings
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.checks import describe_env
from harl.envs.protocol import VectorStep
from harl.envs.vector.chunks import (
    INLINE_HINT,
    RESEED,
    START_TIMEOUT_S,
    STEP_TIMEOUT_S,
    TIMEOUT_HINT,
    chunk_bounds,
    concat_resets,
    concat_steps,
    cut_short,
    envs_text,
)
from harl.envs.vector.inline import InlineVectorEnv, Reset, _one_line, per_env
from harl.errors import EnvCrashedError, HarlError, import_extra
from harl.rundir.signals import ignore_in_worker

if TYPE_CHECKING:
    from harl.envs.protocol import Array
    from harl.envs.vector.chunks import Observed

TIMEOUT_S = STEP_TIMEOUT_S
"""Default of ``step_timeout_s``: an actor that has not answered one call after this long is taken as hung."""
OBJECT_STORE_BYTES = 200 * 1024**2
"""Object store of a local Ray: a step's arrays are small, and /dev/shm is shared."""
_CLOSE_S = 2.0
"""How long ``close`` lets the actors close their envs before killing them."""
_RESTART = "[collector] restart_workers = true restarts a dead worker instead of stopping."


def import_ray() -> Any:
    """The ``ray`` module, or a ``MissingExtraError`` that names the key and the fix."""
    return import_extra("ray", '[collector] backend = "ray"', "ray")


def connect(cpus: int) -> bool:
    """Connect this process to Ray (see the module docstring); True when it was not connected before."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    if os.environ.get("RAY_ADDRESS"):
        ray.init(logging_level=logging.WARNING)
    else:
        # "local": a new Ray of our own, never one that ``ray start`` left running on this machine.
        ray.init(address="local", num_cpus=cpus, object_store_memory=OBJECT_STORE_BYTES,
                 include_dashboard=False, logging_level=logging.WARNING)
    return True


class EnvWorker:
    """One actor's chunk of environments (``ray.remote`` makes it an actor class at run time)."""

    def __init__(self, env_config: Any, n_envs: int, seed: int) -> None:
        # Ctrl-C and a scheduler's SIGTERM reach the process group; the Trainer decides when
        # envs stop.
        ignore_in_worker()
        # An env that fails to build is reported by ``describe``: an exception raised here would
        # reach the Trainer only as Ray's "actor died in its creation task", without its message.
        self.error: Exception | None = None
        try:
            self.venv = InlineVectorEnv(env_config, n_envs, seed, wrap_errors=False)
        except Exception as exc:
            self.error = exc

    # Replies travel as pickled bytes: Ray would hand the arrays out read-only (views of its
    # object store), which torch refuses to share; unpickling copies them, as a pipe does.

    def describe(self) -> bytes:
        import ray

        if self.error is not None:
            raise self.error
        venv = self.venv
        return pickle.dumps((venv.n_agents, venv.observation_spaces, venv.action_spaces, venv.state_space,
                             socket.gethostname(), os.getpid(), ray.get_runtime_context().get_node_id(),
                             venv.agent_names, venv.agent_groups))

    def call(self, command: str, *args: Any) -> bytes:
        return pickle.dumps(getattr(self.venv, command)(*args))


@attrs.define
class _Worker:
    index: int
    start: int
    stop: int
    actor: Any = None
    where: str = "being started"
    """``host`` and ``pid`` of the actor's process, for messages."""
    pid: int = 0
    node: str = ""
    """The Ray node id of the actor."""

    def envs_text(self) -> str:
        return envs_text(self.start, self.stop)

    def name(self) -> str:
        return f"Environment worker {self.index} (hosting {self.envs_text()}; Ray actor {self.where})"


def _shutdown(workers: list[_Worker], started_ray: bool) -> None:
    """Let the actors close their envs, kill them, and stop a Ray started here; idempotent."""
    ray = import_ray()
    if not ray.is_initialized():
        return
    actors = [w.actor for w in workers if w.actor is not None]
    with contextlib.suppress(Exception):
        ray.wait([a.call.remote("close") for a in actors], num_returns=len(actors), timeout=_CLOSE_S)
    for actor in actors:
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)
    for worker in workers:
        worker.actor = None
    if started_ray:
        ray.shutdown()


class RayVectorEnv:
    """Environments in ``workers`` Ray actors, each stepping a contiguous chunk.

    ``restart_workers``: a worker whose actor dies is started again and its envs reset
    (seeded anew) instead of the run stopping; the step that was in flight for them (or, when
    it died outside a step, their next step) is lost and shows in the batch as a time limit
    with reward 0 at their last observation.
    ``lost_steps`` and ``restarts`` count what was lost, and a ``RuntimeWarning`` says it.
    """

    def __init__(self, env_config: Any, n_envs: int, workers: int, seed: int = 0,
                 restart_workers: bool = False, step_timeout_s: float | None = None) -> None:
        self._ray = import_ray()
        timeout = TIMEOUT_S if step_timeout_s is None else step_timeout_s
        self.step_timeout_s = timeout or None  # 0: no limit
        workers = max(1, min(workers, n_envs))
        started = connect(workers)
        self.n_envs = n_envs
        self.restart_workers = restart_workers
        self.restarts = 0
        self.lost_steps = 0
        self._workers = [_Worker(w, start, stop) for w, (start, stop) in enumerate(chunk_bounds(n_envs, workers))]
        self._closed = False
        self._finalizer = weakref.finalize(self, _shutdown, self._workers, started)
        self._env_config = env_config
        self._seed = seed
        self._actor_class = self._ray.remote(num_cpus=1, max_restarts=0)(EnvWorker)
        self._last: list[Observed | None] = [None] * workers  # each chunk's current obs, state, avail (None: not reset yet)
        self._lengths = np.zeros(n_envs, dtype=np.int64)  # steps of each env's current episode
        self._pending: dict[int, Reset] = {}
        """Workers restarted outside a step: the fresh envs' first observations, which the next
        ``step`` returns for them after cutting their old episodes short (the collector holds the old ones)."""
        try:
            ready = self._start(self._workers, [seed + w.start for w in self._workers])
        except BaseException:
            self.close()
            raise
        self.n_agents: int = ready[0]
        self.observation_spaces: Sequence[spaces.Box] = ready[1]
        self.action_spaces: Sequence[spaces.Space] = ready[2]
        self.state_space: spaces.Box = ready[3]
        self.agent_names: list[str] = ready[7]
        self.agent_groups: dict[str, list[str]] = ready[8]

    def _start(self, workers: list[_Worker], seeds: list[int]) -> tuple[Any, ...]:
        """Create the actors of ``workers`` and wait until their envs are built."""
        for worker, seed in zip(workers, seeds):
            worker.actor = self._actor_class.remote(
                self._env_config, worker.stop - worker.start, seed)
        replies = self._gather(workers, [w.actor.describe.remote() for w in workers], "starting",
                               START_TIMEOUT_S, restartable=False)
        for worker, reply in zip(workers, replies):
            worker.where = f"pid {reply[5]} on {reply[4]}"
            worker.pid, worker.node = reply[5], reply[6]
        return replies[0]

    @property
    def worker_pids(self) -> list[int]:
        """The actors' process ids (each on its own node)."""
        return [w.pid for w in self._workers]

    @property
    def worker_nodes(self) -> list[str]:
        """The Ray node ids the actors run on."""
        return [w.node for w in self._workers]

    # ----------------------------------------------------------------- the VectorEnv contract

    def reset(self, seed: int | None = None) -> Reset:
        """Reset every env; env ``k`` gets ``seed + k`` (the constructor's seed on the first call)."""
        args = [() if seed is None else (seed + w.start,) for w in self._check_open()]
        return self._resets(self._call("reset", args, "resetting"))

    def step(self, actions: Sequence[Array]) -> VectorStep:
        """Step every env with its row of ``actions`` (arrays; CPU tensors are read as arrays);
        ended episodes are reset (unseeded)."""
        arrays = [np.asarray(a) for a in actions]
        workers = self._check_open()
        live = [w for w in workers if w.index not in self._pending]
        args = [([a[w.start:w.stop] for a in arrays],) for w in live]
        stepped = iter(self._call("step", args, "stepping", live) if live else [])
        parts = [next(stepped) if w.index not in self._pending else self._cut_pending(w) for w in workers]
        for w, part in enumerate(parts):
            self._last[w] = (part.obs, part.state, part.avail)
        step = concat_steps(parts)
        self._lengths += 1
        self._lengths[step.terminated | step.truncated] = 0
        return step

    def episode_starts(self) -> list[dict[str, Any]]:
        """How each env's current episode began (see ``InlineVectorEnv.episode_starts``)."""
        parts = self._call("episode_starts", [()] * len(self._check_open()), "reporting its episodes")
        return [s for part in parts for s in part]

    def restart(self, starts: Sequence[dict[str, Any]]) -> Reset:
        """Begin each env's episode again as ``starts`` says (see ``InlineVectorEnv.restart``)."""
        per_env(starts, self.n_envs, "restart", "episode starts")
        args = [(list(starts[w.start:w.stop]),) for w in self._check_open()]
        return self._resets(self._call("restart", args, "resetting"))

    def get_rng_state(self) -> list[Any]:
        """Each env's RNG state now (None for an env without ``get_rng_state``)."""
        parts = self._call("get_rng_state", [()] * len(self._check_open()), "reporting its RNG state")
        return [s for part in parts for s in part]

    def set_rng_state(self, states: Sequence[Any]) -> None:
        """Restore ``get_rng_state``'s states; the next unseeded ``reset`` continues from them."""
        per_env(states, self.n_envs, "set_rng_state", "states")
        args = [(list(states[w.start:w.stop]),) for w in self._check_open()]
        self._call("set_rng_state", args, "restoring its RNG state")

    def render(self, *args: Any, **kwargs: Any) -> Any:
        raise HarlError('the "ray" backend cannot render: its envs live in Ray actors, possibly on other '
                        'machines; render from an inline env ([collector] backend = "inline"; harl render '
                        "does this by itself)")

    def close(self) -> None:
        """Close the envs, kill the actors (and stop a Ray started here); safe to call more than once."""
        self._closed = True
        self._finalizer()

    # ----------------------------------------------------------------- calls and failures

    def _resets(self, parts: list[Reset]) -> Reset:
        self._pending.clear()
        self._last = list(parts)
        self._lengths[:] = 0
        return concat_resets(parts)

    def _check_open(self) -> list[_Worker]:
        if self._closed:
            raise RuntimeError("this vector env is closed")
        return self._workers

    def _call(self, command: str, args: list[tuple[Any, ...]], doing: str,
              workers: list[_Worker] | None = None) -> list[Any]:
        """``command`` on every actor (or on ``workers``), each with its own arguments; a dead one may be restarted."""
        workers = self._workers if workers is None else workers
        refs = [w.actor.call.remote(command, *a) for w, a in zip(workers, args)]
        replies = self._gather(workers, refs, doing, self.step_timeout_s, restartable=self.restart_workers)
        for w, reply in enumerate(replies):
            if isinstance(reply, _Dead):
                replies[w] = self._replace(workers[w], reply, command, args[w], doing)
        return replies

    def _gather(self, workers: list[_Worker], refs: list[Any], doing: str, timeout: float | None,
                restartable: bool) -> list[Any]:
        """The replies, in order; a dead actor is a ``_Dead`` when ``restartable``, else an error."""
        ray = self._ray
        _, waiting = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        if waiting:
            late = workers[refs.index(waiting[0])]
            if doing == "starting":
                free, total = (r.get("CPU", 0.0) for r in (ray.available_resources(), ray.cluster_resources()))
                raise self._crashed(late, f"was not running within {timeout:.0f} s (each env worker needs 1 CPU; "
                                    f"the Ray cluster has {free:g} of {total:g} free)",
                                    "Lower [collector] workers, or add CPUs (nodes) to the Ray cluster.")
            raise self._crashed(late, f"did not answer within {timeout:g} s while {doing} "
                                f"({describe_env(self._env_config)}); its actor was killed", TIMEOUT_HINT)
        replies: list[Any] = []
        for worker, ref in zip(workers, refs):
            try:
                replies.append(pickle.loads(ray.get(ref)))
            except ray.exceptions.RayTaskError as exc:  # the env raised: a bug to fix, not retried
                cause = exc.cause if isinstance(exc.cause, BaseException) else exc
                what = (f"reported: {str(cause).rstrip('.')}" if isinstance(cause, HarlError)
                        else f"raised {_one_line(cause)} while {doing}")
                raise self._crashed(worker, what, INLINE_HINT) from exc
            except ray.exceptions.RayActorError as exc:
                reason = _first_line(exc).rstrip(".")
                if not restartable:
                    raise self._crashed(worker, f"died while {doing} ({reason})", _RESTART) from None
                replies.append(_Dead(reason))
        return replies

    def _replace(self, worker: _Worker, dead: _Dead, command: str, args: tuple[Any, ...], doing: str) -> Any:
        """Start ``worker`` again, reset its envs with fresh seeds, then answer ``command``."""
        self.restarts += 1
        old = worker.where
        with contextlib.suppress(Exception):
            self._ray.kill(worker.actor, no_restart=True)
        seed = self._seed + worker.start + RESEED * self.restarts
        self._start([worker], [seed])
        reset = self._gather([worker], [worker.actor.call.remote("reset", seed)], "resetting",
                             self.step_timeout_s, restartable=False)[0]
        chunk = slice(worker.start, worker.stop)
        text = (f"Environment worker {worker.index} (hosting {worker.envs_text()}; Ray actor {old}) died "
                f"while {doing} ({dead.reason}); restarted it as {worker.where} and reset its envs")
        if command != "step":  # the call is repeated on the fresh envs; the next step cuts the old episodes
            if command not in ("reset", "restart"):
                self._pending[worker.index] = reset
            warnings.warn(f"{text}; its episodes are cut short at the next step.", RuntimeWarning, stacklevel=4)
            return self._gather([worker], [worker.actor.call.remote(command, *args)], doing,
                                self.step_timeout_s, restartable=False)[0]
        lost, cut = worker.stop - worker.start, self._lengths[chunk]
        self.lost_steps += lost
        warnings.warn(f"{text}: {lost} env steps lost (the step in flight), {lost} episodes cut short "
                      f"after {cut.mean():.0f} steps on average.", RuntimeWarning, stacklevel=4)
        return cut_short(self._last_of(worker), reset)

    def _last_of(self, worker: _Worker) -> Observed:
        """Where ``worker``'s envs stand (set by every reset, restart and step)."""
        last = self._last[worker.index]
        if last is None:
            raise RuntimeError("step() before reset(): the envs have no episode to go on with")
        return last

    def _cut_pending(self, worker: _Worker) -> VectorStep:
        """The step of a worker restarted since the last one: its actions are not run (lost), its
        old episodes end as a time limit and its fresh ones begin (as when it dies in a step)."""
        self.lost_steps += worker.stop - worker.start
        return cut_short(self._last_of(worker), self._pending.pop(worker.index))

    def _crashed(self, worker: _Worker, what: str, fix: str) -> EnvCrashedError:
        """Shut every actor down and describe what happened to this one."""
        self.close()
        return EnvCrashedError(f"{worker.name()} {what}. {fix}")


@attrs.frozen
class _Dead:
    reason: str


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
