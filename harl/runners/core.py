"""What every runner facade shares: the converted pipeline, its built stages, HARL's results
directory, the counters a hand-written loop advances, checkpoints and the ``run()`` loop.

It holds no algorithm: the stages do.  ``run()`` is ``harl train`` on the converted
pipeline (the Trainer, its progress display, checkpoints and Ctrl-C/SIGTERM handling).
"""

from __future__ import annotations

import csv
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

from harl import registry
from harl.config.dump import dump_pipeline
from harl.config.loading import structure_pipeline
from harl.errors import CheckpointError, ConfigError
from harl.evaluator import EvalStats
from harl.logging.progress import summary_lines
from harl.run.lifecycle import restore, start_run
from harl.run.resume_check import check_resumable
from harl.rundir.checkpoint import load_checkpoint
from harl.rundir.files import list_checkpoints
from harl.rundir.signals import signal_name
from harl.runners.envs import HarlVecEnv
from harl.runners.exits import RunStopped
from harl.runners.pipeline import pipeline_tables
from harl.runners.results import results_dir, write_config
from harl.trainer import Counters, TrainResult, set_rng_state

MODEL_DIR_FIX = (
    "set it to a harl run directory (the results/<env>/<task>/<algo>/<exp_name>/seed-... directory "
    "that a harl runner or harl train wrote; it holds checkpoints/iter_*.pt), or to one of its "
    "checkpoint files, or to None to start from scratch"
)


def section(algo_args: dict[str, Any], name: str) -> dict[str, Any]:
    value = algo_args.get(name, {})
    return value if isinstance(value, dict) else {}


def checkpoint_in(model_dir: Any) -> Path:
    """The newest harl checkpoint that ``algo_args.train.model_dir`` names, or a ``CheckpointError``."""
    path = Path(str(model_dir))
    if path.is_file():
        return path
    why = "no such file or directory"
    if path.is_dir():
        found = list_checkpoints(path.parent if path.name == "checkpoints" else path)
        if found:
            return found[-1]
        harl_files = sorted(p.name for p in path.glob("*_agent*.pt"))
        why = (f"it holds HARL's own model files ({', '.join(harl_files[:3])}), which harl cannot load"
               if harl_files else "it holds no harl checkpoint (no checkpoints/iter_*.pt)")
    raise CheckpointError(f"algo_args.train.model_dir = \"{model_dir}\": {why}; {MODEL_DIR_FIX}")


class RunnerCore:
    """The converted pipeline's stages in HARL's results directory; see the module docstring."""

    def __init__(self, args: dict[str, Any], algo_args: dict[str, Any], env_args: dict[str, Any],
                 updater_kind: str, family: str, pipeline: Any = None) -> None:
        self.args, self.algo_args, self.env_args = args, algo_args, env_args
        data, notes, self.source = pipeline_tables(args, algo_args, env_args, updater_kind, pipeline)
        self.spec = structure_pipeline(data, self.source)
        found = registry.family_of(self.spec.collector).name
        if found != family:
            raise ConfigError(f"{self.source}: collector.kind: \"{self.spec.collector.kind}\" is an {found} "
                              f"collector, but this runner runs {family} pipelines; use "
                              f"RUNNER_REGISTRY[\"{args.get('algo')}\"] for this algorithm")
        self.text = dump_pipeline(self.spec)
        self.render_only = bool(section(algo_args, "render").get("use_render", False))
        model_dir = section(algo_args, "train").get("model_dir")
        self.checkpoint = None if model_dir in (None, "", "None") else checkpoint_in(model_dir)
        self.closed = False
        self.stages: Any = None
        self.run_dir: Path | None = None
        self.episodes: list[dict[str, Any]] = []
        """Episodes a hand-written loop finished since the last ``train()``."""
        for note in notes:
            print(f"note: {note}")
        if self.render_only:
            if self.checkpoint is None:
                raise ConfigError("algo_args.render.use_render = True needs a trained model: "
                                  f"algo_args.train.model_dir is not set; {MODEL_DIR_FIX}")
            return
        state = None if self.checkpoint is None else load_checkpoint(self.checkpoint)
        self.run_dir = results_dir(args, algo_args, env_args)
        # harl's own run start: the run directory locked, pipeline.toml written, stages built,
        # the [logging] sinks open (metrics.csv first)
        self.trainer, _ = start_run(self.spec, run_dir=self.run_dir, source=self.source)
        self.stages = self.trainer.stages
        try:
            write_config(self.run_dir, args, algo_args, env_args)
            if state is not None:
                self.restore_state(state)
        except BaseException:
            self.close()
            raise
        self.envs = HarlVecEnv(self.stages.venv, self.stages.collector.seed)
        self.eval_envs = HarlVecEnv(self.stages.eval_venv, None)
        print(f"run directory: {self.run_dir}")

    @property
    def counters(self) -> Counters:
        return self.trainer.counters

    def end_iteration(self, env_steps: int) -> None:
        """An on-policy iteration driven by hand ends: the Trainer counts it."""
        self.trainer.count(env_steps, len(self.episodes))
        self.episodes = []

    def restore_state(self, state: dict[str, Any]) -> None:
        """Networks, optimisers, collector, RNGs and counters: ``run()`` continues exactly there."""
        assert self.checkpoint is not None and self.run_dir is not None
        check_resumable(state, dump_pipeline(self.spec), self.run_dir / "pipeline.toml", self.checkpoint)
        restore(self.stages, state)
        set_rng_state(state["rng"])
        self.trainer.counters = Counters(**state["counters"])

    def restore(self) -> None:
        if self.checkpoint is None:
            raise ConfigError(f"restore(): algo_args.train.model_dir is not set; {MODEL_DIR_FIX}")
        self.restore_state(load_checkpoint(self.checkpoint))

    def save(self) -> Path:
        return self.trainer.save()

    def evaluate(self, label: str) -> EvalStats:
        stats = self.stages.evaluator.evaluate()
        self.trainer.last_eval = stats
        print(f"{label}: eval average episode reward is {stats.mean_return:.4g}, "
              f"eval average episode length is {stats.mean_length:.4g}")
        return stats

    def dump_metrics(self, metrics: dict[str, Any], eval_episode: int) -> Path:
        """One row of ``metrics`` (per-agent sequences as ``<name>_agent<i>``) in ``eval_metrics.csv``."""
        assert self.run_dir is not None
        row: dict[str, Any] = {"eval_episode": eval_episode}
        for key, value in metrics.items():
            if isinstance(value, (list, tuple)):
                row.update({f"{key}_agent{i}": v for i, v in enumerate(value)})
            else:
                row[key] = value
        path = self.run_dir / "eval_metrics.csv"
        new = not path.is_file()
        with path.open("a", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            if new:
                writer.writeheader()
            writer.writerow(row)
        return path

    def train(self) -> TrainResult:
        """``harl train`` on the converted pipeline, in this results directory."""
        result = self.trainer.train()
        c = result.counters
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else sys.maxsize
        for text in summary_lines(result, width, resumable=self.trainer.newest_checkpoint() is not None):
            print(text)  # what harl train says at the end of a run
        if result.interrupted:
            self.close()
            signum = result.signum or signal.SIGINT
            raise RunStopped(f"training stopped by {signal_name(signum)} after iteration {c.iteration}; "
                             f"its checkpoint is in {result.run_dir / 'checkpoints'}; continue with "
                             f"harl train --resume {result.run_dir}", signum)
        return result

    def render(self) -> Any:
        from harl.render import render_run

        assert self.checkpoint is not None
        episodes = int(section(self.algo_args, "render").get("render_episodes", 1))
        result = render_run(self.checkpoint.parent.parent, self.checkpoint, episodes, None)
        for total in result.returns:
            print(f"total reward of this episode: {total}")
        return result

    def close(self) -> None:
        """The envs, the sinks and the run directory's lock."""
        if self.stages is not None and not self.closed:
            self.closed = True
            self.trainer.close()
