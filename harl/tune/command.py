"""``harl tune`` and ``harl.tune(...)``: a study from start (or ``--resume``) to its report."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console

from harl.errors import HarlError
from harl.sweep.grid import parse_seeds
from harl.tune.driver import Tuner, check_pruning, stop_status
from harl.tune.report import best_pipeline, plots, rows, trials_table, write_trials
from harl.tune.space import check_fit, read_space
from harl.tune.study import (
    Request,
    base_text,
    check_resume,
    import_optuna,
    new_dir,
    open_study,
    read_record,
    update_record,
    write_record,
)


@attrs.define
class TuneResult:
    """What a ``harl.tune(...)`` call did: its tune directory, the trials, the best one and its pipeline."""

    tune_dir: Path
    trials: list[dict[str, Any]]
    """A row per trial: trial, state, value, evaluations, each searched key, seconds, dir, message."""
    best_value: float | None = None
    best_params: dict[str, Any] = attrs.Factory(dict)
    best_pipeline: Path | None = None
    final: dict[str, tuple[float, float]] = attrs.Factory(dict)
    """``best`` and ``start``: (mean, std) over the fresh seeds of their final evaluation returns."""
    stopped: bool = False
    exit_status: int = 0
    files: list[Path] = attrs.Factory(list)
    space: Any = None
    """The study's ``Space``."""
    best_trial: int | None = None

    def table(self) -> Any:
        """The trials as a rich Table, best first (what ``harl tune`` prints at its end)."""
        return trials_table(self.trials, self.space, f"{self.tune_dir}: {len(self.trials)} trials "
                                   "(* best)", self.best_trial)


def _seeds(text: str | Sequence[int] | None, default: list[int]) -> list[int]:
    if text is None:
        return default
    return parse_seeds(text) if isinstance(text, str) else list(text)


def header(tune_dir: Path, so_far: int, trials: int | None, seeds: Sequence[int], where: str) -> list[str]:
    """The study's first lines: its directory alone (a path to copy), then what it runs in a line that
    fits 80 columns (one line of both broke mid-word in an 80-column terminal)."""
    up_to = f"up to {trials}" if trials else "until the --timeout"
    return [f"tune directory: {tune_dir}",
            f"  {so_far} trial(s) so far, {up_to}; seeds {','.join(map(str, seeds))}; {where}"]


def tune(pipeline: str | Path | None = None, space: str | Path | None = None, trials: int | None = None, *,
         timeout: float | None = None, seeds: str | Sequence[int] | None = None, jobs: int | None = None,
         ray: str | None = None, storage: str | Path | None = None, vectorize: bool = False,
         overrides: Sequence[str] = (), run_dir: str | Path | None = None, resume: str | Path | None = None,
         final_seeds: str | Sequence[int] | None = None, quiet: bool = True,
         say: Callable[[str], Any] | None = None) -> TuneResult:
    """Search ``space`` over ``pipeline`` (see docs/tune.md); ``resume``: continue the study in that directory
    (``jobs`` None: the study's own, recorded in tune.json; 1 for a new study)."""
    import_optuna()  # the extra before anything else
    say = say or (lambda text: None)
    if jobs is not None and (jobs < 0 or (jobs == 0 and not ray)):
        raise HarlError(f"--jobs: expected a positive integer, got {jobs}")
    if trials is not None and trials < 1:
        raise HarlError(f"--trials: expected a positive integer, got {trials}")
    if timeout is not None and timeout <= 0:
        raise HarlError(f"--timeout: expected a positive number of seconds, got {timeout:g}")
    if vectorize and ray:
        raise HarlError("--vectorize trains a trial's seeds as one population in a local process; --ray does "
                        "not go with it (drop one of the two)")
    asked = None
    if pipeline is not None:
        pipeline = str(Path(pipeline).resolve())
        search = _seeds(seeds, [1, 2, 3])
        fresh = _seeds(final_seeds, [max(search) + 100 + k for k in range(len(search))])
        if set(fresh) & set(search):
            raise HarlError(f"--final-seeds {','.join(map(str, fresh))}: seed {sorted(set(fresh) & set(search))[0]} "
                            "is also a search seed; the re-evaluation needs seeds the search never saw")
        if any(o.partition("=")[0].strip() == "run.seed" for o in overrides):
            raise HarlError("--seeds sets run.seed for each run of a trial; drop --set run.seed=...")
        asked = Request(pipeline, list(overrides), search, trials, fresh, vectorize,
                        base_text(pipeline, overrides), jobs if jobs is not None else 0 if ray else 1)
    from harl.rundir.lock import take

    with contextlib.ExitStack() as held:
        if resume is not None:
            if run_dir is not None or storage is not None:
                raise HarlError("--resume DIR continues a study in its own directory: drop --run-dir/--storage")
            tune_dir = Path(resume).resolve()
            if not (tune_dir / "tune.json").is_file():
                raise HarlError(f"--resume {tune_dir}: not a tune directory (no tune.json); harl tune --resume "
                                "takes the directory a study was started in")
            held.enter_context(take(tune_dir, "study"))  # two drivers of one study: the second stops here
            request, the_space = read_record(tune_dir)
            check_resume(tune_dir, request, asked, Path(space) if space is not None else None, the_space)
            if trials is not None:
                request = attrs.evolve(request, trials=trials)
            if final_seeds is not None:
                request = attrs.evolve(request, final_seeds=_seeds(final_seeds, []))
            if jobs is None:  # the study's own, unless it ran on Ray and this resume does not
                jobs = request.jobs if request.jobs > 0 or ray else 1
            request = attrs.evolve(request, jobs=jobs)
            update_record(tune_dir, request)  # a later resume continues with these
            vectorize = vectorize or request.vectorize
            if vectorize and ray:
                raise HarlError(f"--resume {tune_dir}: this study trains a trial's seeds as one population "
                                "(--vectorize, its tune.json), which runs in a local process; drop --ray")
            study = open_study(tune_dir, the_space, create=False)
        else:
            if asked is None or space is None:
                raise HarlError("harl tune needs a pipeline file and --space SPACE.toml (e.g. harl tune "
                                "pipelines/happo_mpe_torch_spread.toml --space space.toml --trials 20), or "
                                "--resume DIR")
            if trials is None and timeout is None:
                raise HarlError("harl tune needs --trials N or --timeout SECONDS (or both): when to stop searching")
            request = asked
            jobs = request.jobs
            the_space = read_space(space, request.pipeline, request.overrides)
            from harl.config.loading import load_spec_and_notes

            if vectorize:
                _check_population(request)
            check_pruning(the_space, load_spec_and_notes(request.pipeline, request.overrides)[0], request.pipeline)
            check_fit(the_space, request.pipeline, request.overrides, len(request.seeds) if vectorize else 1)
            tune_dir = new_dir(request.pipeline, request.overrides, Path(run_dir) if run_dir else None,
                               Path(storage) if storage else None)
            tune_dir.mkdir(parents=True, exist_ok=True)
            held.enter_context(take(tune_dir, "study"))
            write_record(tune_dir, request, the_space)
            study = open_study(tune_dir, the_space, create=True)
        where = ("as one population per trial" if vectorize else f"on Ray ({ray})" if ray else
                 f"{jobs} run(s) at a time")
        for line in header(tune_dir, len(study.trials), request.trials, request.seeds, where):
            say(line)
        if the_space.pruner != "none" and not vectorize and not ray and jobs < len(request.seeds):
            say(f"note: --jobs {jobs} is fewer than the {len(request.seeds)} seeds of a trial, so its seeds run one "
                f"after the other and pruning, which compares the mean over seeds, can stop only the last "
                f"ones; --jobs {len(request.seeds)} runs them side by side")
        tuner = Tuner(tune_dir, study, the_space, request.pipeline, request.overrides, request.seeds, say, vectorize)
        for line in tuner.reopen():
            say(line)
        finished = tuner.run(jobs if not ray else (jobs if jobs > 1 else 0), ray, request.trials, timeout)
        result = _report(study, the_space, request, tune_dir, say)
        if not finished:
            result.stopped, result.exit_status = True, stop_status(tuner)
            say(f"stopped; continue with: harl tune --resume {tune_dir}")
            return result
        if result.best_pipeline is not None and request.final_seeds:
            _final(result, request, tune_dir, jobs, ray, vectorize, quiet, say)
        return result


def _check_population(request: Request) -> None:
    """The seeds can train as one population (pruning stops it too: harl.tune.worker)."""
    from harl.config.loading import load_spec_and_notes
    from harl.population.check import check_population

    check_population([load_spec_and_notes(request.pipeline, [*request.overrides, f"run.seed={s}"])[0]
                      for s in request.seeds], request.pipeline)


def _report(study: Any, space: Any, request: Request, tune_dir: Path, say: Callable[[str], Any]) -> TuneResult:
    table = rows(study, space, tune_dir)
    write_trials(tune_dir / "trials.csv", table, space)
    result = TuneResult(tune_dir, table, files=[tune_dir / "trials.csv"], space=space)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    if not complete:
        say("no trial completed yet: no best pipeline")
        return result
    path, best = best_pipeline(study, space, request.pipeline, request.overrides, tune_dir)
    result.best_value, result.best_params, result.best_pipeline = best.value, space.values_of(best.params), path
    result.best_trial = best.number
    result.files.append(path)
    drawn, notes = plots(study, tune_dir)
    result.files += drawn
    for note in notes:
        say(f"note: {note}")
    return result


def _final(result: TuneResult, request: Request, tune_dir: Path, jobs: int, ray: str | None, vectorize: bool,
           quiet: bool, say: Callable[[str], Any]) -> None:
    """The best pipeline and the starting one, each on the fresh seeds; compared as harl compare does."""
    from harl.sweep.plan import Request as SweepRequest
    from harl.sweep.plan import Sweep
    from harl.sweep.report import final_numbers

    seeds = ",".join(map(str, request.final_seeds))
    say(f"re-evaluating the best trial's pipeline and the starting one on fresh seeds {seeds}")
    console = Console(quiet=quiet, soft_wrap=True)
    dirs = {}
    for label, pipeline, overrides in (("best", str(result.best_pipeline), []),
                                       ("start", request.pipeline, request.overrides)):
        where = tune_dir / "final" / label
        if where.is_dir() and (where / "sweep.json").is_file():
            sweep = Sweep.resume(where, None)
        else:
            sweep = Sweep.new(SweepRequest.parse(pipeline, overrides, seeds, []), where, None, vectorize=vectorize)
        sweep.run(max(1, jobs), ray, 2, True, console, vectorize=vectorize)
        dirs[label] = where
        returns = [r for _, r, _ in (final_numbers(s.run_dir) for s in sweep.states) if r is not None]
        if returns:
            import numpy as np

            result.final[label] = (float(np.mean(returns)), float(np.std(returns)))
            say(f"  {label}: final evaluation return {np.mean(returns):.3f} ± {np.std(returns):.3f} over seeds {seeds}")
    from harl.plot import plot

    with contextlib.suppress(HarlError):
        out, _ = plot([dirs["best"], dirs["start"]], None, tune_dir / "final" / "curves.png", 1)
        result.files.append(out)
    try:
        from harl.compare import compare

        comparison = compare([dirs["best"], dirs["start"]], tune_dir / "final" / "compare",
                             labels={str(dirs["best"]): "tuned", str(dirs["start"]): "start"})
        result.files += list(comparison.files)
        say(f"  harl compare: {tune_dir / 'final' / 'compare'} (results.md)")
    except HarlError as exc:
        say(f"note: no harl compare of the fresh seeds: {exc}")
