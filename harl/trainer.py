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
import time
import traceback
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from harl import registry
from harl.callbacks import Callback, Callbacks, RowHook
from harl.compose import Stages
from harl.config.spec import PipelineSpec
from harl.errors import HarlError, StageError
from harl.evaluator import EvalStats
from harl.finite import check_update
from harl.logging.csv_log import metrics_state
from harl.logging.progress import ProgressView, StageTimes
from harl.logging.sink import Sink, close_sinks
from harl.loop import (
    Counters,
    Iterate,
    Member,
    Phase,
    RngState,
    Row,
    TrainResult,
    Work,
    drive,
    rng_state,
    set_rng_state,
)
from harl.protocols import Collected, UpdateResult
from harl.rundir.checkpoint import list_checkpoints, save_checkpoint
from harl.rundir.lock import RunLock
from harl.rundir.signals import hold_stops

# The loop and its records live in harl.loop; they are named here too, where they always were.
__all__ = ["Counters", "Iterate", "Member", "Phase", "Row", "TrainResult", "Trainer", "Work", "calling", "drive",
           "rng_state", "set_rng_state"]

HARL_DIR = Path(__file__).resolve().parent


@contextlib.contextmanager
def calling(slot: str, stage: object, config: object | None) -> Iterator[None]:
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

    ``stages`` is a ``harl.compose.Stages`` (or a test's stand-in); ``update()`` hands back the family's
    own result (HARL's runner facades read its per-agent stats), an ``UpdateResult`` to the loop.
    """

    def __init__(self, stages: Stages, spec: PipelineSpec, run_dir: Path, pipeline_text: str,
                 counters: Counters | None = None, sinks: Sequence[Sink] = (),
                 callbacks: Iterable[Callback | RowHook] = (), lock: RunLock | None = None) -> None:
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
        self._rng_at_iteration_end: RngState | None = None
        self.quiet = False
        """What ``train()`` does without ``quiet``: a Trainer of ``harl.start`` is quiet, as ``harl.train`` is."""

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
            **metrics_state(self.sinks),  # the rows so far: a lost metrics.csv is rewritten whole
        }

    def save(self) -> Path:
        path = save_checkpoint(self.run_dir, self.counters.iteration, self.checkpoint_state(),
                               self.spec.checkpoint.keep)
        self.callbacks.on_checkpoint(path)
        return path

    def newest_checkpoint(self) -> Path | None:
        found = list_checkpoints(self.run_dir)
        return found[-1] if found else None

    def should_evaluate(self, iteration: int, last: int) -> bool:
        """Iteration ``iteration`` (1-based) evaluates: the first, every ``evaluator.every_iterations``
        and the run's ``last``."""
        every = self.spec.evaluator.every_iterations
        return iteration == last or iteration == 1 or (every > 0 and iteration % every == 0)

    # ------------------------------------------------------------ the steps of one iteration

    def collect(self) -> Collected:
        """Env steps with the current policy into the buffer: the collector's stats."""
        with calling("collector", self.stages.collector, self.spec.collector):
            return self.stages.collector.collect(self.stages.buffer)

    def compute_returns(self) -> None:
        """Advantages and value targets (or nothing, for a family whose targets come at sampling)."""
        with calling("returns", self.stages.returns, self.spec.returns):
            self.stages.returns.compute(self.stages.buffer)

    @property
    def progress(self) -> float:
        """The share of the budget's env steps spent (learning-rate schedules read it); at the start
        of iteration ``k`` of ``n`` it is exactly ``k / n``."""
        return self.counters.env_steps / (self.total_iterations * self.stages.collector.steps_per_iteration)

    def update(self, **options: object) -> UpdateResult:
        """The updater's step on the filled buffer at this ``progress`` (``options``: the updater's own,
        e.g. ``steps=1`` for one off-policy gradient step, as HARL's runners take them)."""
        with calling("updater", self.stages.updater, self.spec.updater):
            return self.stages.updater.update(self.stages.buffer, progress=self.progress, **options)

    def check(self, update: UpdateResult) -> None:
        """A ``NonFiniteUpdateError`` when the update left a non-finite loss or weight."""
        check_update(update.row(), self.counters.iteration + 1, self.stages, self.run_dir)

    def iterate(self, phase: Phase) -> Work:
        """Collect, returns and update: the work of one iteration, nothing counted yet."""
        start = time.perf_counter()
        rollout = self.collect()
        hold_stops()  # a second Ctrl-C from here waits for the iteration's row (harl.rundir.signals)
        self.compute_returns()
        collected = time.perf_counter()
        phase.updating = True  # from here to the end of the update, a failure leaves half-updated networks
        update = self.update()
        return Work(rollout, update, collected - start, time.perf_counter() - collected)

    def evaluate_if_due(self, last: int) -> tuple[EvalStats | None, Exception | None]:
        """The evaluation of the iteration being finished, where due; a failure is handed back so that
        the iteration's row is written before it is raised."""
        if not self.should_evaluate(self.counters.iteration + 1, last):
            return None, None
        try:
            with calling("evaluator", self.stages.evaluator, None):
                return self.stages.evaluator.evaluate(), None
        except Exception as exc:  # noqa: BLE001 - the row is written first, then it is raised
            return None, exc

    def record(self, work: Work, evaluation: EvalStats | None, seconds: float, rng: RngState) -> Row:
        """Count a finished iteration and write its row to the sinks: counters, the RNG states a save
        of it holds, wall time, stage shares."""
        self.count(work.rollout.env_steps, len(work.rollout.episodes))
        self.counters.wall_time += seconds
        self._rng_at_iteration_end = rng
        if evaluation is not None:
            self.last_eval = evaluation
        self.stage_times.add(work.collect_s, work.update_s, seconds - work.collect_s - work.update_s)
        row = self._row(work.rollout, work.update, evaluation, work.rollout.env_steps / (work.collect_s + work.update_s))
        for sink in self.sinks:  # every finished iteration's row, its eval columns empty if it failed
            sink.write(row)
        return row

    def count(self, env_steps: int, episodes: int) -> None:
        """One more iteration of ``env_steps`` env steps that finished ``episodes`` episodes."""
        c = self.counters
        c.iteration += 1
        c.env_steps += env_steps
        c.episodes += episodes

    def notify(self, row: Row, evaluation: EvalStats | None) -> bool:
        """The callbacks' hooks for a recorded iteration: whether one asks the run to stop."""
        wants_stop = self.callbacks.on_iteration(dict(row))
        if evaluation is not None:
            wants_stop = self.callbacks.on_evaluation(evaluation) or wants_stop
        return wants_stop

    def train(self, progress: ProgressView | None = None, quiet: bool | None = None,
              max_iterations: int | None = None) -> TrainResult:
        """Run iterations until the budget is spent, ``max_iterations`` more are done, a callback
        returns True, or Ctrl-C / SIGTERM (see ``harl.rundir.signals``).

        ``quiet``: no progress display and no log lines (batch jobs); None: ``self.quiet``.  ``max_iterations``: a
        planned stop (its last iteration evaluates and checkpoints, as the budget's last does);
        the learning-rate schedule still follows the whole budget.
        """
        last = self.last_iteration(max_iterations)
        quiet = self.quiet if quiet is None else quiet
        view = progress or ProgressView(self.total_iterations * self.stages.collector.steps_per_iteration,
                                        self.counters.env_steps, self.spec.logging.progress and not quiet,
                                        self.spec.logging.log_every)
        return drive([self], lambda phase, live: {0: self.iterate(phase)}, view, last)[0]

    def last_iteration(self, max_iterations: int | None) -> int:
        """The iteration a ``train(max_iterations=...)`` call ends at."""
        if max_iterations is not None and max_iterations < 1:
            raise ValueError(f"max_iterations: expected a positive integer, got {max_iterations}")
        done = self.counters.iteration
        return self.total_iterations if max_iterations is None else min(self.total_iterations, done + max_iterations)

    def close_sinks(self) -> None:
        """Close the sinks (naming the newest checkpoint) and release the lock: the end of a ``train()``
        call (a second call trains on without them)."""
        try:
            close_sinks(self.sinks, self.newest_checkpoint())
        finally:
            self.sinks = []
            self.release()

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

    def _row(self, rollout: Collected, update: UpdateResult, evaluation: EvalStats | None,
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
        row.update(rollout.row())  # collection's own columns (a teams pipeline: each team's return, its pools' games)
        if evaluation is not None:
            row.update(eval_return=evaluation.mean_return, eval_return_std=evaluation.std_return,
                       eval_length=evaluation.mean_length)
            # env-specific episode metrics (win rate, forward velocity, ...); iteration 1 always
            # evaluates, so these columns exist from the first row of metrics.csv on
            row.update({f"eval_{name}": value for name, value in evaluation.metrics.items()})
        row.update(update.row())
        return row
