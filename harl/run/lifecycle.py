"""The run lifecycle: a fresh start and a resume, each ending in a Trainer ready to train.

::

    trainer, notes = start_run(pipeline, overrides, run_dir)   # or resume_run(run_dir)
    with trainer:                  # closes the envs, any sink left open, the lock
        result = trainer.train()

Both take the run directory's lock (``harl.rundir.lock``) for the run's life and open its
sinks (``harl.logging.sink``); the Trainer receives them and constructs none.
"""

from __future__ import annotations

import contextlib
import csv
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from harl.algorithms import Kinds, algorithms, name_of, rename
from harl.compose import build_stages
from harl.config.dump import dump_pipeline
from harl.config.loading import load_spec_and_notes
from harl.config.run import sink_configs
from harl.config.spec import PipelineSpec
from harl.errors import HarlError
from harl.logging.csv_log import read_metrics, restore_rows
from harl.logging.sink import Sink, SinkContext, open_sinks, require_sinks
from harl.run.open import open_run, restore, spec_of_run
from harl.rundir.files import checkpoint_note, intact, list_checkpoints, writing
from harl.rundir.lock import LOCK_FILE, RunLock, take
from harl.rundir.naming import stamped
from harl.trainer import Counters, Trainer, set_rng_state

__all__ = ["new_run_dir", "on_close", "restore", "resume_run", "spec_of_run", "start_run"]

Callbacks = Iterable[Any]


def run_name(spec: PipelineSpec) -> tuple[str, str | None]:
    """The name a new run directory starts with: ``run.name``, its algorithm word replaced by the one
    the stages compose when they differ (``--set updater.kind=simultaneous`` on a ``happo-...``
    pipeline runs MAPPO; both names from ``harl.algorithms``' table); and a note saying so (None
    when the name was kept)."""
    from harl.registry import kind_name

    updater, objective = kind_name(spec.updater), kind_name(spec.updater.objective)
    kinds = Kinds(kind_name(spec.collector), kind_name(spec.critic), bool(getattr(spec.critic, "twin", False)),
                  updater, objective)
    name = rename(spec.run.name, kinds)
    if name.lower() == spec.run.name.lower():
        return spec.run.name, None
    names = {a.name.lower() for a in algorithms()}
    named = next(w for w in re.split(r"[-_.+]", spec.run.name) if w.lower() in names)
    return name, (f'run.name "{spec.run.name}" names {named.lower()}, but the stages compose '
                  f'{str(name_of(kinds)).lower()} (updater.kind = "{updater}", objective "{objective}"): '
                  f'the run directory is named "{name}-..."')


def new_run_dir(spec: PipelineSpec) -> Path:
    """A new folder ``<run name>-s<seed>-<date>-<time>`` in ``logging.dir``, made here."""
    path = stamped(Path(spec.logging.dir), f"{run_name(spec)[0]}-s{spec.run.seed}")
    path.mkdir(parents=True)
    return path


def _claim(run_dir: Path, fresh: bool) -> RunLock:
    """Lock a run directory named by the caller for a new run: refuse a file, a live run and
    (``fresh``) a directory that already holds a run."""
    if run_dir.exists() and not run_dir.is_dir():
        raise HarlError(f"--run-dir {run_dir}: is a file, not a directory; pass a new directory "
                        "(or an empty one) for the run")
    with writing(run_dir, "the run directory", fix="set logging.dir (or --run-dir) to a writable directory"):
        run_dir.mkdir(parents=True, exist_ok=True)
    lock = take(run_dir)
    if fresh and (run_dir / "pipeline.toml").exists():
        lock.release()
        raise HarlError(f"--run-dir {run_dir}: already holds a run (it has a pipeline.toml); "
                        f"continue it with harl train --resume {run_dir}, or pick a new directory")
    return lock


def _first_missing(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist yet (None: ``path`` exists)."""
    missing = None
    for p in (path, *path.parents):
        if p.exists():
            break
        missing = p
    return missing


def _unmake(run_dir: Path, made: Path | None, fresh: bool = True) -> None:
    """Undo a refused start in ``run_dir``: remove the lock and (``fresh``) ``pipeline.toml`` when the
    folder holds nothing else, then the folders the start created (``made``: the outermost of them;
    None: it made none, so the folder stays, as empty as it was found)."""
    wrote = (LOCK_FILE, "pipeline.toml") if fresh else (LOCK_FILE,)
    chain = [run_dir, *run_dir.parents]
    chain = chain[: chain.index(made) + 1] if made in chain else [run_dir] if made is not None else []
    with contextlib.suppress(OSError):  # anything else there (or a failed removal): left as it is
        if any(p.name not in wrote for p in run_dir.iterdir()):
            return
        for name in wrote:
            (run_dir / name).unlink(missing_ok=True)
        for folder in chain:
            folder.rmdir()


def _sinks(spec: PipelineSpec, run_dir: Path, text: str, counters: Counters,
           state: dict[str, Any] | None = None) -> list[Sink]:
    """The pipeline's sinks; a resumed run's ``metrics.csv`` gets the rows its checkpoint holds
    (``state``), so a file removed or cut short meanwhile is rewritten whole."""
    context = SinkContext(run_dir, text, counters.iteration, counters.env_steps, lambda: checkpoint_note(run_dir))
    opened = open_sinks(sink_configs(spec.logging), context)
    restore_rows(opened, state)
    return opened


def start_run(pipeline: str | Path | PipelineSpec, overrides: Sequence[str] = (), run_dir: Path | None = None,
              callbacks: Callbacks = (), sinks: Sequence[Sink] = (), source: str = "pipeline",
              fresh: bool = True, venv: Any = None, lock: RunLock | None = None) -> tuple[Trainer, list[str]]:
    """A fresh run: validate, lock and fill the run directory (``pipeline.toml``), build, open the sinks.

    ``pipeline``: a file, or a spec (``harl.load_pipeline``; ``overrides`` then go to the
    file only; ``source`` names the spec in messages).  ``sinks``: sinks of the caller's, after
    those the pipeline's ``[logging]`` asks for.  ``fresh=False``: ``run_dir`` may hold its own
    ``pipeline.toml`` already (a sweep's trial, written by the sweep before it starts).
    ``venv``: a pre-built training env (a population member's slice, ``harl.population``).
    ``lock``: ``run_dir``'s lock, already held by the caller (a resume that starts over).
    """
    notes: list[str] = []
    if isinstance(pipeline, PipelineSpec):
        if overrides:
            raise TypeError("overrides go with a pipeline file; apply them with harl.load_pipeline(spec, overrides)")
        spec = pipeline
    else:
        spec, notes = load_spec_and_notes(pipeline, overrides)
        source = str(pipeline)
    configs = sink_configs(spec.logging)
    require_sinks(configs)  # a missing extra before any directory is made
    text = dump_pipeline(spec)
    made: Path | None = None  # the outermost folder this call creates for the run: removed if it is refused
    claimed = lock is None and run_dir is not None  # the lock file is this call's to remove
    if lock is None and run_dir is not None:
        made = _first_missing(run_dir)
        lock = _claim(run_dir, fresh)
    try:
        stages = build_stages(spec, source, venv=venv)
        try:
            if run_dir is None:
                with writing(Path(spec.logging.dir), "the run directory",
                             fix="set logging.dir (or --run-dir) to a writable directory"):
                    outer = _first_missing(Path(spec.logging.dir))
                    run_dir = new_run_dir(spec)
                    made = outer or run_dir
                lock = take(run_dir)
                stages.notes.extend(note for note in [run_name(spec)[1]] if note)
            with writing(run_dir / "pipeline.toml", "the run's pipeline", run_dir):
                (run_dir / "pipeline.toml").write_text(text, encoding="utf-8")
            opened = _sinks(spec, run_dir, text, Counters())
        except BaseException:
            stages.close()
            raise
    except BaseException:
        if run_dir is not None and (made is not None or claimed):  # refused, failed or stopped: a folder of
            _unmake(run_dir, made, fresh)  # nothing but the lock and pipeline.toml is not left behind
        if lock is not None:
            lock.release()
        raise
    return Trainer(stages, spec, run_dir, text, sinks=[*opened, *sinks], callbacks=callbacks, lock=lock), notes


def _loadable(run_dir: Path) -> bool:
    """Whether any checkpoint of the run reads back whole (the newest first: usually the only check)."""
    return any(intact(path) for path in reversed(list_checkpoints(run_dir)))


def _start_over(run_dir: Path, lock: RunLock, callbacks: Callbacks, sinks: Sequence[Sink], overrides: Sequence[str],
                venv: Any) -> Trainer:
    """A resume of a run that stopped before its first complete checkpoint: it starts again from
    the beginning in place (its rows replaced); unreadable checkpoints are set aside, not deleted."""
    found = list_checkpoints(run_dir)
    path = run_dir / "metrics.csv"
    rows = 0
    if path.is_file():
        with contextlib.suppress(OSError, UnicodeDecodeError, csv.Error):
            rows = len(read_metrics(path))
    for bad in found:
        with writing(bad, "an unreadable checkpoint (set aside)", run_dir):
            bad.rename(bad.with_name(bad.name + ".unreadable"))
    why = (f"its {len(found)} checkpoint{'s' if len(found) > 1 else ''} do{'' if len(found) > 1 else 'es'} not read "
           "back whole (set aside as *.unreadable)") if found else "it stopped before its first checkpoint"
    trainer, _ = start_run(run_dir / "pipeline.toml", overrides, run_dir, callbacks, sinks, fresh=False, venv=venv,
                           lock=lock)
    replaced = f"its {rows} metrics row{'' if rows == 1 else 's'} will be replaced" if rows else "it has no metrics rows"
    trainer.stages.notes.append(f"{run_dir}: no checkpoint to continue from ({why}): starting the run again from "
                                f"the beginning, in place; {replaced}")
    return trainer


def resume_run(run_dir: Path, checkpoint: Path | None = None, callbacks: Callbacks = (),
               sinks: Sequence[Sink] = (), overrides: Sequence[str] = (), venv: Any = None) -> Trainer:
    """Continue a run from its newest (or a named) checkpoint, appending to its metrics.

    ``overrides`` edit the run's ``pipeline.toml`` as editing it by hand would, but only keys a
    continuation may change (``harl.run.resume_check``; others are refused before anything is
    written), and the file is written only when the run then has iterations left to train.
    A run without any checkpoint that reads back whole starts again from the beginning, in
    place (a note in ``trainer.stages.notes`` says so): a crash before (or during) its first checkpoint is
    no dead end.
    """
    run_dir = Path(run_dir)
    spec, text = spec_of_run(run_dir)
    require_sinks(sink_configs(spec.logging))
    lock = take(run_dir)
    try:
        if checkpoint is None and not _loadable(run_dir):
            return _start_over(run_dir, lock, callbacks, sinks, overrides, venv)
        edited = None
        path = run_dir / "pipeline.toml"
        if overrides:
            spec, _ = load_spec_and_notes(path, overrides)
            edited = (spec, dump_pipeline(spec), " ".join(f"--set {o}" for o in overrides))
        run = open_run(run_dir, checkpoint, full=True, venv=venv, edited=edited)
        try:
            set_rng_state(run.state["rng"])
            trainer = Trainer(run.stages, run.spec, run_dir, run.pipeline_text, Counters(**run.state["counters"]),
                              callbacks=callbacks, lock=lock)
            if not trainer.finished:  # a resume that does nothing writes nothing
                if edited is not None and run.pipeline_text != text:
                    with writing(path, "the run's pipeline", run_dir):
                        path.write_text(run.pipeline_text, encoding="utf-8")
                trainer.sinks = [*_sinks(spec, run_dir, run.pipeline_text, trainer.counters, run.state), *sinks]
        except BaseException:
            run.close()
            raise
    except BaseException:
        lock.release()
        raise
    return trainer


def on_close(trainer: Trainer, say: Callable[[str], Any]) -> None:
    """Close a trainer's envs and lock, printing through ``say`` what a Ctrl-C meanwhile means."""
    from harl.rundir.signals import shielded

    with shielded(say):
        trainer.close()

