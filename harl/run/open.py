"""One run directory opened: its pipeline, a checkpoint, and the stages built with its weights.

``harl eval``, ``harl render``, ``harl export`` and ``resume`` all start here::

    with open_run(run_dir) as run:          # the newest checkpoint, networks restored
        run.stages.evaluator.evaluate()

Readers never take the run's lock (``harl.rundir.lock``): they read complete checkpoints only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from harl.compose import Stages, build_stages
from harl.config.loading import parse_toml, structure_pipeline
from harl.config.older_runs import older_defaults
from harl.config.spec import PipelineSpec
from harl.envs.protocol import can_set_env_state
from harl.errors import CheckpointError, ConfigError
from harl.run.resume_check import check_resumable
from harl.rundir.checkpoint import latest_checkpoint, load_checkpoint


def spec_of_run(run_dir: Path) -> tuple[PipelineSpec, str]:
    """The run's resolved pipeline (``pipeline.toml``) as a spec, and its text."""
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
    return structure_pipeline(older_defaults(parse_toml(text, str(path))), str(path)), text


def restore(stages: Stages, state: dict[str, Any], networks_only: bool = False) -> None:
    """Load a checkpoint into built stages; a mismatch is a ``CheckpointError`` that says why."""
    try:
        stages.load_state_dict(state, networks_only)
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError(
            f"the checkpoint does not fit this pipeline's networks ({str(exc).splitlines()[0]}); "
            "was the run's pipeline.toml edited after the checkpoint was written?"
        ) from None


def restarts_episodes(saved: Any, venv: Any) -> bool:
    """Whether a collector's checkpoint state ``saved`` has episodes under way that a resume on ``venv``
    begins again from their first step: no whole env state saved (``env_state``), or an env (a
    population's, for a member's view) that cannot take it (``harl.envs.protocol.VectorEnv.set_state``)."""
    if not isinstance(saved, dict) or not any(s.get("steps") for s in saved.get("episode_starts") or ()):
        return False
    return "env_state" not in saved or not can_set_env_state(getattr(venv, "population_venv", venv))


def small(spec: PipelineSpec) -> PipelineSpec:
    """``spec`` with one inline env per vector env, on the CPU: enough to play or export the networks."""
    return attrs.evolve(
        spec, run=attrs.evolve(spec.run, device="cpu"),
        collector=attrs.evolve(spec.collector, **{k: v for k, v in (("n_envs", 1), ("backend", "inline"))
                                                  if k in attrs.fields_dict(type(spec.collector))}),
        evaluator=attrs.evolve(spec.evaluator, n_envs=1),
    )


@attrs.define
class OpenRun:
    """A run directory opened for reading (or for a resume): close it to close its envs."""

    run_dir: Path
    spec: PipelineSpec
    """As built (``small``/``deterministic`` applied); ``pipeline_text`` is the file's own."""
    pipeline_text: str
    checkpoint: Path
    state: dict[str, Any]
    stages: Stages

    def close(self) -> None:
        self.stages.close()

    def __enter__(self) -> OpenRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_run(run_dir: Path | str, checkpoint: Path | str | None = None, *, full: bool = False,
             one_env: bool = False, deterministic: bool | None = None, venv: Any = None,
             edited: tuple[PipelineSpec, str, str] | None = None) -> OpenRun:
    """Build ``run_dir``'s stages and load its newest (or the named) checkpoint into them.

    ``full``: every stage's state (a resume: the checkpoint must fit the per-env shapes of
    ``pipeline.toml``); else the networks only (a fresh, seeded evaluation of them).
    ``one_env``: one inline env on the CPU (``small``).  ``deterministic``: overrides
    ``[evaluator] deterministic``.  ``venv``: a pre-built training env for the stages
    (a population member's slice, ``harl.population``).  ``edited``: (spec, its text, the
    ``--set`` arguments that made it) to use instead of ``pipeline.toml`` (a resume with
    ``--set``: the file is rewritten only once the edit is accepted).
    """
    run_dir = Path(run_dir)
    spec, text = spec_of_run(run_dir)
    edit = ""
    if edited is not None:
        spec, text, edit = edited
    path = Path(checkpoint) if checkpoint is not None else latest_checkpoint(run_dir)
    state = load_checkpoint(path)
    if full:
        check_resumable(state, text, run_dir / "pipeline.toml", path, edit)
    if one_env:
        spec = small(spec)
    if deterministic is not None:
        spec = attrs.evolve(spec, evaluator=attrs.evolve(spec.evaluator, deterministic=deterministic))
    stages = build_stages(spec, str(run_dir / "pipeline.toml"), venv=venv)
    try:
        restore(stages, state, networks_only=not full)
    except BaseException:
        stages.close()
        raise
    if full and "buffer" not in state and hasattr(stages.buffer, "state_dict"):  # a replay, saved only on request
        stages.notes.append(f"{path.name} holds no replay buffer ([checkpoint] replay_buffer = false): the resumed "
                            "run starts it empty, so its updates differ from an uninterrupted run's until the "
                            "buffer refills")
    if full and restarts_episodes(state.get("collector"), stages.venv):
        stages.notes.append(f"{path.name} was written with episodes under way and holds no env state this run "
                            "can restore (on-policy collectors save it where the env has get_state / "
                            "set_state): those episodes begin again from their first step, so the resumed "
                            "run is deterministic but differs from an uninterrupted one")
    return OpenRun(run_dir, spec, text, path, state, stages)
