"""The subprocess backend: the environments split into chunks, one worker process per chunk.

Each worker runs an ``InlineVectorEnv`` over its chunk and steps it in one call per vector
step.  The per-step arrays travel through one shared-memory segment (``shared.StepLayout``):
the parent writes the actions there, each worker writes its rows of the results in place,
and the pipe carries only the command and a small ack (episode-end infos), so nothing
else is pickled per step.  Resets, episode starts, RNG states and errors, which are rare,
still travel through the pipe.  The parent owns the segment and unlinks it on close, on a
worker's crash and at exit; if the parent is killed outright, its workers see the pipe
close and exit, and multiprocessing's resource tracker unlinks it.

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
import weakref
from collections.abc import Iterator, Sequence
from multiprocessing import shared_memory
from multiprocessing.connection import Connection
from typing import Any

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.protocol import VectorStep
from harl.envs.vector.chunks import INLINE_HINT, chunk_bounds, concat_resets, envs_text
from harl.envs.vector.inline import InlineVectorEnv, Reset, per_env
from harl.envs.vector.shared import StepLayout, release
from harl.errors import EnvCrashedError, HarlError
from harl.run.signals import ignore_in_worker

_POLL_S = 0.2
"""How often a waiting parent checks that the worker it waits on is still alive."""
_JOIN_S = 2.0
"""How long ``close`` waits for workers to exit before terminating them."""


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
            ("ok", (venv.n_agents, venv.observation_spaces, venv.action_spaces, venv.state_space))
        )
        while True:
            try:
                command, argument = conn.recv()
            except EOFError:  # the parent is gone
                break
            if command == "attach":
                name, layout, start = argument
                segment = shared_memory.SharedMemory(name)
                rows = layout.views(segment.buf, start, start + n_envs)
                slots = layout.actions(rows)
                conn.send(("ok", None))
            elif command == "step":
                step = venv.step([slot.copy() for slot in slots] if argument is None else argument)
                layout.write_step(rows, step)
                conn.send(("ok", (step.episode_infos, step.avail is not None)))
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
            conn.send(("error", (traceback.format_exc(), None if venv is None else venv.failed_env)))
    finally:
        if venv is not None:
            with contextlib.suppress(Exception):
                venv.close()
        rows = slots = None  # type: ignore[assignment]  # let the segment unmap
        if segment is not None:
            with contextlib.suppress(BufferError):
                segment.close()
        conn.close()


def _shutdown(workers: list[_Worker], segments: list[shared_memory.SharedMemory]) -> None:
    """Ask workers to exit, then terminate (and finally kill) any that do not, and release
    the shared segment; idempotent."""
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
    for segment in segments:
        release(segment)
    segments.clear()


class SubprocessVectorEnv:
    """Environments in ``workers`` spawned processes, each stepping a contiguous chunk."""

    def __init__(self, env_config: Any, n_envs: int, workers: int, seed: int = 0) -> None:
        workers = max(1, min(workers, n_envs))
        self.n_envs = n_envs
        self._workers: list[_Worker] = []
        self._segments: list[shared_memory.SharedMemory] = []
        self._closed = False
        # Runs close's cleanup on garbage collection and at interpreter exit, without
        # keeping ``self`` alive.
        self._finalizer = weakref.finalize(self, _shutdown, self._workers, self._segments)

        context = mp.get_context("spawn")
        config_bytes = pickle.dumps(env_config)
        with _parent_main_hidden():
            for index, (start, stop) in enumerate(chunk_bounds(n_envs, workers)):
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

        self._layout = StepLayout.build(n_envs, self.observation_spaces, self.state_space, self.action_spaces)
        try:
            segment = shared_memory.SharedMemory(create=True, size=self._layout.size)
        except OSError as exc:  # /dev/shm full or too small (a container's default is 64 MB)
            self.close()
            raise HarlError(
                f'[collector] backend = "subprocess": cannot create the {self._layout.size:,}-byte shared-memory '
                f"segment for {n_envs} envs' steps ({exc}); free space in /dev/shm (or enlarge it, e.g. "
                'docker --shm-size), lower [collector] n_envs, or use backend = "inline"') from None
        self._segments.append(segment)
        self._views = self._layout.views(segment.buf)
        self._slots: list[np.ndarray] = self._layout.actions(self._views)
        self._call("attach", [(segment.name, self._layout, w.start) for w in self._workers], "starting")

    def reset(self, seed: int | None = None) -> Reset:
        """Reset every env; env ``k`` gets ``seed + k`` (the constructor's seed on the first call)."""
        for worker in self._check_open():
            self._send(worker, ("reset", None if seed is None else seed + worker.start), "resetting")
        return concat_resets([self._receive(worker, "resetting") for worker in self._workers])

    def step(self, actions: Sequence[np.ndarray]) -> VectorStep:
        """Step every env with its row of ``actions``; ended episodes are reset (unseeded).

        The arrays returned are this step's own (copied from the segment): later steps leave them be.
        """
        workers = self._check_open()
        in_segment = all(isinstance(a, np.ndarray) and a.dtype == s.dtype and a.shape == s.shape
                         for a, s in zip(actions, self._slots))
        if in_segment:  # what the collectors send: float32 rows of the action spaces' shapes
            for slot, agent_actions in zip(self._slots, actions):
                slot[...] = agent_actions
        chunks = [None if in_segment else [a[w.start:w.stop] for a in actions] for w in workers]
        acks = self._call("step", chunks, "stepping")
        masked = any(ack[1] for ack in acks)
        return self._layout.read_step(self._views, [i for ack in acks for i in ack[0]], masked)

    def episode_starts(self) -> list[dict[str, Any]]:
        """How each env's current episode began (see ``InlineVectorEnv.episode_starts``)."""
        return [s for part in self._call("episode_starts", None, "reporting its episodes") for s in part]

    def restart(self, starts: Sequence[dict[str, Any]]) -> Reset:
        """Begin each env's episode again as ``starts`` says (see ``InlineVectorEnv.restart``)."""
        per_env(starts, self.n_envs, "restart", "episode starts")
        chunks = [list(starts[w.start:w.stop]) for w in self._workers]
        return concat_resets(self._call("restart", chunks, "resetting"))

    def get_rng_state(self) -> list[Any]:
        """Each env's RNG state now (None for an env without ``get_rng_state``)."""
        return [s for part in self._call("get_rng_state", None, "reporting its RNG state") for s in part]

    def set_rng_state(self, states: Sequence[Any]) -> None:
        """Restore ``get_rng_state``'s states; the next unseeded ``reset`` continues from them."""
        per_env(states, self.n_envs, "set_rng_state", "states")
        self._call("set_rng_state", [list(states[w.start:w.stop]) for w in self._workers],
                   "restoring its RNG state")

    def _call(self, command: str, arguments: list[Any] | None, doing: str) -> list[Any]:
        """Send ``command`` to every worker (with its own argument) and collect the replies."""
        workers = self._check_open()
        for k, worker in enumerate(workers):
            self._send(worker, (command, None if arguments is None else arguments[k]), doing)
        return [self._receive(worker, doing) for worker in workers]

    def close(self) -> None:
        """Stop the workers and release the shared segment; safe to call more than once."""
        self._closed = True
        self._views, self._slots = {}, []  # arrays over the segment: let it unmap
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
            remote_traceback, env = payload
            if env is not None:
                doing = f"{doing} env {worker.start + env}"
            raise self._crashed(worker, doing, remote_traceback) from _RemoteTraceback(remote_traceback)
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
        return EnvCrashedError(f"{where} {what}. {INLINE_HINT}")
