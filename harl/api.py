"""harl's Python API: what ``harl`` exports and what the CLI's commands are made of.

Every function raises harl's own exceptions (``harl.HarlError`` and its kinds) with the
one-paragraph messages the CLI prints; a notebook sees the same words as a terminal.
See docs/python-api.md.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harl.config.spec import PipelineSpec
from harl.errors import HarlError

Pipeline = str | Path | Mapping[str, Any] | PipelineSpec
"""A pipeline file, its tables as a dict (``{"run": {...}, "env": {...}}``) or a loaded spec."""

_NOTES: dict[int, tuple[weakref.ref[PipelineSpec], list[str]]] = {}


def load_pipeline(pipeline: Pipeline, overrides: Iterable[str] = ()) -> PipelineSpec:
    """Read and validate a pipeline; ``overrides`` are ``--set`` strings (``"run.seed=3"``).

    ``pipeline``: a TOML file, a dict of tables, a spec, or a HARL ``config.json`` (converted
    first, its notes kept with the spec's).

    Notes about the overrides (keys dropped with a changed kind) are kept beside the spec:
    ``pipeline_notes(spec)``.
    """
    from harl.config.loading import Loader, apply_overrides, structure_pipeline
    from harl.config.loading import load_spec_and_notes as load_file

    overrides = list(overrides)
    if isinstance(pipeline, (str, Path)) and Path(pipeline).suffix != ".json":
        spec, notes = load_file(pipeline, overrides)
    else:
        converted: list[str] = []
        if isinstance(pipeline, (str, Path)):  # a HARL config.json (results directory, tuned_configs/)
            conversion = convert_harl_config(pipeline)
            source, data, converted = str(pipeline), _plain(conversion.pipeline), list(conversion.notes)
        elif isinstance(pipeline, PipelineSpec):
            if not overrides:
                return pipeline
            source, data = "pipeline (a spec)", Loader().unstructure(pipeline)
        elif isinstance(pipeline, Mapping):
            source, data = "pipeline (a dict)", _plain(pipeline)
        else:
            raise TypeError(f"expected a pipeline file, a dict of tables or a PipelineSpec, got {type(pipeline).__name__}")
        loader = Loader()
        origins: dict[tuple[str, ...], str] = {}
        data, notes = apply_overrides(data, overrides, loader, origins)
        spec = structure_pipeline(data, source, loader, origins)
        notes = [*converted, *notes]
    key = id(spec)
    _NOTES[key] = (weakref.ref(spec, lambda _: _NOTES.pop(key, None)), notes)
    return spec


def convert_harl_config(config: str | Path | Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> Any:
    """A HARL ``config.json`` (a path, or its dict) as a harl pipeline: ``.pipeline`` (tables),
    ``.notes`` (HARL keys harl ignores), ``.spec()``, ``.to_toml()``; see docs/harl-compat.md.
    ``overrides``: HARL-style keys (``{"num_env_steps": 20000}``), as HARL's ``--key value``."""
    from harl.compat import convert

    return convert(Path(config) if isinstance(config, (str, Path)) else dict(config), dict(overrides or {}) or None)


def write_text(path: str | Path, text: str, what: str) -> Path:
    """``text`` into ``path`` (atomically), a ``ResourceError`` naming the file when it cannot be."""
    from harl.fs import atomic_write_bytes, writing

    path = Path(path)
    with writing(path, what):
        atomic_write_bytes(path, lambda f: f.write(text.encode("utf-8")))
    return path


def _plain(data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of nested mappings as dicts (overrides write into it; the caller's stays as it was)."""
    return {k: _plain(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def pipeline_notes(spec: PipelineSpec) -> list[str]:
    """What ``load_pipeline`` noted while loading this spec (empty: nothing, or not loaded by it)."""
    ref, notes = _NOTES.get(id(spec), (None, []))
    return list(notes) if ref is not None and ref() is spec else []


def _source(pipeline: Pipeline) -> str:
    return str(pipeline) if isinstance(pipeline, (str, Path)) else "pipeline"


def build(pipeline: Pipeline, overrides: Iterable[str] = (), source: str | None = None) -> Any:
    """The pipeline's stages, built (envs opened): use them in ``with`` so the envs are closed.

    ``source`` names the pipeline in messages (default: its file, else "pipeline").
    """
    from harl.compose import build_stages

    return build_stages(load_pipeline(pipeline, overrides), source or _source(pipeline))


def start(pipeline: Pipeline, overrides: Iterable[str] = (), run_dir: str | Path | None = None,
          callbacks: Iterable[Any] = (), sinks: Sequence[Any] = (), quiet: bool = True) -> Any:
    """A fresh run's Trainer (run directory locked and written, sinks open): for those who drive
    it themselves; ``with trainer: trainer.train()``.  ``quiet``: what ``trainer.train()`` does
    without its own ``quiet``; quiet by default, as ``harl.train`` (``False``: the progress display)."""
    from harl.run.lifecycle import start_run

    run_dir = Path(run_dir) if run_dir is not None else None
    trainer, _ = start_run(load_pipeline(pipeline, overrides), (), run_dir, callbacks, sinks, _source(pipeline))
    trainer.quiet = quiet
    return trainer


def start_resume(run_dir: str | Path, checkpoint: str | Path | None = None, callbacks: Iterable[Any] = (),
                 overrides: Iterable[str] = (), sinks: Sequence[Any] = (), quiet: bool = True) -> Any:
    """A resumed run's Trainer (its lock taken, checkpoint restored, sinks open); ``trainer.finished``
    says whether the budget is already spent.  ``quiet``: as ``start``'s."""
    from harl.run.lifecycle import resume_run

    trainer = resume_run(Path(run_dir), Path(checkpoint) if checkpoint is not None else None, callbacks, sinks,
                         list(overrides))
    trainer.quiet = quiet
    return trainer


def train(pipeline: Pipeline, overrides: Iterable[str] = (), run_dir: str | Path | None = None,
          callbacks: Iterable[Any] = (), quiet: bool = True, max_iterations: int | None = None,
          sinks: Sequence[Any] = ()) -> Any:
    """Train a pipeline in a new run directory; returns a ``TrainResult``.

    ``callbacks``: see ``harl.callbacks`` (one returning True stops the run with a
    checkpoint).  ``max_iterations``: stop after that many iterations (resume continues).
    ``sinks``: objects with ``write(row)`` and ``close(checkpoint)``, beside ``[logging]``'s.
    """
    with start(pipeline, overrides, run_dir, callbacks, sinks) as trainer:
        result = trainer.train(quiet=quiet, max_iterations=max_iterations)
    finish(trainer, result)
    return result


def resume(run_dir: str | Path, checkpoint: str | Path | None = None, callbacks: Iterable[Any] = (),
           quiet: bool = True, overrides: Iterable[str] = (), max_iterations: int | None = None,
           sinks: Sequence[Any] = ()) -> Any:
    """Continue a run from its newest (or the named) checkpoint; returns a ``TrainResult``.

    ``overrides`` edit the run's ``pipeline.toml`` first (as editing the file by hand would),
    e.g. ``["run.total_env_steps=2_000_000"]`` to train longer.
    """
    with start_resume(run_dir, checkpoint, callbacks, overrides, sinks) as trainer:
        result = trainer.train(quiet=quiet, max_iterations=max_iterations)
    finish(trainer, result)
    return result


def finish(trainer: Any, result: Any) -> dict[str, Any] | None:
    """What follows a run that spent its budget: ``[evaluator] absolute_factor``'s absolute
    metric (``absolute_metric.json`` in the run directory); None when there is nothing to do."""
    from harl.compare.absolute import after_run

    return after_run(trainer.run_dir, trainer.spec, result)


def tune(pipeline: str | Path | None = None, space: str | Path | None = None, trials: int | None = None,
         **options: Any) -> Any:
    """A hyper-parameter search on Optuna (``pip install "harl[tune]"``): ``space`` (a TOML file)
    over ``pipeline``, ``trials`` trials; returns a ``harl.TuneResult`` (tune_dir, trials, best_value,
    best_params, best_pipeline, final).  ``options``: timeout, seeds, jobs, ray, storage, vectorize,
    overrides, run_dir, resume (a tune directory to continue), final_seeds, quiet, say.  docs/tune.md."""
    from harl.tune.command import tune as run_tune

    return run_tune(pipeline, space, trials, **options)


def parse_seats(items: Sequence[str] | None) -> dict[str, str]:
    """``--seat SEAT=TEAM`` options as ``{seat: team}`` (crossplay, ``eval --against``); a malformed one is refused."""
    from harl.run.against import parse_seats as parse

    return parse(items)


def check_eval_team(run_dir: str | Path, team: str | None, seats: Mapping[str, str] | None = None) -> None:
    """``harl eval RUN --team NAME`` without ``--against``: NAME must be a learning team of RUN."""
    from harl.run.against import check_team

    check_team(run_dir, team, seats)


def team_returns(metrics: Mapping[str, Any]) -> str | None:
    """A teams run's evaluation headline, each team's return by name (None: a one-team run)."""
    from harl.logging import headline

    teams = headline.eval_returns(metrics)
    return f"return of {headline.show(teams, 3)}" if teams else None


def suite_report(results: str | Path = "benchmarks/results", out: str | Path = "docs/results.md",
                 check: bool = False) -> tuple[Path, bool]:
    """The results page from committed suite results (``harl suite report``): (the page, whether it
    was already up to date); ``check`` writes nothing.  docs/benchmarks.md, "Published results"."""
    from harl.suite.report import report

    return report(Path(results), Path(out), check=check)


def suite(suite_file: str | Path | None = None, out: str | Path | None = None, **options: Any) -> Any:
    """Run a benchmark suite (``benchmarks/suites/*.toml``), or ``resume=DIR`` a stopped one: a
    ``SuiteResult`` (suite_dir, entries with each one's verdict, failures, files, notes, exit_status).
    ``options``: jobs, ray, resume, max_retries, reps, quiet, console.  docs/benchmarks.md."""
    from harl.suite.command import run_suite

    return run_suite(suite_file, out, **options)


def evaluate(run_dir: str | Path, episodes: int | None = None, checkpoint: str | Path | None = None,
             deterministic: bool = True) -> Any:
    """A fresh, seeded evaluation of a run's checkpoint (its newest unless named): ``EvalStats``."""
    return evaluate_run(run_dir, episodes, checkpoint, deterministic)[1]


def evaluate_run(run_dir: str | Path, episodes: int | None = None, checkpoint: str | Path | None = None,
                 deterministic: bool = True) -> tuple[Path, Any]:
    """``evaluate``, with the checkpoint it evaluated: (path, ``EvalStats``)."""
    from harl.run.open import open_run

    if episodes is not None and episodes < 1:
        raise HarlError(f"--episodes: expected a positive integer, got {episodes}")
    with open_run(run_dir, checkpoint, deterministic=deterministic) as run:
        return run.checkpoint, run.stages.evaluator.evaluate(episodes)


def algorithms(family: str | None = None) -> list[Any]:
    """The named algorithms (``harl.algorithms``: IPPO = which stages, ...), of one family or all."""
    from harl.algorithms import algorithms as table

    return list(table(family))


def play(run_dir: str | Path, against: str, episodes: int | None = None, team: str | None = None,
         checkpoint: str | Path | None = None, deterministic: bool = True,
         seats: Mapping[str, str] | None = None) -> Any:
    """A run with ``[teams]``: its ``team`` against another run, a script or its pool (``harl.run.against.Match``:
    win, loss and draw rates and each team's return, with 95% intervals); ``seats``: {seat: the other
    run's learning team that plays it}, where the default choice does not suit."""
    from harl.run.against import play as play_match

    return play_match(run_dir, against, episodes, team, checkpoint, deterministic, seats)


def crossplay(run_dirs: Sequence[str | Path], episodes: int | None = None, team: str | None = None,
              seats: Mapping[str, str] | None = None) -> Any:
    """Each run's ``team`` against each run's other teams: rows of ``Match`` (docs/teams.md); ``seats``
    as ``play``'s."""
    from harl.run.against import crossplay as table

    return table(run_dirs, episodes, team, seats)


def logged_evaluation(run_dir: str | Path, checkpoint: str | Path) -> dict[str, Any] | None:
    """The run's own evaluation row of ``checkpoint``'s iteration in metrics.csv (None: that
    iteration did not evaluate, or the row is gone)."""
    from harl.rundir.files import PATTERN

    found = PATTERN.match(Path(checkpoint).name)
    if found is None or not (Path(run_dir) / "metrics.csv").is_file():
        return None
    rows = [r for r in read_metrics(run_dir) if r["iteration"] == int(found.group(1))]
    return rows[-1] if rows and rows[-1].get("eval_return") is not None else None


def read_metrics(run_dir: str | Path) -> list[dict[str, int | float | str | None]]:
    """A run's ``metrics.csv`` (the run directory or the file) as rows of numbers.

    Counters (iteration, env_steps, episodes) are ``int``, other numbers ``float`` (as written:
    6 significant digits), empty cells None; a text column (``agent_order``) stays text.
    """
    from harl.errors import CheckpointError
    from harl.logging.csv_log import typed_rows

    path = Path(run_dir)
    path = path / "metrics.csv" if path.is_dir() else path
    if not path.is_file():
        raise CheckpointError(f"{path}: no metrics.csv (not a harl run directory, or no iteration ended yet)")
    return typed_rows(path)


def register(slot: str, config: type, factory: Callable[..., Any] | None, **options: Any) -> Any:
    """Register a user's kind: a stage of ``slot`` (``harl.registry.register``) or a ``"sink"``.

    A sink's factory is ``factory(config, context)`` (``harl.logging.sink.SinkContext``);
    its pipeline table is ``[logging.sinks.NAME] kind = "module:ConfigClass"``.
    """
    if slot == "sink":
        from harl.logging.sink import register_sink

        if factory is None:
            raise TypeError("a sink needs a factory: factory(config, context) -> sink")
        return register_sink(config, factory, **options)
    from harl import registry

    return registry.register(slot, config, factory, **options)


def check(pipeline: Pipeline, overrides: Iterable[str] = (), source: str | None = None
          ) -> list[tuple[str, str, str]]:
    """Load and build a pipeline, then close it: its rows (slot, kind, what was built)."""
    spec = load_pipeline(pipeline, overrides)
    with build(spec, source=source or _source(pipeline)) as stages:
        return stages.describe()


def stage_kinds(slot: str | None = None) -> list[tuple[str, str | None, type, list[tuple[str, str, str, str]]]]:
    """Every kind (or those of ``slot``/named ``slot``, or a user's ``"module:Name"`` kind):
    (slot, kind, config class, [(key, type, default, doc)])."""
    from harl.config.dump import describe_stages, describe_user_kind

    if slot and ":" in slot:
        try:
            return [describe_user_kind(slot)]
        except ValueError as exc:
            raise HarlError(f"harl stages: {exc}") from None
    rows = describe_stages()
    if slot:
        rows = [r for r in rows if slot in (r[0], r[1]) or r[0].startswith(slot + ".")
                or r[0].endswith("." + slot)]  # script: [teams.NAME.script]'s kinds
        if not rows:
            names = sorted({r[0] for r in describe_stages()} | {r[1] for r in describe_stages() if r[1]})
            raise HarlError(f"harl stages: no slot or kind named {slot!r}; known: {', '.join(names)}")
    return rows


def stage_title(slot: str, kind: str | None) -> str:
    """How a pipeline picks a kind of ``slot`` (``stage_kinds``' rows): ``[critic] kind = "v"``, or for a
    team's role ``[teams.NAME] role = "frozen"``."""
    from harl.config.dump import title

    return title(slot, kind)


def families() -> list[tuple[str, str]]:
    """Every registered family (harl's and those of users' modules imported so far): (name, what it is)."""
    from harl import registry

    return [(f.name, f.doc) for f in registry.families()]


def close(trainer: Any, say: Callable[[str], Any] = print) -> None:
    """Close a trainer (envs, sinks, lock); a Ctrl-C meanwhile only prints through ``say`` that it is closing."""
    from harl.run.lifecycle import on_close

    on_close(trainer, say)


def summary_lines(result: Any, width: int, resumable: bool = True) -> list[str]:
    """What ``harl train`` prints at the end of a run, in lines no wider than ``width``."""
    from harl.logging.progress import summary_lines as lines

    return lines(result, width, resumable)


def interrupted_status() -> int:
    """The exit status of a process stopped by a signal: 128 + the first stop signal it got
    (a second signal arriving later does not change it)."""
    import signal

    from harl.rundir.signals import exit_status as status
    from harl.rundir.signals import first_signal

    return status(first_signal() or signal.SIGINT)


def ignore_stops_until_exit() -> None:
    """A command line's work is done: stop signals are ignored until the process exits, with the
    command's status (``harl.rundir.signals.ignore_until_exit``)."""
    from harl.rundir.signals import ignore_until_exit

    ignore_until_exit()


def exit_status(result: Any) -> int:
    """A command's exit status after ``result``: 0, or 128 + the signal that stopped the run."""
    import signal

    from harl.rundir.signals import exit_status as status

    return status(result.signum or signal.SIGINT) if result.stopped_by == "signal" else 0


def plot_runs(run_dirs: Sequence[str | Path], metric: str | None = None, out: str | Path | None = None,
              smooth: int = 1) -> Any:
    """Learning curves of runs (seeds of one pipeline as a mean ± std band) to a PNG: (path, groups)."""
    from harl.plot import plot

    return plot(run_dirs, metric, Path(out) if out else None, smooth)


def render(run_dir: str | Path, episodes: int = 1, out: str | Path | None = None,
           checkpoint: str | Path | None = None, fps: int | None = None, fmt: str | None = None) -> Any:
    """Film a run's policy (deterministic) to a .gif or .mp4, or record an air-combat episode (``fmt``
    ``"acmi"``: a Tacview file; ``"png3d"``: a 3-D picture): a ``RenderResult``."""
    from harl.render import render_run

    if fps is not None and fps < 1:
        raise HarlError(f"--fps: expected a positive integer, got {fps}")
    return render_run(Path(run_dir), Path(checkpoint) if checkpoint else None, episodes,
                      Path(out) if out else None, fps, fmt)


def export(run_dir: str | Path, fmt: str, out: str | Path, checkpoint: str | Path | None = None,
           with_distribution: bool = False, team: str | None = None) -> Path:
    """A run's actors (a ``[teams]`` run: one team's) as ONNX or TorchScript files with a policy.json
    manifest: the manifest's path."""
    from harl.export import export_run

    return export_run(Path(run_dir), Path(checkpoint) if checkpoint else None, fmt, Path(out), with_distribution,
                      team)
