"""The run lifecycle: run directories, a fresh start, and a resume from a checkpoint."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harl.compose import Stages, build_stages
from harl.config.dump import dump_pipeline
from harl.config.loading import load_pipeline, structure_pipeline
from harl.config.spec import PipelineSpec
from harl.errors import CheckpointError, ConfigError
from harl.logging.tensorboard import require_tensorboard
from harl.logging.tracker import require_trackers
from harl.run.checkpoint import latest_checkpoint, load_checkpoint
from harl.run.files import writing
from harl.run.resume_check import check_resumable
from harl.trainer import Counters, Trainer, set_rng_state

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


def new_run_dir(spec: PipelineSpec) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(spec.logging.dir) / f"{spec.run.name}-s{spec.run.seed}-{stamp}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    path.mkdir(parents=True)
    return path


def start_run(pipeline: str | Path, overrides: list[str] = (), run_dir: Path | None = None
              ) -> tuple[Trainer, list[str]]:
    """A fresh run: validate, make the run directory, write the resolved pipeline, build."""
    spec, notes = load_pipeline(pipeline, overrides)
    if spec.logging.tensorboard:  # before the run directory exists
        require_tensorboard()
    require_trackers(spec.logging)
    text = dump_pipeline(spec)
    stages = build_stages(spec, str(pipeline))
    try:
        with writing(run_dir or Path(spec.logging.dir), "the run directory",
                     fix="set logging.dir (or --run-dir) to a writable directory"):
            run_dir = run_dir or new_run_dir(spec)
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "pipeline.toml").write_text(text, encoding="utf-8")
    except BaseException:
        stages.close()
        raise
    return Trainer(stages, spec, run_dir, text), notes


def spec_of_run(run_dir: Path) -> tuple[PipelineSpec, str]:
    path = run_dir / "pipeline.toml"
    if not run_dir.is_dir():
        raise CheckpointError(f"{run_dir}: no such run directory")
    if not path.is_file():
        raise CheckpointError(
            f"{run_dir}: not a harl run directory (no pipeline.toml); pass the directory that "
            "harl train printed when the run started"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a pipeline file (it is not UTF-8 text); harl train writes it as "
                          "UTF-8: restore it from a copy, or start the run again") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read the run's pipeline ({exc.strerror})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: malformed TOML: {exc}") from None
    return structure_pipeline(data, str(path)), text


def restore(stages: Stages, state: dict[str, Any], networks_only: bool = False) -> None:
    try:
        stages.load_state_dict(state, networks_only)
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError(
            f"the checkpoint does not fit this pipeline's networks ({str(exc).splitlines()[0]}); "
            "was the run's pipeline.toml edited after the checkpoint was written?"
        ) from None


def resume_run(run_dir: Path, checkpoint: Path | None = None) -> Trainer:
    """Continue a run from its newest (or a named) checkpoint, appending to its metrics."""
    spec, text = spec_of_run(run_dir)
    if spec.logging.tensorboard:
        require_tensorboard()
    require_trackers(spec.logging)
    path = checkpoint or latest_checkpoint(run_dir)
    state = load_checkpoint(path)
    check_resumable(state, spec, run_dir / "pipeline.toml", path)
    stages = build_stages(spec, str(run_dir / "pipeline.toml"))
    try:
        restore(stages, state)
        set_rng_state(state["rng"])
    except BaseException:
        stages.close()
        raise
    return Trainer(stages, spec, run_dir, text, Counters(**state["counters"]))
