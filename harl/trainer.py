"""The Trainer: runs the stages in order and keeps the counters.  It owns no algorithm.

Glossary (these words mean one thing everywhere in harl):

- **env step**: one call of one environment's ``step``; with ``n_envs`` environments a
  vector step is ``n_envs`` env steps.  Budgets and throughput count env steps.
- **rollout**: ``rollout_length`` vector steps collected with one fixed policy.
- **iteration**: one rollout, its returns, and one update.
- **update**: every agent's actor (in the updater's order) and then the critic.
- **episode**: one environment from reset to termination or truncation.
- **evaluation**: ``episodes`` episodes on separate environments, deterministic actions.

One iteration::

    stats = collector.collect(buffer)          # env steps with the current policy
    returns.compute(buffer)                    # advantages and value targets
    update = updater.update(buffer, progress)  # actors, then critic
    evaluator.evaluate() every k iterations;   checkpoint every k iterations and at the end
"""

from __future__ import annotations

import contextlib
import math
import random
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch

from harl import registry
from harl.callbacks import Callback, Callbacks
from harl.errors import HarlError, ResourceError, StageError
from harl.evaluator import EvalStats
from harl.finite import NonFiniteUpdateError, check_update
from harl.logging.progress import ProgressView, StageTimes
from harl.logging.sink import Sink, close_sinks
from harl.rundir.checkpoint import list_checkpoints, save_checkpoint
from harl.rundir.signals import GracefulStop

Row = dict[str, int | float | str | None]
"""One iteration's metrics: the columns of metrics.csv, as numbers (text only for ``agent_order``)."""


@attrs.define
class Counters:
    """How far a run is: iterations, env steps and episodes done, seconds spent in iterations."""

    iteration: int = 0
    env_steps: int = 0
    episodes: int = 0
    wall_time: float = 0.0


@attrs.define
class TrainResult:
    """What a ``train()`` call did: where, how far, its last evaluation and its rows."""

    counters: Counters
    last_eval: EvalStats | None
    interrupted: bool
    """Stopped early by a signal (Ctrl-C, SIGTERM) or a callback: resume continues it."""
    run_dir: Path
    signum: int = 0
    """The signal that stopped the run (0: none; see ``harl.rundir.signals``)."""
    stopped_by: str = "budget"
    """budget (run.total_env_steps spent), max_iterations, callback or signal."""
    metrics: list[Row] = attrs.field(factory=list)
    """The rows of this call's iterations (a resumed run's earlier rows: ``harl.read_metrics``)."""


BASE_COLUMNS = ["iteration", "env_steps", "episodes", "wall_time", "steps_per_s",
                "train_return", "train_length", "eval_return", "eval_return_std", "eval_length"]
"""Columns every run has; the updater's ``stats.row()`` adds its own after them."""


def rng_state() -> dict[str, Any]:
    """Every global generator a run draws from; CUDA's too once a GPU run has used it
    (policy sampling on a GPU draws from CUDA's generator, not the CPU's)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


HARL_DIR = Path(__file__).resolve().parent


@contextlib.contextmanager
def calling(slot: str, stage: Any, config: Any) -> Iterator[None]:
    """A stage's own exception becomes a ``StageError`` naming the slot, its kind and module, and
    the frames of the traceback outside harl (a user's stage, objective or env), innermost last.
    harl's own errors (a crashed env worker, a full disk, a non-finite update) pass as they are."""
    try:
        yield
    except (HarlError, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of the stage's own code is reported the same way
        frames = traceback.extract_tb(exc.__traceback__)
        own = [f for f in frames if not Path(f.filename).resolve().is_relative_to(HARL_DIR)] or frames[-1:]
        where = "; ".join(f"{f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in own[-3:])
        kind = registry.kind_name(config) if config is not None else type(stage).__name__
        raise StageError(
            f"[{slot}] kind \"{kind}\" ({type(stage).__module__}.{type(stage).__qualname__}) raised "
            f"{type(exc).__name__}: {exc}; at {where}. The run stopped after its last whole iteration, "
            "whose checkpoint is kept (harl train --resume continues from it); --debug shows the whole "
            "traceback") from exc


class Trainer:
    """Composes the built stages (see ``harl.compose``) into the training loop.

    ``stages`` needs: ``collector`` (``collect(buffer)`` -> stats with ``env_steps`` and
    ``episodes``; ``steps_per_iteration``), ``buffer``, ``returns`` (``compute(buffer)``),
    ``updater`` (``update(buffer, progress)`` -> stats with ``row()``), ``evaluator``
    (``evaluate()``), ``state_dict()`` / ``load_state_dict()`` for checkpoints, ``close()``.
    On- and off-policy pipelines differ only in which stages fill these slots.

    It receives its sinks (``harl.logging.sink``), callbacks (``harl.callbacks``) and the
    run directory's lock (``harl.rundir.lock``), and constructs none: ``harl.run.lifecycle``
    does.  ``train()`` closes the sinks and releases the lock when it ends (a second call
    trains on without them).
    """

    def __init__(self, stages: Any, spec: Any, run_dir: Path, pipeline_text: str,
                 counters: Counters | None = None, sinks: Sequence[Sink] = (),
                 callbacks: Iterable[Callback | Callable[..., Any]] = (), lock: Any = None) -> None:
        self.stages = stages
        self.spec = spec
        self.run_dir = run_dir
        self.pipeline_text = pipeline_text
        self.counters = counters or Counters()
        self.sinks = list(sinks)
        self.callbacks = Callbacks(callbacks)
        self.lock = lock
        steps_per_iteration = stages.collector.steps_per_iteration
        self.total_iterations = max(1, math.ceil(spec.run.total_env_steps / steps_per_iteration))
        self.last_eval: EvalStats | None = None
        self.stage_times = StageTimes()
        self._rng_at_iteration_end: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        """The budget (``run.total_env_steps``) is spent: ``train()`` has nothing to do."""
        return self.counters.iteration >= self.total_iterations

    def checkpoint_state(self) -> dict[str, Any]:
        """The stages' state, the counters and the RNG states as of the end of the last whole
        iteration (a save after a failure inside the next one must not take its draws)."""
        return {
            **self.stages.state_dict(),
            "counters": attrs.asdict(self.counters),
            "rng": self._rng_at_iteration_end or rng_state(),
            "pipeline": self.pipeline_text,
        }

    def save(self) -> Path:
        path = save_checkpoint(self.run_dir, self.counters.iteration, self.checkpoint_state(),
                               self.spec.checkpoint.keep)
        self.callbacks.on_checkpoint(path)
        return path

    def newest_checkpoint(self) -> Path | None:
        found = list_checkpoints(self.run_dir)
        return found[-1] if found else None

    def _should_evaluate(self, iteration: int, last: int) -> bool:
        every = self.spec.evaluator.every_iterations
        return iteration == last or iteration == 1 or (every > 0 and iteration % every == 0)

    def train(self, progress: ProgressView | None = None, quiet: bool = False,
              max_iterations: int | None = None) -> TrainResult:
        """Run iterations until the budget is spent, ``max_iterations`` more are done, a callback
        returns True, or Ctrl-C / SIGTERM (see ``harl.rundir.signals``).

        ``quiet``: no progress display and no log lines (batch jobs).  ``max_iterations``: a
        planned stop (its last iteration evaluates and checkpoints, as the budget's last does);
        the learning-rate schedule still follows the whole budget.
        """
        if max_iterations is not None and max_iterations < 1:
            raise ValueError(f"max_iterations: expected a positive integer, got {max_iterations}")
        s, c, spec = self.stages, self.counters, self.spec
        last = self.total_iterations if max_iterations is None else min(self.total_iterations,
                                                                          c.iteration + max_iterations)
        view = progress or ProgressView(self.total_iterations * s.collector.steps_per_iteration, c.env_steps,
                                        spec.logging.progress and not quiet, spec.logging.log_every)
        interrupted = False
        stopped_by = "max_iterations" if last < self.total_iterations else "budget"
        last_saved = c.iteration
        rows: list[Row] = []
        stop = GracefulStop(view.message)
        poisoned = False  # a non-finite update, a failed write or a failed update: no exit-save
        updating = False
        try:
            with stop:
                while c.iteration < last:
                    start = time.perf_counter()
                    with calling("collector", s.collector, spec.collector):
                        rollout = s.collector.collect(s.buffer)
                    collected = time.perf_counter()
                    with calling("returns", s.returns, spec.returns):
                        s.returns.compute(s.buffer)
                    updating = True  # from here to the end of the update, a failure leaves half-updated networks
                    with calling("updater", s.updater, spec.updater):
                        update = s.updater.update(s.buffer, progress=c.iteration / self.total_iterations)
                    check_update(update.row(), c.iteration + 1, s, self.run_dir)
                    updating = False
                    c.iteration += 1
                    c.env_steps += rollout.env_steps
                    c.episodes += len(rollout.episodes)
                    updated = time.perf_counter()
                    evaluation, failed = None, None
                    if self._should_evaluate(c.iteration, last):
                        try:
                            with calling("evaluator", s.evaluator, None):
                                evaluation = s.evaluator.evaluate()
                        except Exception as exc:  # noqa: BLE001 - the row is written first, then it is raised
                            failed = exc
                    self._rng_at_iteration_end = rng_state()  # what a save of this iteration holds
                    if evaluation is not None:
                        self.last_eval = evaluation
                    end = time.perf_counter()
                    c.wall_time += end - start
                    self.stage_times.add(collected - start, updated - collected, end - updated)
                    row = self._row(rollout, update, evaluation, rollout.env_steps / (updated - start))
                    rows.append(row)
                    for sink in self.sinks:  # every finished iteration's row, its eval columns empty if it failed
                        sink.write(row)
                    if failed is not None:
                        raise failed
                    view.update(row, self.last_eval.mean_return if self.last_eval else None,
                                self.stage_times.shares())
                    wants_stop = self.callbacks.on_iteration(dict(row))
                    if evaluation is not None:
                        wants_stop = self.callbacks.on_evaluation(evaluation) or wants_stop
                    if c.iteration % spec.checkpoint.every_iterations == 0:
                        self.save()
                        last_saved = c.iteration
                    if (stop.requested or wants_stop) and c.iteration < last:
                        interrupted = True
                        stopped_by = "signal" if stop.requested else "callback"
                        if wants_stop and not stop.requested:
                            view.message("a callback asked the run to stop: writing a checkpoint")
                        break
        except (NonFiniteUpdateError, ResourceError):
            poisoned = True
            raise
        except StageError:
            poisoned = updating  # networks half-updated: the newest checkpoint stays the newest
            raise
        except KeyboardInterrupt as exc:
            interrupted, stopped_by = True, "signal"
            if str(exc):  # why the wait was given up (a worker that hung while a stop was asked for)
                view.message(f"interrupted: {exc}")
            if c.iteration > last_saved:
                view.message("interrupted: writing a checkpoint before stopping")
            elif last_saved:
                view.message(f"interrupted: the checkpoint of iteration {last_saved} stays the newest")
            else:
                view.message("interrupted before the first iteration ended: no checkpoint")
        finally:
            # Not again when the newest checkpoint is of this iteration: a Ctrl-C inside the
            # next iteration would overwrite its exact state with a half-done one.  Not at all
            # after a non-finite update (it would save the poisoned networks) or a failed write.
            stop.shutting_down()
            try:
                with stop:
                    if c.iteration > last_saved and not poisoned:
                        self.save()
            finally:
                view.close()
                try:
                    close_sinks(self.sinks, self.newest_checkpoint())
                finally:
                    self.sinks = []
                    self.release()
        return TrainResult(c, self.last_eval, interrupted, self.run_dir, stop.signum, stopped_by, rows)

    def release(self) -> None:
        """Release the run directory's lock (another process may then resume the run)."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def close(self) -> None:
        """Close the envs, any sink still open and the lock: a Trainer that never trained, or one done."""
        try:
            close_sinks(self.sinks, None)
        finally:
            self.sinks = []
            try:
                self.stages.close()
            finally:
                self.release()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _row(self, rollout: Any, update: Any, evaluation: EvalStats | None,
             steps_per_s: float) -> Row:
        c = self.counters
        returns = [e["return"] for e in rollout.episodes]
        lengths = [e["length"] for e in rollout.episodes]
        row: Row = {
            "iteration": c.iteration, "env_steps": c.env_steps, "episodes": c.episodes,
            "wall_time": c.wall_time, "steps_per_s": steps_per_s,
            "train_return": float(np.mean(returns)) if returns else None,
            "train_length": float(np.mean(lengths)) if lengths else None,
            "eval_return": None, "eval_return_std": None, "eval_length": None,
        }
        if evaluation is not None:
            row.update(eval_return=evaluation.mean_return, eval_return_std=evaluation.std_return,
                       eval_length=evaluation.mean_length)
            # env-specific episode metrics (win rate, forward velocity, ...); iteration 1 always
            # evaluates, so these columns exist from the first row of metrics.csv on
            row.update({f"eval_{name}": value for name, value in evaluation.metrics.items()})
        row.update(update.row())
        return row
