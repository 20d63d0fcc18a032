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
from harl.logging.csv_log import metrics_state
from harl.logging.progress import ProgressView, StageTimes
from harl.logging.sink import Sink, close_sinks
from harl.rundir.checkpoint import list_checkpoints, save_checkpoint
from harl.rundir.signals import GracefulStop, hold_stops, release_stops

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
    """budget (run.total_env_steps spent), max_iterations, callback, signal or failed (a population
    member whose update was not finite: ``failure`` says why)."""
    metrics: list[Row] = attrs.field(factory=list)
    """The rows of this call's iterations (a resumed run's earlier rows: ``harl.read_metrics``)."""
    failure: str = ""
    """Why a population member stopped alone (its update was not finite); empty otherwise."""


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

    def collect(self) -> Any:
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

    def update(self, **options: Any) -> Any:
        """The updater's step on the filled buffer at this ``progress`` (``options``: the updater's own,
        e.g. ``steps=1`` for one off-policy gradient step, as HARL's runners take them)."""
        with calling("updater", self.stages.updater, self.spec.updater):
            return self.stages.updater.update(self.stages.buffer, progress=self.progress, **options)

    def check(self, update: Any) -> None:
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

    def record(self, work: Work, evaluation: EvalStats | None, seconds: float, rng: dict[str, Any]) -> Row:
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

    def train(self, progress: ProgressView | None = None, quiet: bool = False,
              max_iterations: int | None = None) -> TrainResult:
        """Run iterations until the budget is spent, ``max_iterations`` more are done, a callback
        returns True, or Ctrl-C / SIGTERM (see ``harl.rundir.signals``).

        ``quiet``: no progress display and no log lines (batch jobs).  ``max_iterations``: a
        planned stop (its last iteration evaluates and checkpoints, as the budget's last does);
        the learning-rate schedule still follows the whole budget.
        """
        last = self.last_iteration(max_iterations)
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


@attrs.define
class Work:
    """One member's iteration before it is counted: what was collected, the update's stats, and the
    seconds collection (with returns) and the update took."""

    rollout: Any
    update: Any
    collect_s: float
    update_s: float


@attrs.define
class Phase:
    """Where the loop is inside an iteration: ``updating`` from the update's start to its check (a
    failure there leaves half-updated networks, which no exit checkpoint may save)."""

    updating: bool = False


Iterate = Callable[[Phase, list[int]], dict[int, Work]]
"""``iterate(phase, live)``: the work of one iteration of each live member, by member index."""


def drive(trainers: Sequence[Trainer], iterate: Iterate, view: ProgressView, last: int,
          say: Callable[[int, str], Any] | None = None) -> list[TrainResult]:
    """The one training loop: ``iterate`` does the work of an iteration (one run's stages, or a
    population's batched ones); the loop does the rest, per member, in this order: the non-finite
    check, the evaluation where due, one RNG snapshot, counters and the row (sinks), the progress
    view, the callbacks, the checkpoint schedule; then signals and callbacks may stop the run, and
    on the way out every member whose newest iteration is unsaved is saved (docs/architecture.md,
    "The loop").

    One member (a run): any failure is raised and stops the run.  Several (a population): a member
    whose update is not finite stops alone, named through ``say``; the others go on.
    """
    single = len(trainers) == 1
    live = [s for s, t in enumerate(trainers) if not t.finished]
    saved = {s: t.counters.iteration for s, t in enumerate(trainers)}
    failed: dict[int, str] = {}
    stop = GracefulStop(view.message)
    phase = Phase()
    interrupted, stopped_by = False, "max_iterations" if last < trainers[0].total_iterations else "budget"
    poisoned = False  # a non-finite update, a failed write or a failed update: no exit-save
    rows: dict[int, list[Row]] = {s: [] for s in range(len(trainers))}
    try:
        with stop:
            while live and trainers[live[0]].counters.iteration < last:
                start = time.perf_counter()
                phase.updating = False
                works = iterate(phase, live)
                done: list[tuple[int, Work, EvalStats | None, Exception | None]] = []
                for s, work in works.items():
                    try:
                        trainers[s].check(work.update)
                    except NonFiniteUpdateError as exc:
                        if single:
                            raise
                        _stop_member(trainers[s], s, str(exc), live, failed, say)
                        continue
                    done.append((s, work, None, None))
                phase.updating = False
                done = [(s, work, *trainers[s].evaluate_if_due(last)) for s, work, _, _ in done]
                snapshot = rng_state()  # what a save of this iteration holds
                seconds = time.perf_counter() - start
                recorded = [(s, trainers[s].record(work, evaluation, seconds, snapshot), evaluation)
                            for s, work, evaluation, _ in done]
                for s, row, _ in recorded:
                    rows[s].append(row)
                for _, _, _, failure in done:
                    if failure is not None:
                        raise failure
                release_stops()  # the iteration is whole: a second Ctrl-C held meanwhile stops here
                if recorded:
                    _show(view, [trainers[s] for s, _, _ in recorded], [row for _, row, _ in recorded], trainers)
                wants_stop = False
                for s, row, evaluation in recorded:
                    wants_stop = trainers[s].notify(row, evaluation) or wants_stop
                for s, _, _ in recorded:
                    iteration = trainers[s].counters.iteration
                    if iteration % trainers[s].spec.checkpoint.every_iterations == 0 or (
                            not single and iteration == last):
                        trainers[s].save()
                        saved[s] = iteration
                live[:] = [s for s in live if not trainers[s].finished and trainers[s].counters.iteration < last]
                if (stop.requested or wants_stop) and live:
                    interrupted = True
                    stopped_by = "signal" if stop.requested else "callback"
                    if wants_stop and not stop.requested:
                        view.message("a callback asked the run to stop: writing a checkpoint")
                    break
    except (NonFiniteUpdateError, ResourceError):
        poisoned = True
        raise
    except StageError:
        poisoned = phase.updating  # networks half-updated: the newest checkpoint stays the newest
        raise
    except KeyboardInterrupt as exc:
        interrupted, stopped_by = True, "signal"
        if str(exc):  # why the wait was given up (a worker that hung while a stop was asked for)
            view.message(f"interrupted: {exc}")
        if single:
            trainer = trainers[0]
            if trainer.counters.iteration > saved[0]:
                view.message("interrupted: writing a checkpoint before stopping")
            elif saved[0]:
                view.message(f"interrupted: the checkpoint of iteration {saved[0]} stays the newest")
            else:
                view.message("interrupted before the first iteration ended: no checkpoint")
    finally:
        # Not again when the newest checkpoint is of this iteration: a Ctrl-C inside the
        # next iteration would overwrite its exact state with a half-done one.  Not at all
        # after a non-finite update (it would save the poisoned networks) or a failed write.
        stop.shutting_down()
        try:
            with stop:
                for s, trainer in enumerate(trainers):
                    if s not in failed and trainer.counters.iteration > saved[s] and not poisoned:
                        trainer.save()
        finally:
            view.close()
            for s, trainer in enumerate(trainers):
                if s not in failed:
                    trainer.close_sinks()
    return [TrainResult(t.counters, t.last_eval, interrupted and s not in failed and not t.finished,
                        t.run_dir, stop.signum, "failed" if s in failed else stopped_by, rows[s], failed.get(s, ""))
            for s, t in enumerate(trainers)]


def _stop_member(trainer: Trainer, s: int, why: str, live: list[int], failed: dict[int, str],
                 say: Callable[[int, str], Any] | None) -> None:
    """A population member whose update failed the non-finite check: stopped alone, unsaved, named."""
    if say is not None:
        say(s, why)
    failed[s] = why
    live.remove(s)
    trainer.close_sinks()


def _show(view: ProgressView, members: list[Trainer], rows: list[Row], everyone: Sequence[Trainer]) -> None:
    """The progress view's line: the run's row, or a population's first member's with the
    population's rates and env steps summed."""
    lead, shown = members[0], rows[0]
    if len(everyone) > 1:
        shown = {**rows[0], "steps_per_s": sum(float(r["steps_per_s"] or 0) for r in rows),
                 "env_steps": sum(t.counters.env_steps for t in everyone)}
    view.update(shown, lead.last_eval.mean_return if lead.last_eval else None, lead.stage_times.shares())
