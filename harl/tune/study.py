"""A tune directory: what was asked (``tune.json``), the space (``space.toml``, a copy), the Optuna
study (``study.db``, SQLite, written by the driving process only) and one folder per trial::

    happo-mpe-torch-spread-tune-20260101-120000/
        tune.json  space.toml  study.db
        trial-0000/happo-mpe-torch-spread-s1/   an ordinary run directory per seed (harl eval, plot, compare)
        trial-0000/PRUNED                       written when the driver pruned the trial
        trials.csv  best.toml  history.png  importance.png  intermediate.png
        final/best/...  final/baseline/...  final/compare/   fresh seeds: best against the starting pipeline
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from harl.config.dump import dump_pipeline
from harl.config.loading import load_spec_and_notes
from harl.errors import HarlError, import_extra
from harl.rundir.naming import stamped
from harl.tune.space import Space, read_space

RECORD = "tune.json"
SPACE = "space.toml"
DATABASE = "study.db"
STUDY = "harl"


def import_optuna() -> Any:
    """The ``optuna`` module, or a ``MissingExtraError`` naming the ``tune`` extra."""
    return import_extra("optuna", "harl tune", "tune")


@attrs.frozen
class Request:
    """What ``harl tune`` was asked: recorded in tune.json, compared on ``--resume``."""

    pipeline: str
    overrides: list[str]
    seeds: list[int]
    trials: int | None
    final_seeds: list[int]
    vectorize: bool = False
    pipeline_text: str = ""
    """The starting pipeline resolved (its file edited since: a resume says so)."""
    jobs: int = 1
    """``--jobs`` (0: with ``--ray``, the cluster's CPUs); a resume without ``--jobs`` keeps it."""

    def describe(self) -> str:
        parts = [self.pipeline, *(f"--set {o}" for o in self.overrides), "--seeds " + ",".join(map(str, self.seeds))]
        return " ".join(parts)


def base_text(pipeline: str, overrides: Sequence[str]) -> str:
    spec, _ = load_spec_and_notes(pipeline, overrides)
    return dump_pipeline(spec)


def new_dir(pipeline: str, overrides: Sequence[str], run_dir: Path | None, storage: Path | None) -> Path:
    """The tune directory of a new study (``--run-dir``, else ``<logging.dir>/<name>-tune-<time>``)."""
    spec, _ = load_spec_and_notes(pipeline, overrides)
    if run_dir is not None:
        if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
            held = " (it holds a study: continue it with harl tune --resume " + str(run_dir) + ")" \
                if (run_dir / RECORD).is_file() else ""
            raise HarlError(f"--run-dir {run_dir}: not an empty directory{held}; a new study needs a new "
                            "(or empty) directory")
        return run_dir.resolve()
    return stamped(storage or Path(spec.logging.dir), f"{spec.run.name}-tune").resolve()


def write_record(tune_dir: Path, request: Request, space: Space) -> None:
    tune_dir.mkdir(parents=True, exist_ok=True)
    (tune_dir / SPACE).write_text(space.text, encoding="utf-8")
    data = {**attrs.asdict(request), "space": str(space.path), "space_digest": space.digest}
    (tune_dir / RECORD).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def update_record(tune_dir: Path, request: Request) -> None:
    """tune.json with a resume's settings (``--trials``, ``--jobs``, ``--final-seeds``) for the next resume."""
    data = json.loads((tune_dir / RECORD).read_text(encoding="utf-8"))
    data.update(attrs.asdict(request))
    (tune_dir / RECORD).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def read_record(tune_dir: Path) -> tuple[Request, Space]:
    """The recorded request and space of a study, validated again (the pipeline may have changed)."""
    try:
        data = json.loads((tune_dir / RECORD).read_text(encoding="utf-8"))
        request = Request(data["pipeline"], list(data["overrides"]), list(data["seeds"]), data["trials"],
                          list(data["final_seeds"]), bool(data.get("vectorize")), data.get("pipeline_text", ""),
                          int(data.get("jobs", 1)))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarlError(f"{tune_dir / RECORD}: cannot read the study's record ({exc}); is {tune_dir} a tune "
                        "directory of harl tune? (it holds tune.json, space.toml and study.db)") from None
    space = read_space(tune_dir / SPACE, request.pipeline, request.overrides)
    return request, space


def check_resume(tune_dir: Path, recorded: Request, asked: Request | None, space_path: Path | None,
                 space: Space) -> None:
    """A repeated command must ask for the study it resumes; the pipeline must still be the one it tuned."""
    if asked is not None:
        if Path(asked.pipeline).resolve() != Path(recorded.pipeline).resolve() or asked.overrides != recorded.overrides:
            raise HarlError(f"--resume {tune_dir}: this study tunes {recorded.describe()} (its tune.json), not "
                            f"{asked.describe()}; give --resume {tune_dir} alone to continue it, or start a "
                            f"new study of {asked.pipeline} without --resume")
        if asked.seeds != recorded.seeds:
            raise HarlError(f"--resume {tune_dir}: this study scores each trial over --seeds "
                            f"{','.join(map(str, recorded.seeds))}; drop --seeds (or repeat those) to continue it")
    if space_path is not None and not space_path.is_file():
        raise HarlError(f"--resume {tune_dir}: --space {space_path}: no such space file; drop --space to continue "
                        f"the study with its own ({tune_dir / SPACE})")
    if space_path is not None and space_path.read_text(encoding="utf-8") != space.text:
        raise HarlError(f"--resume {tune_dir}: --space {space_path} differs from the space this study searches "
                        f"({tune_dir / SPACE}); drop --space to continue the study, or start a new one")
    now = base_text(recorded.pipeline, recorded.overrides)
    if recorded.pipeline_text and now != recorded.pipeline_text:
        raise HarlError(f"--resume {tune_dir}: {recorded.pipeline} has changed since this study started (its "
                        "resolved pipeline differs), so new trials would not be comparable with the old ones; "
                        "restore the file (git diff shows what changed), or start a new study")


def sampler_seed(seed: int, made: int) -> int:
    """The sampler's seed in a study that already made ``made`` trials: ``seed`` itself for a new
    study (the same seed proposes the same trials), else one drawn from (seed, made), so that a
    resumed study continues with proposals of its own instead of replaying its first ones."""
    if not made:
        return seed
    import numpy as np

    return int(np.random.SeedSequence([seed, made]).generate_state(1)[0])


def open_study(tune_dir: Path, space: Space, create: bool) -> Any:
    """The study in ``tune_dir/study.db`` with the space's sampler and pruner; a study that already
    has trials gets its sampler seeded from (seed, trials made) (``sampler_seed``)."""
    optuna = import_optuna()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{tune_dir / DATABASE}"
    made = 0 if create else len(optuna.load_study(study_name=STUDY, storage=storage).get_trials(deepcopy=False))
    seed = sampler_seed(space.seed, made)
    if space.sampler == "random":
        sampler = optuna.samplers.RandomSampler(seed=seed)
    else:
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=space.sampler_startup_trials)
    if space.pruner == "median":
        pruner = optuna.pruners.MedianPruner(n_startup_trials=space.startup_trials, n_warmup_steps=space.warmup)
    elif space.pruner == "halving":
        pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=max(1, space.warmup),
                                                        reduction_factor=max(2, space.reduction_factor))
    else:
        pruner = optuna.pruners.NopPruner()
    if create:
        return optuna.create_study(storage=storage, sampler=sampler, pruner=pruner, study_name=STUDY,
                                   direction="maximize")
    return optuna.load_study(study_name=STUDY, storage=storage, sampler=sampler, pruner=pruner)
