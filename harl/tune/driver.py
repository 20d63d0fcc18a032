"""The driving process of ``harl tune``: asks Optuna for trials, runs their seeds, reports the
evaluations, prunes, tells the study each trial's value; alone it writes ``study.db``.

A trial is one set of values: one run directory per seed under ``trial-NNNN/``.  Its runs
start as slots free up (``--jobs`` at once; a trial's seeds first, so with ``--jobs`` at least
the seeds they run side by side), a new trial is asked for only when no run waits.  Ctrl-C or
SIGTERM: no new run starts, the running ones stop after their iteration with a checkpoint, and
their trials stay open in the study; ``harl tune --resume DIR`` resumes them.  A run directory
another process still holds (a worker of a driver killed with SIGKILL, stopping since: see
``harl.tune.worker``) is waited for, then resumed from its checkpoint, never failed for its lock.
"""

from __future__ import annotations

import contextlib
import math
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from harl.config.dump import dump_pipeline
from harl.config.loading import load_spec_and_notes
from harl.errors import ConfigError, HarlError
from harl.rundir.lock import LOCK_FILE
from harl.rundir.signals import exit_status
from harl.sweep.grid import Trial as SweepTrial
from harl.sweep.trial import checkpoint_iteration
from harl.tune.objective import intermediate, score
from harl.tune.pruning import PRUNED
from harl.tune.runners import Local, OnRay, Unit, outcome
from harl.tune.space import Space, overrides_of


@attrs.define(eq=False)
class Active:
    """A trial the study holds open: its runs and what was reported of them."""

    trial: Any
    values: dict[str, Any]
    run_dirs: list[Path]
    pending: list[Unit]
    ended: dict[Path, str] = attrs.Factory(dict)
    reported: int = 0
    pruned: bool = False
    message: str = ""
    evaluations: int = 0
    """Evaluations each run makes; pruning at the last would stop nothing."""

    @property
    def number(self) -> int:
        return int(self.trial.number)

    @property
    def label(self) -> str:
        return f"trial {self.number}"


def trial_dir(tune_dir: Path, number: int) -> Path:
    return tune_dir / f"trial-{number:04d}"


def iterations_of(spec: Any) -> int:
    collector = spec.collector
    per = getattr(collector, "rollout_length", 1) * collector.n_envs
    return math.ceil(spec.run.total_env_steps / per)


def evaluations_per_run(spec: Any) -> int:
    """Evaluations a run makes in all (the Trainer's: its first iteration, every k-th, its last)."""
    last, every = iterations_of(spec), spec.evaluator.every_iterations
    return len({1, last} | (set(range(every, last + 1, every)) if every > 0 else set()))


def check_pruning(space: Space, spec: Any, source: str) -> None:
    """A pruner needs evaluations before a run's end: more than its warm-up."""
    if space.pruner == "none":
        return
    before = evaluations_per_run(spec) - 1  # the last one comes when the run is over
    if before > space.warmup:
        return
    every, iterations = spec.evaluator.every_iterations, iterations_of(spec)
    fit = max(1, (iterations - 1) // (space.warmup + 4))
    raise ConfigError(f"{space.path}: pruner.kind = \"{space.pruner}\": {source} evaluates {before} time(s) before "
                      f"its last iteration (evaluator.every_iterations = {every}, {iterations} iterations), so no "
                      f"trial could be pruned after the warm-up of {space.warmup} evaluation(s); "
                      + (f"evaluate more often (--set evaluator.every_iterations={fit}), " if fit < every or every == 0
                         else "train longer (run.total_env_steps), ")
                      + "lower warmup under [pruner], or write kind = \"none\" there")


class Tuner:
    """Runs the study in ``tune_dir`` until it has ``trials`` trials, ``timeout`` passed, or a stop signal."""

    def __init__(self, tune_dir: Path, study: Any, space: Space, pipeline: str, overrides: list[str],
                 seeds: list[int], say: Callable[[str], Any], vectorize: bool = False) -> None:
        self.tune_dir, self.study, self.space = tune_dir, study, space
        self.pipeline, self.overrides, self.seeds = pipeline, overrides, seeds
        self.say, self.vectorize = say, vectorize
        self.active: list[Active] = []
        self.waited: set[Unit] = set()
        """Units whose run lock another process held (said once)."""
        self.stops = 0
        self.signum = 0
        self.name = load_spec_and_notes(pipeline, overrides)[0].run.name

    # trials ---------------------------------------------------------------------------------

    def _units(self, run_dirs: list[Path]) -> list[Unit]:
        return [tuple(run_dirs)] if self.vectorize else [(d,) for d in run_dirs]

    def _run_dirs(self, number: int) -> list[Path]:
        return [trial_dir(self.tune_dir, number) / SweepTrial(s, ()).dir_name(self.name) for s in self.seeds]

    def ask(self) -> Active | None:
        """A new trial, its run directories written (None: its values do not make a pipeline; told failed)."""
        trial = self.study.ask()
        values = self.space.suggest(trial)
        run_dirs = self._run_dirs(trial.number)
        try:
            specs = [load_spec_and_notes(self.pipeline, [*self.overrides, *overrides_of(values), f"run.seed={seed}"])[0]
                     for seed in self.seeds]
            texts = [dump_pipeline(spec) for spec in specs]
        except ConfigError as exc:
            message = " ".join(str(exc).split())
            trial.set_user_attr("message", message)
            self.study.tell(trial, state=_state("FAIL"))
            self.say(f"trial {trial.number}: failed: {message}")
            return None
        for run_dir, text in zip(run_dirs, texts):
            run_dir.mkdir(parents=True)
            (run_dir / "pipeline.toml").write_text(text, encoding="utf-8")
        shown = ", ".join(f"{k.rpartition('.')[2]}={_short(v)}" for k, v in values.items())
        self.say(f"trial {trial.number}: {shown}")
        return Active(trial, values, run_dirs, self._units(run_dirs), evaluations=evaluations_per_run(specs[0]))

    def reopen(self) -> list[str]:
        """The study's open trials (stopped or left by a driver that died): resumed or re-run; what was done."""
        optuna = _optuna()
        said = []
        for frozen in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            trial = optuna.trial.Trial(self.study, frozen._trial_id)
            run_dirs = self._run_dirs(frozen.number)
            active = Active(trial, self.space.values_of(frozen.params), run_dirs, [],
                            reported=len(frozen.intermediate_values))
            with contextlib.suppress(HarlError, OSError):
                active.evaluations = evaluations_per_run(load_spec_and_notes(run_dirs[0] / "pipeline.toml")[0])
            if (trial_dir(self.tune_dir, frozen.number) / PRUNED).exists():
                active.pruned = True
                self._tell(active)
                said.append(f"trial {frozen.number}: was pruned when the study stopped; told the study so")
                continue
            parts, todo = [], []
            for run_dir in run_dirs:
                status, _ = outcome(run_dir)
                if status == "finished":
                    active.ended[run_dir] = status
                    continue
                todo.append(run_dir)
                holder = _holder(run_dir)
                if holder:
                    parts.append(f"seed {_seed(run_dir)} is still written by {holder} (a worker of the driver that "
                                 "stopped); it resumes once that one ends")
                    continue
                at = checkpoint_iteration(run_dir)
                parts.append(f"seed {_seed(run_dir)} {'resumes at iteration ' + str(at) if at else 're-runs from the start (no checkpoint)'}")
            active.pending = self._units(todo)
            self.active.append(active)
            said.append(f"trial {frozen.number}: " + ("; ".join(parts) if parts else "every seed had finished"))
        return said

    # the loop --------------------------------------------------------------------------------

    def run(self, jobs: int, address: str | None, trials: int | None, timeout: float | None,
            poll_s: float = 0.5) -> bool:
        """Run until the study has ``trials`` trials (or ``timeout`` seconds passed); False when stopped."""
        start = time.monotonic()
        specs = [load_spec_and_notes(self.pipeline, self.overrides)[0]]
        runner: Local | OnRay = OnRay(address, self.tune_dir, specs) if address else Local(self.vectorize)
        if address and jobs < 1:
            jobs = runner.slots  # type: ignore[union-attr]

        def more() -> bool:
            if self.stops or (timeout is not None and time.monotonic() - start >= timeout):
                return False
            return trials is None or len(self.study.get_trials(deepcopy=False)) < trials

        try:
            with _stop_signals(self, runner):
                while True:
                    while not self.stops and len(runner) < jobs:
                        unit = self._next_unit()
                        if unit is None:
                            if any(a.pending and not a.pruned for a in self.active) or not more():
                                break  # a run waits (for another process's lock), or the study is done
                            active = self.ask()
                            if active is not None:
                                self.active.append(active)
                            continue
                        runner.start(unit)
                    for unit, code in runner.ended():
                        for run_dir in unit:
                            status, message = outcome(run_dir, code, stopping=bool(self.stops))
                            owner = next(a for a in self.active if run_dir in a.run_dirs)
                            owner.ended[run_dir] = status
                            if status == "failed":
                                owner.message = owner.message or message
                    self._report()
                    for active in list(self.active):
                        if self._done(active, runner):
                            self._tell(active)
                            self.active.remove(active)
                    if not len(runner) and (self.stops or not any(a.pending for a in self.active)) and \
                            (self.stops or not more()):
                        break
                    time.sleep(poll_s)
        except BaseException:
            runner.close()
            raise
        if isinstance(runner, OnRay):
            runner.close()
        return not self.stops

    def _next_unit(self) -> Unit | None:
        """The first unit waiting to run whose run directories no other process holds (a worker of an
        earlier driver that was killed: it stops and its lock frees; the unit resumes after it), and
        of which some run is not finished yet (one that was held may have finished meanwhile)."""
        for active in self.active:
            if active.pruned:
                continue
            for unit in list(active.pending):
                holders = [h for h in map(_holder, unit) if h]
                if holders:
                    if unit not in self.waited:
                        self.waited.add(unit)
                        self.say(f"{active.label}: {unit[0]} is still written by {holders[0]} (a worker of an "
                                 "earlier driver); waiting for it to end, then resuming from its checkpoint")
                    continue
                active.pending.remove(unit)
                left = tuple(d for d in unit if outcome(d)[0] != "finished")
                for run_dir in set(unit) - set(left):
                    active.ended[run_dir] = "finished"
                if left:
                    return left if not self.vectorize else unit
        return None

    def _report(self) -> None:
        for active in self.active:
            if active.pruned:
                continue
            ended = [d in active.ended for d in active.run_dirs]  # a seed not started yet is waited for
            for k, value in intermediate(active.run_dirs, active.reported, ended):
                active.trial.report(value, k)
                active.reported = k
                if self.space.pruner != "none" and k < active.evaluations and active.trial.should_prune():
                    active.pruned = True
                    (trial_dir(self.tune_dir, active.number) / PRUNED).write_text(
                        f"pruned at evaluation {k}: mean return {value:.4g}\n", encoding="utf-8")
                    active.pending.clear()
                    self.say(f"{active.label}: pruned at evaluation {k} (mean return {value:.2f} over its seeds)")
                    break

    def _done(self, active: Active, runner: Local | OnRay) -> bool:
        running = {d for unit in runner.running.values() for d in unit}
        if any(d in running for d in active.run_dirs):
            return False
        if active.pruned:
            return True
        if any(s == "stopped" for s in active.ended.values()) or active.pending:
            return False
        return all(d in active.ended for d in active.run_dirs)

    def _tell(self, active: Active) -> None:
        trial = active.trial
        if active.pruned:
            self.study.tell(trial, state=_state("PRUNED"))
            return
        if active.message:
            trial.set_user_attr("message", active.message)
            self.study.tell(trial, state=_state("FAIL"))
            self.say(f"{active.label}: failed: {active.message}")
            return
        value = score(active.run_dirs, self.space.statistic, self.space.last)
        if value is None:
            self.study.tell(trial, state=_state("FAIL"))
            self.say(f"{active.label}: failed: no evaluation in its runs' metrics.csv")
            return
        self.study.tell(trial, value)
        best = self.study.best_trial
        self.say(f"{active.label}: {value:.3f}" + (" (best so far)" if best.number == active.number else
                                                  f" (best: trial {best.number}, {best.value:.3f})"))


def _holder(run_dir: Path) -> str:
    """Who holds ``run_dir``'s run lock ("PID N on HOST", ``harl.rundir.lock``), '' when no live process
    does; a look that writes nothing (no lock file: no holder)."""
    import fcntl

    try:
        with (run_dir / LOCK_FILE).open("r", encoding="utf-8") as file:
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return file.read().strip() or "another process"
            fcntl.flock(file, fcntl.LOCK_UN)
    except OSError:  # no lock file, or a filesystem without flock
        pass
    return ""


def _seed(run_dir: Path) -> str:
    return run_dir.name.rpartition("-s")[2]


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _optuna() -> Any:
    from harl.tune.study import import_optuna

    return import_optuna()


def _state(name: str) -> Any:
    return getattr(_optuna().trial.TrialState, name)


@contextlib.contextmanager
def _stop_signals(tuner: Tuner, runner: Local | OnRay) -> Iterator[None]:
    """SIGINT/SIGTERM: start nothing more; each passed on once to the runs (the second: stop now)."""
    def handler(signum: int, frame: Any) -> None:
        tuner.stops += 1
        tuner.signum = signum
        if tuner.stops == 1:
            tuner.say(f"{signal.Signals(signum).name}: the running trials stop after their iteration with a "
                      f"checkpoint; harl tune --resume {tuner.tune_dir} continues the study "
                      "(again to stop them now)")
        runner.stop(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def stop_status(tuner: Tuner) -> int:
    return exit_status(tuner.signum or signal.SIGINT)


__all__ = ["Active", "HarlError", "Tuner", "check_pruning", "evaluations_per_run", "stop_status", "trial_dir"]
