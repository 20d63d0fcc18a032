"""The one training loop (docs/architecture.md, "The one loop"): ``drive``, and the records it hands back.

A run is one member, a ``--vectorize`` population is S members whose work is batched; either way
``drive`` runs the iterations.  What an iteration *does* (collect, returns, update) is the caller's
``iterate``; what the loop does with each member's result, in order, is one method of ``_Drive`` each::

    works = iterate(phase, live)      # the caller's: one Work per live member
    _Drive.checked(works)             # the non-finite check (a population member stops alone)
    _Drive.finish(...)                # evaluation where due, one RNG snapshot, counters and the row
    _Drive.show / notify / save_due   # the progress view, the callbacks, the checkpoint schedule
    _Drive.asked_to_stop              # a signal or a callback: stop after this iteration
    _Drive.close                      # exit saves, the view and the sinks closed

Its members are ``harl.trainer.Trainer``s, seen through ``Member`` (what the loop calls), so that this
module does not import the Trainer, which calls ``drive``; ``harl.trainer`` re-exports every name here.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
import numpy as np
import torch

from harl.config.spec import PipelineSpec
from harl.errors import ResourceError, StageError
from harl.evaluator import EvalStats
from harl.finite import NonFiniteUpdateError
from harl.logging.progress import ProgressView, StageTimes
from harl.protocols import Collected, UpdateResult
from harl.rundir.signals import GracefulStop, release_stops

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


RngState = dict[str, Any]
"""The global generators' states (``rng_state``): python, numpy, torch, and CUDA's where a GPU drew."""


def rng_state() -> RngState:
    """Every global generator a run draws from; CUDA's too once a GPU run has used it
    (policy sampling on a GPU draws from CUDA's generator, not the CPU's)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: RngState) -> None:
    """Restore what ``rng_state`` took (a resumed run)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


@attrs.define
class Work:
    """One member's iteration before it is counted: what was collected, the update's stats, and the
    seconds collection (with returns) and the update took."""

    rollout: Collected
    update: UpdateResult
    collect_s: float
    update_s: float


@attrs.define
class Phase:
    """Where the loop is inside an iteration: ``updating`` from the update's start to its check (a
    failure there leaves half-updated networks, which no exit checkpoint may save)."""

    updating: bool = False


Iterate = Callable[[Phase, list[int]], dict[int, Work]]
"""``iterate(phase, live)``: the work of one iteration of each live member, by member index."""


class Member(Protocol):
    """What the loop calls on each member (``harl.trainer.Trainer``'s public step functions)."""

    counters: Counters
    total_iterations: int
    last_eval: EvalStats | None
    run_dir: Path
    stage_times: StageTimes
    spec: PipelineSpec

    @property
    def finished(self) -> bool: ...

    def check(self, update: UpdateResult) -> None: ...

    def evaluate_if_due(self, last: int) -> tuple[EvalStats | None, Exception | None]: ...

    def record(self, work: Work, evaluation: EvalStats | None, seconds: float, rng: RngState) -> Row: ...

    def notify(self, row: Row, evaluation: EvalStats | None) -> bool: ...

    def save(self) -> Path: ...

    def close_sinks(self) -> None: ...


Say = Callable[[int, str], Any]
"""``say(member, why)``: how a population names a member that stopped alone."""


def drive(trainers: Sequence[Member], iterate: Iterate, view: ProgressView, last: int,
          say: Say | None = None) -> list[TrainResult]:
    """The one training loop: ``iterate`` does the work of an iteration (one run's stages, or a
    population's batched ones); the loop does the rest, per member, in this order: the non-finite
    check, the evaluation where due, one RNG snapshot, counters and the row (sinks), the progress
    view, the callbacks, the checkpoint schedule; then signals and callbacks may stop the run, and
    on the way out every member whose newest iteration is unsaved is saved (docs/architecture.md,
    "The one loop").

    One member (a run): any failure is raised and stops the run.  Several (a population): a member
    whose update is not finite stops alone, named through ``say``; the others go on.
    """
    run = _Drive(trainers, view, last, say)
    try:
        with run.stop:
            while run.live and trainers[run.live[0]].counters.iteration < last:
                if run.iteration(iterate):
                    break
    except (NonFiniteUpdateError, ResourceError):
        run.poisoned = True
        raise
    except StageError:
        run.poisoned = run.phase.updating  # networks half-updated: the newest checkpoint stays the newest
        raise
    except KeyboardInterrupt as exc:
        run.interrupted_by(exc)
    finally:
        run.close()
    return run.results()


Done = tuple[int, Work, EvalStats | None, Exception | None]
"""(member, its work, its evaluation where due, the evaluation's failure) of a checked iteration."""


@attrs.define
class _Drive:
    """One ``drive`` call's state: who is live, who was saved when, who failed, the rows so far."""

    trainers: Sequence[Member]
    view: ProgressView
    last: int
    say: Say | None
    single: bool = attrs.field(init=False)
    live: list[int] = attrs.field(init=False)
    saved: dict[int, int] = attrs.field(init=False)
    """member -> the iteration of its newest checkpoint."""
    failed: dict[int, str] = attrs.field(factory=dict, init=False)
    rows: dict[int, list[Row]] = attrs.field(init=False)
    stop: GracefulStop = attrs.field(init=False)
    phase: Phase = attrs.field(factory=Phase, init=False)
    interrupted: bool = attrs.field(default=False, init=False)
    stopped_by: str = attrs.field(init=False)
    poisoned: bool = attrs.field(default=False, init=False)
    """A non-finite update, a failed write or a failed update: no exit-save."""

    def __attrs_post_init__(self) -> None:
        trainers = self.trainers
        self.single = len(trainers) == 1
        self.live = [s for s, t in enumerate(trainers) if not t.finished]
        self.saved = {s: t.counters.iteration for s, t in enumerate(trainers)}
        self.rows = {s: [] for s in range(len(trainers))}
        self.stop = GracefulStop(self.view.message)
        self.stopped_by = "max_iterations" if self.last < trainers[0].total_iterations else "budget"

    def iteration(self, iterate: Iterate) -> bool:
        """One iteration of every live member; whether the run stops after it."""
        start = time.perf_counter()
        self.phase.updating = False
        done = self.checked(iterate(self.phase, self.live))
        self.phase.updating = False
        recorded = self.finish(done, start)
        release_stops()  # the iteration is whole: a second Ctrl-C held meanwhile stops here
        if recorded:
            self.show(recorded)
        wants_stop = self.notify(recorded)
        self.save_due(recorded)
        self.live[:] = [s for s in self.live
                        if not self.trainers[s].finished and self.trainers[s].counters.iteration < self.last]
        return self.asked_to_stop(wants_stop)

    def checked(self, works: dict[int, Work]) -> list[Done]:
        """The members whose update passed the non-finite check; one that failed it raises (a run) or
        stops alone (a population member)."""
        done: list[Done] = []
        for s, work in works.items():
            try:
                self.trainers[s].check(work.update)
            except NonFiniteUpdateError as exc:
                if self.single:
                    raise
                self.stop_member(s, str(exc))
                continue
            done.append((s, work, None, None))
        return done

    def finish(self, done: list[Done], start: float) -> list[tuple[int, Row, EvalStats | None]]:
        """Evaluate where due, take one RNG snapshot (what a save of this iteration holds), count and
        write each member's row; then raise an evaluation's failure (its row is written first)."""
        done = [(s, work, *self.trainers[s].evaluate_if_due(self.last)) for s, work, _, _ in done]
        snapshot = rng_state()
        seconds = time.perf_counter() - start
        recorded = [(s, self.trainers[s].record(work, evaluation, seconds, snapshot), evaluation)
                    for s, work, evaluation, _ in done]
        for s, row, _ in recorded:
            self.rows[s].append(row)
        for _, _, _, failure in done:
            if failure is not None:
                raise failure
        return recorded

    def show(self, recorded: list[tuple[int, Row, EvalStats | None]]) -> None:
        """The progress view's line: the run's row, or a population's first member's with the
        population's rates and env steps summed."""
        lead, shown = self.trainers[recorded[0][0]], recorded[0][1]
        if len(self.trainers) > 1:
            shown = {**shown, "steps_per_s": sum(float(row["steps_per_s"] or 0) for _, row, _ in recorded),
                     "env_steps": sum(t.counters.env_steps for t in self.trainers)}
        self.view.update(shown, lead.last_eval.mean_return if lead.last_eval else None, lead.stage_times.shares())

    def notify(self, recorded: list[tuple[int, Row, EvalStats | None]]) -> bool:
        """Every recorded member's callbacks (each one called); whether one asks the run to stop."""
        wants_stop = False
        for s, row, evaluation in recorded:
            wants_stop = self.trainers[s].notify(row, evaluation) or wants_stop
        return wants_stop

    def save_due(self, recorded: list[tuple[int, Row, EvalStats | None]]) -> None:
        """The checkpoint schedule: every ``checkpoint.every_iterations``, and a population member's last."""
        for s, _, _ in recorded:
            trainer = self.trainers[s]
            iteration = trainer.counters.iteration
            if iteration % trainer.spec.checkpoint.every_iterations == 0 or (
                    not self.single and iteration == self.last):
                trainer.save()
                self.saved[s] = iteration

    def asked_to_stop(self, wants_stop: bool) -> bool:
        """A signal or a callback asked for a stop, and someone is still live: stop, saving on the way out."""
        if not ((self.stop.requested or wants_stop) and self.live):
            return False
        self.interrupted = True
        self.stopped_by = "signal" if self.stop.requested else "callback"
        if wants_stop and not self.stop.requested:
            self.view.message("a callback asked the run to stop: writing a checkpoint")
        return True

    def stop_member(self, s: int, why: str) -> None:
        """A population member whose update failed the non-finite check: stopped alone, unsaved, named."""
        if self.say is not None:
            self.say(s, why)
        self.failed[s] = why
        self.live.remove(s)
        self.trainers[s].close_sinks()

    def interrupted_by(self, exc: KeyboardInterrupt) -> None:
        """A Ctrl-C (or a signal) that ended the wait inside an iteration: say what the exit save does."""
        self.interrupted, self.stopped_by = True, "signal"
        if str(exc):  # why the wait was given up (a worker that hung while a stop was asked for)
            self.view.message(f"interrupted: {exc}")
        if self.single:
            trainer, saved = self.trainers[0], self.saved[0]
            if trainer.counters.iteration > saved:
                self.view.message("interrupted: writing a checkpoint before stopping")
            elif saved:
                self.view.message(f"interrupted: the checkpoint of iteration {saved} stays the newest")
            else:
                self.view.message("interrupted before the first iteration ended: no checkpoint")

    def close(self) -> None:
        """Save every member whose newest iteration is unsaved, then close the view and the sinks.

        Not again when the newest checkpoint is of this iteration: a Ctrl-C inside the next iteration
        would overwrite its exact state with a half-done one.  Not at all after a non-finite update
        (it would save the poisoned networks) or a failed write."""
        self.stop.shutting_down()
        try:
            with self.stop:
                for s, trainer in enumerate(self.trainers):
                    if s not in self.failed and trainer.counters.iteration > self.saved[s] and not self.poisoned:
                        trainer.save()
        finally:
            self.view.close()
            for s, trainer in enumerate(self.trainers):
                if s not in self.failed:
                    trainer.close_sinks()

    def results(self) -> list[TrainResult]:
        return [TrainResult(t.counters, t.last_eval, self.interrupted and s not in self.failed and not t.finished,
                            t.run_dir, self.stop.signum, "failed" if s in self.failed else self.stopped_by,
                            self.rows[s], self.failed.get(s, ""))
                for s, t in enumerate(self.trainers)]
