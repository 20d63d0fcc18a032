"""The subprocess backend: the environments split into chunks, one worker process per chunk.

Each worker runs an ``InlineVectorEnv`` over its chunk and steps it in one call per vector
step.  The per-step arrays travel through one shared-memory segment (``shared.StepLayout``):
the parent writes the actions there, each worker writes its rows of the results in place,
and the pipe carries only the command and a small ack (episode-end infos), so nothing
else is pickled per step.  Resets, episode starts, RNG states and errors, which are rare,
still travel through the pipe.  The parent owns the segment and unlinks it on close, on a
worker's crash and at exit; if the parent is killed outright, its workers see the pipe
close and exit, and the next harl process to build a subprocess env on this machine
unlinks the segment (``shared.remove_stale``).

A worker that does not answer one call within ``step_timeout_s`` (``[collector]
step_timeout_s``, 300 s by default, shared with the Ray backend) is taken as hung: it is
killed and the run stops with ``EnvCrashedError`` naming it, its envs and the env's
factory, or, with ``restart_workers``, it is started again, its envs reset with fresh seeds,
and the run goes on (the step in flight for its envs is lost and shows as a time limit,
as in the Ray backend).  A worker that dies is handled the same way.  While the parent
waits on a worker after a stop request (Ctrl-C, SIGTERM), it gives the wait up after
``signals.STOP_WAIT_S`` and raises ``StopNow``, so one signal stops a run whose simulator hangs.

Workers are started with "spawn" rather than "fork": a forked worker would inherit the
learner's memory and threads (torch, CUDA, OpenMP pools), which is unsafe to fork and
costly to copy, while a spawned one imports only numpy, gymnasium and the simulator.
Start-up costs a few tenths of a second, paid once per run.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import pickle
import signal
import sys
import time
import traceback
import types
import warnings
import weakref
from collections.abc import Iterator, Sequence
from multiprocessing import shared_memory
from multiprocessing.connection import Connection
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
    cut_short,
    envs_text,
)
from harl.envs.vector.inline import InlineVectorEnv, Reset, per_env
from harl.envs.vector.shared import StepLayout, attach_segment, create_segment, release
from harl.errors import EnvCrashedError, HarlError
from harl.rundir.signals import STOP_WAIT_S, StopNow, ignore_in_worker, stop_waiting

if TYPE_CHECKING:
    from harl.envs.protocol import Array

_POLL_S = 0.2
"""How often a waiting parent checks that the worker it waits on is still alive."""
_JOIN_S = 2.0
"""How long ``close`` waits for workers to exit before terminating them."""


class _Lost(Exception):
    """A worker that died or hung (``reason``: what happened, for messages); may be restarted."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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
        return envs_text(self.start, self.stop)


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
    """A worker: build an ``InlineVectorEnv`` over the chunk and serve commands until closed.

    It reports the spaces, then attaches to the segment the parent sized from them.  A
    step's actions come from the segment (or in the message, when their dtype or shape
    is not what the collectors send); its results go into the worker's rows there.
    """
    # Ctrl-C (and a scheduler's SIGTERM) reach the whole process group; the parent decides
    # when workers stop.
    ignore_in_worker()
    venv: InlineVectorEnv | None = None
    segment: shared_memory.SharedMemory | None = None
    try:
        venv = InlineVectorEnv(pickle.loads(config_bytes), n_envs, seed, wrap_errors=False)
        conn.send(
            ("ok", (venv.n_agents, venv.observation_spaces, venv.action_spaces, venv.state_space,
                    venv.agent_names, venv.agent_groups))
        )
        while True:
            try:
                command, argument = conn.recv()
            except EOFError:  # the parent is gone
                break
            if command == "attach":
                name, layout, start = argument
                segment = attach_segment(name)
                rows = layout.views(segment.buf, start, start + n_envs)
                slots = layout.actions(rows)
                conn.send(("ok", None))
            elif command == "step":
                step = venv.step([slot.copy() for slot in slots] if argument is None else argument)
                layout.write_step(rows, step)
                conn.send(("ok", (step.episode_infos, step.avail is not None)))
            elif command == "reset":
                conn.send(("ok", venv.reset(argument)))
            elif command in ("episode_starts", "restart", "get_rng_state", "set_rng_state", "get_state", "set_state"):
                method = getattr(venv, command)
                conn.send(("ok", method() if argument is None else method(argument)))
            elif command == "close":
                break
            else:
                raise ValueError(f"unknown worker command {command!r}")
    except Exception:
        with contextlib.suppress(Exception):
            conn.send(("error", (traceback.format_exc(), None if venv is None else venv.failed_env)))
    finally:
        if venv is not None:
            with contextlib.suppress(Exception):
                venv.close()
        rows = slots = None  # let the segment unmap
        if segment is not None:
            with contextlib.suppress(BufferError):
                segment.close()
        conn.close()


def _kill(process: Any) -> None:
    """SIGKILL at once: a hung worker ignores SIGTERM (``ignore_in_worker``) and would not read "close"."""
    if process.is_alive():
        process.kill()
        process.join(1.0)


def _shutdown(workers: list[_Worker], segments: list[shared_memory.SharedMemory]) -> None:
    """Ask workers to exit, then kill any that do not, and release the shared segment; idempotent."""
    for worker in workers:
        with contextlib.suppress(Exception):
            if worker.process.is_alive():
                worker.conn.send(("close", None))
    deadline = time.monotonic() + _JOIN_S
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
    for worker in workers:
        _kill(worker.process)  # it ignores SIGTERM: terminate() would only add a wait
        worker.conn.close()
    workers.clear()
    for segment in segments:
        release(segment)
    segments.clear()


class SubprocessVectorEnv:
    """Environments in ``workers`` spawned processes, each stepping a contiguous chunk.

    ``step_timeout_s``: how long one call may take before its worker is taken as hung (None:
    ``chunks.STEP_TIMEOUT_S``; 0: no limit).  ``restart_workers``: a worker that dies or hangs
    is started again and its envs reset (seeded anew) instead of the run stopping; the step in
    flight for them (or, when it failed outside a step, their next step) is lost and shows in
    the batch as a time limit with reward 0 at their last observation.  ``lost_steps`` and
    ``restarts`` count what was lost, and a ``RuntimeWarning`` says it (as the Ray backend).
    """

    def __init__(self, env_config: Any, n_envs: int, workers: int, seed: int = 0,
                 restart_workers: bool = False, step_timeout_s: float | None = None) -> None:
        workers = max(1, min(workers, n_envs))
        self.n_envs = n_envs
        self.restart_workers = restart_workers
        timeout = STEP_TIMEOUT_S if step_timeout_s is None else step_timeout_s
        self.step_timeout_s = timeout or None
        self.restarts = 0
        self.lost_steps = 0
        self._env = describe_env(env_config)
        self._seed = seed
        self._workers: list[_Worker] = []
        self._segments: list[shared_memory.SharedMemory] = []
        self._closed = False
        self._last: Reset | None = None  # every env's obs, state, avail now (kept when restart_workers)
        self._pending: dict[int, Reset] = {}
        """Workers restarted outside a step: their fresh envs' first observations, which the next
        ``step`` returns for them after cutting their old episodes short."""
        # Runs close's cleanup on garbage collection and at interpreter exit, without
        # keeping ``self`` alive.
        self._finalizer = weakref.finalize(self, _shutdown, self._workers, self._segments)

        self._context = mp.get_context("spawn")
        self._config_bytes = pickle.dumps(env_config)
        for index, (start, stop) in enumerate(chunk_bounds(n_envs, workers)):
            self._workers.append(self._spawn(index, start, stop, seed + start))
        ready = []
        for worker in self._workers:
            try:
                ready.append(self._receive(worker, "starting"))
            except _Lost as lost:
                raise self._crashed(worker, lost.reason) from None
        self.n_agents: int = ready[0][0]
        self.observation_spaces: Sequence[spaces.Box] = ready[0][1]
        self.action_spaces: Sequence[spaces.Space] = ready[0][2]
        self.state_space: spaces.Box = ready[0][3]
        self.agent_names: list[str] = ready[0][4]
        self.agent_groups: dict[str, list[str]] = ready[0][5]

        self._layout = StepLayout.build(n_envs, self.observation_spaces, self.state_space, self.action_spaces)
        try:
            segment = create_segment(self._layout.size)
        except OSError as exc:  # /dev/shm full or too small (a container's default is 64 MB)
            self.close()
            raise HarlError(
                f'[collector] backend = "subprocess": cannot create the {self._layout.size:,}-byte shared-memory '
                f"segment for {n_envs} envs' steps ({exc}); free space in /dev/shm (or enlarge it, e.g. "
                'docker --shm-size), lower [collector] n_envs, or use backend = "inline"') from None
        self._segments.append(segment)
        self._views = self._layout.views(segment.buf)
        self._slots: list[np.ndarray] = self._layout.actions(self._views)
        self._call("attach", [self._attachment(w) for w in self._workers], "starting", restartable=False)

    def _spawn(self, index: int, start: int, stop: int, seed: int) -> _Worker:
        """Start the worker process of envs ``start:stop`` (it then builds them and reports)."""
        parent_conn, child_conn = self._context.Pipe()
        with _parent_main_hidden():
            process = self._context.Process(
                target=_worker_main, args=(child_conn, self._config_bytes, stop - start, seed),
                name=f"harl-env-worker-{index}", daemon=True)
            process.start()
        # Only the child holds its end now, so its death shows as EOF here.
        child_conn.close()
        return _Worker(index, start, stop, process, parent_conn)

    def _attachment(self, worker: _Worker) -> tuple[str, StepLayout, int]:
        return (self._segments[0].name, self._layout, worker.start)

    def reset(self, seed: int | None = None) -> Reset:
        """Reset every env; env ``k`` gets ``seed + k`` (the constructor's seed on the first call)."""
        workers = self._check_open()
        parts = self._call("reset", [None if seed is None else seed + w.start for w in workers], "resetting")
        self._pending.clear()  # every env begins afresh: nothing left to cut
        return self._keep(concat_resets(parts))

    def step(self, actions: Sequence[Array]) -> VectorStep:
        """Step every env with its row of ``actions`` (arrays; CPU tensors are read as arrays);
        ended episodes are reset (unseeded).

        The arrays returned are this step's own (copied from the segment): later steps leave them be.
        """
        arrays = [np.asarray(a) for a in actions]
        workers = self._check_open()
        in_segment = all(a.dtype == s.dtype and a.shape == s.shape for a, s in zip(arrays, self._slots))
        if in_segment:  # what the collectors send: float32 rows of the action spaces' shapes
            for slot, agent_actions in zip(self._slots, arrays):
                slot[...] = agent_actions
        chunks = [None if in_segment else [a[w.start:w.stop] for a in arrays] for w in workers]
        live = [w for w in workers if w.index not in self._pending]
        acks = dict(zip([w.index for w in live], self._call(
            "step", [chunks[w.index] for w in live], "stepping", workers=live)))
        for index in list(self._pending):  # restarted since the last step: its actions are not run
            self.lost_steps += workers[index].stop - workers[index].start
            acks[index] = self._write_cut(workers[index], self._pending.pop(index))
        masked = any(ack[1] for ack in acks.values())
        step = self._layout.read_step(self._views, [i for w in workers for i in acks[w.index][0]], masked)
        self._keep((step.obs, step.state, step.avail))
        return step

    def episode_starts(self) -> list[dict[str, Any]]:
        """How each env's current episode began (see ``InlineVectorEnv.episode_starts``)."""
        return [s for part in self._call("episode_starts", None, "reporting its episodes") for s in part]

    def restart(self, starts: Sequence[dict[str, Any]]) -> Reset:
        """Begin each env's episode again as ``starts`` says (see ``InlineVectorEnv.restart``)."""
        per_env(starts, self.n_envs, "restart", "episode starts")
        chunks = [list(starts[w.start:w.stop]) for w in self._check_open()]
        parts = self._call("restart", chunks, "resetting")
        self._pending.clear()
        return self._keep(concat_resets(parts))

    def get_state(self) -> list[Any] | None:
        """Every env's whole state now (see ``InlineVectorEnv.get_state``); None unless every env has it."""
        parts = self._call("get_state", None, "reporting its state")
        return None if any(part is None for part in parts) else [s for part in parts for s in part]

    def set_state(self, states: Sequence[Any]) -> None:
        """Restore ``get_state``'s list: the next ``step`` continues the episodes it captured."""
        per_env(states, self.n_envs, "set_state", "env states")
        self._call("set_state", [list(states[w.start:w.stop]) for w in self._check_open()], "restoring its state")

    def get_rng_state(self) -> list[Any]:
        """Each env's RNG state now (None for an env without ``get_rng_state``)."""
        return [s for part in self._call("get_rng_state", None, "reporting its RNG state") for s in part]

    def set_rng_state(self, states: Sequence[Any]) -> None:
        """Restore ``get_rng_state``'s states; the next unseeded ``reset`` continues from them."""
        per_env(states, self.n_envs, "set_rng_state", "states")
        self._call("set_rng_state", [list(states[w.start:w.stop]) for w in self._check_open()],
                   "restoring its RNG state")

    def close(self) -> None:
        """Stop the workers and release the shared segment; safe to call more than once."""
        self._closed = True
        self._views, self._slots = {}, []  # arrays over the segment: let it unmap
        self._finalizer()

    # ----------------------------------------------------------------- calls and failures

    def _keep(self, now: Any) -> Any:
        """Remember every env's current obs, state, avail: what a restarted worker's envs end at."""
        if self.restart_workers:
            self._last = now
        return now

    def _call(self, command: str, arguments: list[Any] | None, doing: str,
              workers: list[_Worker] | None = None, restartable: bool = True) -> list[Any]:
        """Send ``command`` to every worker (or to ``workers``), each with its own argument, and
        collect the replies; a worker that died or hung is restarted (``restart_workers``) or reported."""
        workers = self._check_open() if workers is None else workers
        lost: dict[int, _Lost] = {}
        for k, worker in enumerate(workers):
            try:
                worker.conn.send((command, None if arguments is None else arguments[k]))
            except (BrokenPipeError, ConnectionResetError, EOFError):
                lost[k] = _Lost(self._death(worker, doing))
        replies = []
        for k, worker in enumerate(workers):
            try:
                if k in lost:
                    raise lost[k]
                replies.append(self._receive(worker, doing))
            except _Lost as failure:
                if not (restartable and self.restart_workers):
                    raise self._crashed(worker, failure.reason, None) from None
                argument = None if arguments is None else arguments[k]
                replies.append(self._replace(worker, failure.reason, command, argument, doing))
        return replies

    def _receive(self, worker: _Worker, doing: str) -> Any:
        """The worker's next reply; never blocks on a worker that has died, hung, or is waited on
        past a stop request (``StopNow``)."""
        conn = worker.conn
        started = time.monotonic()
        limit = self.step_timeout_s
        if doing == "starting":
            limit = max(limit or 0.0, START_TIMEOUT_S)
        while not conn.poll(_POLL_S):
            waited = time.monotonic() - started
            # Re-check the pipe after seeing the process gone: it may have replied first.
            if not worker.process.is_alive() and not conn.poll(0):
                raise _Lost(self._death(worker, doing))
            if limit is not None and waited > limit:
                _kill(worker.process)
                raise _Lost(f"did not answer within {limit:g} s while {doing} ({self._env}); it was killed")
            if stop_waiting(waited):
                _kill(worker.process)
                self.close()
                raise StopNow(f"{self._where(worker)} did not answer within {STOP_WAIT_S:g} s of the "
                              f"request to stop, while {doing}: killed it and stopped at once")
        try:
            status, payload = conn.recv()
        except (EOFError, ConnectionResetError, OSError):
            raise _Lost(self._death(worker, doing)) from None
        if status == "error":
            remote_traceback, env = payload
            if env is not None:
                doing = f"{doing} env {worker.start + env}"
            raise self._crashed(worker, None, remote_traceback, doing) from _RemoteTraceback(remote_traceback)
        return payload

    def _replace(self, worker: _Worker, reason: str, command: str, argument: Any, doing: str) -> Any:
        """Start ``worker`` again, reset its envs with fresh seeds, then answer ``command`` for them."""
        self.restarts += 1
        old = worker.process.pid
        _kill(worker.process)
        worker.conn.close()
        seed = self._seed + worker.start + RESEED * self.restarts
        fresh = self._spawn(worker.index, worker.start, worker.stop, seed)
        worker.process, worker.conn = fresh.process, fresh.conn
        try:
            self._receive(worker, "starting")
            self._send_receive(worker, ("attach", self._attachment(worker)), "starting")
            reset = self._send_receive(worker, ("reset", seed), "resetting")
        except _Lost as failure:
            raise self._crashed(worker, f"{failure.reason} (after a restart)", None) from None
        text = (f"Environment worker {worker.index} (hosting {worker.envs_text()}; pid {old}) {reason}; "
                f"restarted it as pid {worker.process.pid} and reset its envs")
        if command != "step":  # repeated on the fresh envs; the next step cuts the old episodes
            if command not in ("reset", "restart"):
                self._pending[worker.index] = reset
            warnings.warn(f"{text}; its episodes are cut short at the next step.", RuntimeWarning, stacklevel=4)
            try:
                return self._send_receive(worker, (command, argument), doing)
            except _Lost as failure:
                raise self._crashed(worker, f"{failure.reason} (after a restart)", None) from None
        lost = worker.stop - worker.start
        self.lost_steps += lost
        warnings.warn(f"{text}: {lost} env steps lost (the step in flight), {lost} episodes cut short.",
                      RuntimeWarning, stacklevel=4)
        return self._write_cut(worker, reset)

    def _send_receive(self, worker: _Worker, message: tuple[str, Any], doing: str) -> Any:
        try:
            worker.conn.send(message)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            raise _Lost(self._death(worker, doing)) from None
        return self._receive(worker, doing)

    def _write_cut(self, worker: _Worker, reset: Reset) -> tuple[list[Any], bool]:
        """Write the cut-short step of ``worker``'s envs (``chunks.cut_short``) into its rows of the
        segment, as the worker would have; the ack it would have sent."""
        rows = slice(worker.start, worker.stop)
        assert self._last is not None  # kept since the first reset when restart_workers
        obs, state, avail = self._last
        last = ([o[rows] for o in obs], state[rows], None if avail is None else [a[rows] for a in avail])
        step = cut_short(last, reset)
        self._layout.write_step(self._layout.views(self._segments[0].buf, worker.start, worker.stop), step)
        return [], step.avail is not None

    def _check_open(self) -> list[_Worker]:
        if self._closed:
            raise RuntimeError("this vector env is closed")
        return self._workers

    def _where(self, worker: _Worker) -> str:
        return f"Environment worker {worker.index} (hosting {worker.envs_text()})"

    def _death(self, worker: _Worker, doing: str) -> str:
        """What happened to a worker whose process is gone (or going: its pipe closed), in words."""
        worker.process.join(1.0)
        code = worker.process.exitcode
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"was killed by {name} while {doing}"
        return f"died with exit code {code} while {doing}"

    def _crashed(self, worker: _Worker, reason: str | None, remote_traceback: str | None = None,
                 doing: str = "") -> EnvCrashedError:
        """Shut every worker down and describe what happened to this one."""
        self.close()
        if remote_traceback is not None:
            last_line = remote_traceback.strip().splitlines()[-1]
            return EnvCrashedError(f"{self._where(worker)} raised {last_line} while {doing}. {INLINE_HINT}")
        hint = TIMEOUT_HINT if "did not answer" in (reason or "") else INLINE_HINT
        return EnvCrashedError(f"{self._where(worker)} {reason}. {hint}")
