"""``harl``: train (one seed or a sweep), resume, check, evaluate, plot and render runs;
list stage kinds.

User errors (a bad pipeline, run directory, checkpoint, missing package) print one
paragraph and exit with status 2; ``--debug`` shows the traceback too.
"""

from __future__ import annotations

import argparse
import signal
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harl.cli_help import TRAIN_EXAMPLES, command_list, harl_version
from harl.errors import HarlError
from harl.run.signals import exit_status, shielded

EPILOG = """\
examples:
  harl train pipelines/happo_mpe_spread.toml
  harl train pipelines/happo_mpe_spread.toml --set updater.kind=simultaneous --set run.seed=3
  harl train --resume runs/happo-mpe-spread-s1-20261130-101500
  harl check pipelines/happo_mpe_spread.toml
  harl stages updater
  harl eval runs/happo-mpe-spread-s1-20261130-101500 --episodes 20
  harl train pipelines/happo_mpe_spread.toml --seeds 1,2,3 --jobs 2
  harl train pipelines/happo_mpe_spread.toml --seeds 1-4 --grid updater.objective.lr=1e-4,5e-4 --ray auto
  harl plot runs/happo-mpe-spread-sweep-20261130-101500
  harl render runs/happo-mpe-spread-s1-20261130-101500 --episodes 3 --out spread.gif
  harl export runs/happo-mpe-spread-s1-20261130-101500 --format onnx --out spread-onnx

--set takes a dotted key path and a TOML literal (a bare word is a string):
  --set run.total_env_steps=2_000_000  --set policy.hidden_sizes=[64,64]  --set env.scenario=simple_reference
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="harl", description="Heterogeneous-agent RL as a pipeline of swappable stages.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--debug", action="store_true", help="show tracebacks for user errors too")
    p.add_argument("--version", action="version", version=f"harl {harl_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")  # none: main() lists the commands

    def overrides(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one pipeline key (repeatable), e.g. --set run.seed=3")

    t = sub.add_parser("train", help="train a pipeline, or resume a run",
                       description="Train a pipeline file, or continue a run with --resume.",
                       epilog=TRAIN_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("pipeline", nargs="?", help="pipeline TOML file (e.g. pipelines/happo_mpe_spread.toml)")
    overrides(t)
    t.add_argument("--resume", metavar="RUN_DIR", help="continue this run from its newest checkpoint (a sweep "
                   "directory: its unfinished trials)")
    t.add_argument("--checkpoint", metavar="FILE", help="with --resume: continue from this checkpoint instead")
    t.add_argument("--run-dir", metavar="DIR", help="write the run here instead of <logging.dir>/<name>-s<seed>-<time> "
                   "(with --seeds: the sweep directory)")
    t.add_argument("--seeds", metavar="LIST", help="one run per seed, e.g. 1,2,3 or 1-5, in one sweep directory")
    t.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="a sweep over these values of a key (repeatable: the product), e.g. "
                   "--grid updater.objective.lr=1e-4,5e-4")
    t.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="with --seeds/--grid: run N trials at once, each in its own process (default 1)")
    t.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                   help="run the sweep's trials as Ray tasks: on the cluster at ADDRESS, or (auto, also "
                   "RAY_ADDRESS) the one Ray finds; see docs/ray.md")
    t.add_argument("--storage", metavar="PATH", help="with --ray: make the sweep directory under PATH, a "
                   "directory every node reaches at that path (a shared filesystem)")
    t.add_argument("--max-retries", type=int, default=2, metavar="N",
                   help="restart a trial whose process or Ray worker died up to N times, from its newest "
                   "checkpoint (default 2)")
    t.add_argument("--quiet", action="store_true", help="no progress display or log lines (batch jobs)")

    c = sub.add_parser("check", help="validate a pipeline and build every stage, run nothing")
    c.add_argument("pipeline")
    overrides(c)

    s = sub.add_parser("stages", help="list every stage kind with its keys, defaults and docs")
    s.add_argument("slot", nargs="?", help="only this slot (e.g. updater) or kind (e.g. ppo)")

    e = sub.add_parser("eval", help="evaluate a run's policy (newest checkpoint)")
    e.add_argument("run_dir")
    e.add_argument("--episodes", type=int, default=None, help="episodes (default: the pipeline's [evaluator] episodes)")
    e.add_argument("--checkpoint", metavar="FILE", help="evaluate this checkpoint instead of the newest")
    e.add_argument("--sample", action="store_true", help="sample actions instead of taking the most likely")

    pl = sub.add_parser("plot", help="learning curves of runs (seeds as mean ± std bands) to a PNG",
                        description="Draw a metric of runs against env steps.  Runs of the same pipeline "
                        "with different seeds are drawn as their mean with a ± std band.")
    pl.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                    help="run directories, or directories holding runs (a sweep directory, runs/)")
    pl.add_argument("--metric", help="a metrics.csv column (default: eval_return if evaluated, else train_return)")
    pl.add_argument("--out", metavar="FILE.png", help="default: <metric>.png in the one directory given, "
                    "else in the current directory")
    pl.add_argument("--smooth", type=int, default=1, metavar="N", help="draw each run's trailing mean over "
                    "its last N points (default 1: the points as logged)")

    r = sub.add_parser("render", help="film a run's policy (deterministic) to a .gif or .mp4",
                       description="Run a checkpoint's policy deterministically in an env that renders "
                       "rgb_array frames, write a video and print the episode returns.")
    r.add_argument("run_dir")
    r.add_argument("--episodes", type=int, default=1, help="episodes to film (default 1)")
    r.add_argument("--out", metavar="FILE", help="a .gif or .mp4 (default: RUN_DIR/render.mp4 when "
                   "imageio-ffmpeg is installed, else RUN_DIR/render.gif)")
    r.add_argument("--checkpoint", metavar="FILE", help="film this checkpoint instead of the newest")
    r.add_argument("--fps", type=int, default=None, help="frames per second (default: the env's, else 10)")
    x = sub.add_parser("export", help="a run's actors as ONNX or TorchScript files plus policy.json",
                       description="Export every agent's actor (deterministic action in the env's action "
                       "space; see docs/export.md) with a policy.json manifest.")
    x.add_argument("run_dir")
    x.add_argument("--format", required=True, choices=("onnx", "torchscript"))
    x.add_argument("--out", required=True, metavar="DIR", help="folder for agent<i>.onnx|.pt and policy.json")
    x.add_argument("--checkpoint", metavar="FILE", help="export this checkpoint instead of the newest")
    x.add_argument("--with-distribution", action="store_true",
                   help="also output the action distribution's parameters")
    return p


def cmd_train(args: argparse.Namespace, console: Console) -> int:
    from harl.run.lifecycle import resume_run, start_run
    from harl.sweep.plan import RECORD

    sweep = args.seeds or args.grid or (args.resume and (Path(args.resume) / RECORD).is_file())
    if args.jobs != 1 and not sweep:
        raise HarlError("--jobs only goes with --seeds or --grid (it runs several trials at once)")
    if sweep:
        return _train_sweep(args, console)
    if args.ray or args.storage:
        raise HarlError(f"--{'ray' if args.ray else 'storage'} runs a sweep's trials: it goes with --seeds or --grid")
    if args.resume:
        if args.pipeline or args.overrides or args.run_dir:
            raise HarlError("harl train --resume RUN_DIR takes no pipeline file, --set or --run-dir: "
                            f"a run continues in its own directory with its own pipeline.toml "
                            f"(edit {Path(args.resume) / 'pipeline.toml'} to change it, e.g. to raise "
                            "run.total_env_steps)")
        trainer = resume_run(Path(args.resume), Path(args.checkpoint) if args.checkpoint else None)
        c = trainer.counters
        if c.iteration >= trainer.total_iterations:
            trainer.stages.close()
            console.print(
                f"{trainer.run_dir}: nothing to do, the run already finished ({c.iteration} iterations, "
                f"{c.env_steps:,} env steps, run.total_env_steps = {trainer.spec.run.total_env_steps:,}); "
                f"to train longer, raise total_env_steps in {trainer.run_dir / 'pipeline.toml'} "
                "and resume again", highlight=False)
            return 0
        console.print(f"resuming {trainer.run_dir} at iteration {c.iteration} "
                      f"({c.env_steps:,} env steps)", highlight=False)
    else:
        if not args.pipeline:
            raise HarlError("harl train needs a pipeline file (e.g. harl train "
                            "pipelines/happo_mpe_spread.toml) or --resume RUN_DIR")
        if args.checkpoint:
            raise HarlError("--checkpoint only goes with --resume RUN_DIR")
        if args.run_dir and Path(args.run_dir).exists() and not Path(args.run_dir).is_dir():
            raise HarlError(f"--run-dir {args.run_dir}: is a file, not a directory; pass a new directory "
                            "(or an empty one) for the run")
        if args.run_dir and (Path(args.run_dir) / "pipeline.toml").exists():
            raise HarlError(f"--run-dir {args.run_dir}: already holds a run (it has a pipeline.toml); "
                            f"continue it with harl train --resume {args.run_dir}, or pick a new directory")
        trainer, notes = start_run(args.pipeline, args.overrides,
                                   Path(args.run_dir) if args.run_dir else None)
        for note in notes:
            console.print(f"note: {note}", highlight=False)
        console.print(f"run directory: {trainer.run_dir}", highlight=False)
    try:
        result = trainer.train(quiet=args.quiet)
    finally:
        with shielded(lambda text: console.print(text, highlight=False)):
            trainer.stages.close()
    c = result.counters
    line = (f"{'stopped' if result.interrupted else 'finished'}: {c.iteration} iterations, "
            f"{c.env_steps:,} env steps in {c.wall_time:.0f} s")
    if result.last_eval is not None:
        line += f"; last evaluation return {result.last_eval.mean_return:.2f}"
    console.print(line + f"\nresume with: harl train --resume {result.run_dir}", highlight=False)
    return exit_status(result.signum or signal.SIGINT) if result.interrupted else 0


def _train_sweep(args: argparse.Namespace, console: Console) -> int:
    from harl.sweep.plan import Request, Sweep
    from harl.sweep.ray_backend import import_ray, ray_address
    from harl.sweep.report import exit_code, follow_ups, summary_table

    address = ray_address(args.ray)
    if args.jobs < 1 or args.max_retries < 0:
        raise HarlError(f"--{'jobs' if args.jobs < 1 else 'max-retries'}: expected a "
                        f"{'positive' if args.jobs < 1 else 'non-negative'} integer, got "
                        f"{args.jobs if args.jobs < 1 else args.max_retries}")
    if address:
        import_ray()  # a missing extra before any directory is made
    if address and args.jobs != 1:
        raise HarlError("--jobs is for local processes; on Ray the cluster's free CPUs decide how many "
                        "trials run at once")
    if args.checkpoint:
        raise HarlError("--checkpoint goes with --resume RUN_DIR of one run; a sweep resumes each trial "
                        "from its newest checkpoint")
    request = Request.parse(args.pipeline, args.overrides, args.seeds, args.grid) if args.pipeline else None
    if args.resume:
        if args.run_dir or args.storage:
            raise HarlError("--resume SWEEP_DIR continues a sweep in its own directory: drop --run-dir/--storage")
        sweep = Sweep.resume(Path(args.resume), request)
    elif request is None:
        raise HarlError("harl train --seeds/--grid needs a pipeline file, e.g. harl train "
                        "pipelines/happo_mpe_spread.toml --seeds 1,2,3")
    else:
        sweep = Sweep.new(request, Path(args.run_dir) if args.run_dir else None,
                          Path(args.storage) if args.storage else None)
    sweep.run(args.jobs, address, args.max_retries, args.quiet, console)
    console.print(summary_table(sweep.states, f"{sweep.sweep_dir}: {len(sweep.states)} trials"))
    for line in follow_ups(sweep.sweep_dir, sweep.states):
        console.print(line, highlight=False, markup=False)
    console.print(f"curves: harl plot {sweep.sweep_dir}", highlight=False)
    return exit_code(sweep.states)


def cmd_check(args: argparse.Namespace, console: Console) -> int:
    import attrs

    from harl import registry
    from harl.buffers.replay import ReplayBuffer
    from harl.compose import build_stages
    from harl.config.loading import load_pipeline

    spec, notes = load_pipeline(args.pipeline, args.overrides)
    for note in notes:
        console.print(f"note: {note}", highlight=False)
    stages = build_stages(spec, args.pipeline)
    try:
        table = Table(title=f"{args.pipeline}: valid")
        table.add_column("slot")
        table.add_column("kind")
        table.add_column("built")
        venv = stages.venv
        kind = registry.kind_name
        settings = {slot: ", ".join(f"{k}={v}" for k, v in attrs.asdict(config, recurse=False).items()
                                    if k not in ("kind", "objective"))[:60]
                    for slot, config in (("buffer", spec.buffer), ("returns", spec.returns))}
        first_env = next(iter(getattr(stages.eval_venv, "envs", ())), None)
        state = getattr(first_env, "summary", f"state {tuple(venv.state_space.shape)}")  # an env's own words
        table.add_row("env", kind(spec.env), f"{venv.n_agents} agents, {venv.n_envs} envs, {state}")
        table.add_row("collector", kind(spec.collector), f"{stages.collector.steps_per_iteration:,} env steps per iteration")
        memory = _replay_memory(spec, venv) if isinstance(stages.buffer, ReplayBuffer) else _rollout_memory(stages)
        table.add_row("buffer", kind(spec.buffer), memory or settings["buffer"] or type(stages.buffer).__name__)
        table.add_row("returns", kind(spec.returns), settings["returns"])
        table.add_row("critic", kind(spec.critic), f"{_encoders(stages.critic)} encoder, "
                      f"{sum(p.numel() for p in stages.critic.parameters()):,} parameters")
        table.add_row("updater", kind(spec.updater), f"objective {kind(spec.updater.objective)}")
        n_actor = sum(p.numel() for p in stages.policy.parameters())
        table.add_row("policy", _encoders(stages.policy), f"{len(stages.policy.actors)} actor(s), {n_actor:,} parameters, device {stages.device}")
        table.add_row("evaluator", "-", f"{spec.evaluator.episodes} episodes every {spec.evaluator.every_iterations} iterations")
        console.print(table)
    finally:
        stages.close()
    return 0


def _encoders(module: Any) -> str:
    """What reads the inputs of ``module``'s networks: cnn (an image encoder is among them) or mlp."""
    from harl.nets.cnn import CNNBase, PlainCNN

    return "cnn" if any(isinstance(m, (CNNBase, PlainCNN)) for m in module.modules()) else "mlp"


def _rollout_memory(stages: Any) -> str:
    """The rollout buffer's row of ``harl check``: bytes per env step (uint8 images count 1 byte a value)."""
    from harl.sizes import rollout_bytes_per_step

    venv, buffer = stages.venv, stages.buffer
    if not hasattr(buffer, "fp_state"):
        return ""
    per = rollout_bytes_per_step(venv.observation_spaces, venv.action_spaces, int(np.prod(venv.state_space.shape)),
                                 buffer.fp_state, stages.policy.hidden_size, stages.critic.hidden_size,
                                 venv.state_space)
    return f"{per:,} bytes per env step, {buffer.length} x {buffer.n_envs} steps"


def _replay_memory(spec: Any, venv: Any) -> str:
    """The replay buffer's row of ``harl check``: capacity, batch and memory once full."""
    from harl.sizes import human, replay_bytes_per_transition

    per = replay_bytes_per_transition(venv.observation_spaces, venv.action_spaces,
                                      int(np.prod(venv.state_space.shape)), venv.state_space)
    capacity = spec.buffer.capacity
    return (f"capacity {capacity:,}, batch {spec.buffer.batch_size}; memory when full: {per:,} bytes per "
            f"transition x {capacity:,} = {human(per * capacity)}")


def cmd_stages(args: argparse.Namespace, console: Console) -> int:
    from harl.config.dump import describe_stages

    rows = describe_stages()
    if args.slot:
        rows = [r for r in rows if args.slot in (r[0], r[1]) or r[0].startswith(args.slot + ".")]
        if not rows:
            names = sorted({r[0] for r in describe_stages()} | {r[1] for r in describe_stages() if r[1]})
            raise HarlError(f"harl stages: no slot or kind named {args.slot!r}; known: {', '.join(names)}")
    for slot, kind, cls, keys in rows:
        title = f"[{slot}]" + (f' kind = "{kind}"' if kind else "")
        doc = _summary(cls.__doc__ or "", title)
        if not keys:
            console.print(escape(title) + (f": {escape(doc)}" if doc else "") + " (no keys besides kind)",
                          highlight=False)
            continue
        table = Table(title=escape(title), title_justify="left", caption=escape(doc) or None,
                      caption_justify="left")
        table.add_column("key")
        table.add_column("type")
        table.add_column("default")
        table.add_column("meaning")
        for row in keys:
            table.add_row(*(escape(cell) for cell in row))
        console.print(table)
    return 0


def _summary(doc: str, title: str) -> str:
    """A config class's docstring as one caption line, without the table name it repeats."""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split()).replace("``", "")
    if paragraph.startswith(title):
        paragraph = paragraph[len(title):].lstrip(":. ")
    return paragraph[:1].upper() + paragraph[1:]


def cmd_eval(args: argparse.Namespace, console: Console) -> int:
    import attrs

    from harl.compose import build_stages
    from harl.run.checkpoint import latest_checkpoint, load_checkpoint
    from harl.run.lifecycle import restore, spec_of_run

    run_dir = Path(args.run_dir)
    spec, _ = spec_of_run(run_dir)
    if args.episodes is not None and args.episodes < 1:
        raise HarlError(f"--episodes: expected a positive integer, got {args.episodes}")
    path = Path(args.checkpoint) if args.checkpoint else latest_checkpoint(run_dir)
    state = load_checkpoint(path)
    spec = attrs.evolve(spec, evaluator=attrs.evolve(spec.evaluator, deterministic=not args.sample))
    stages = build_stages(spec, str(run_dir / "pipeline.toml"))
    try:
        restore(stages, state, networks_only=True)  # a fresh, seeded evaluation of the networks
        stats = stages.evaluator.evaluate(args.episodes)
    finally:
        stages.close()
    console.print(f"{path}: {stats.episodes} episodes, return {stats.mean_return:.3f} ± "
                  f"{stats.std_return:.3f}, length {stats.mean_length:.1f}", highlight=False)
    for name, value in stats.metrics.items():
        console.print(f"  {name}: {value:.4g}", highlight=False)
    return 0


def cmd_plot(args: argparse.Namespace, console: Console) -> int:
    from harl.plot import plot

    out, groups = plot(args.run_dirs, args.metric, Path(args.out) if args.out else None, args.smooth)
    runs = sum(len(g.runs) for g in groups)
    console.print(f"wrote {out}: {runs} run{'s' if runs > 1 else ''} in {len(groups)} "
                  f"curve{'s' if len(groups) > 1 else ''}", highlight=False)
    for group in groups:
        console.print(f"  {group.label}", highlight=False, markup=False)
    return 0


def cmd_render(args: argparse.Namespace, console: Console) -> int:
    from harl.render import render_run

    if args.fps is not None and args.fps < 1:
        raise HarlError(f"--fps: expected a positive integer, got {args.fps}")
    result = render_run(Path(args.run_dir), Path(args.checkpoint) if args.checkpoint else None,
                        args.episodes, Path(args.out) if args.out else None, args.fps)
    for k, (ret, length) in enumerate(zip(result.returns, result.lengths)):
        console.print(f"episode {k}: return {ret:.3f}, length {length}", highlight=False)
    console.print(f"wrote {result.path}: {result.frames} frames", highlight=False)
    return 0


def cmd_export(args: argparse.Namespace, console: Console) -> int:
    from harl.export import export_run

    path = export_run(Path(args.run_dir), Path(args.checkpoint) if args.checkpoint else None,
                      args.format, Path(args.out), args.with_distribution)
    console.print(f"wrote {path} and the agents' {args.format} files beside it", highlight=False)
    return 0


COMMANDS = {"train": cmd_train, "check": cmd_check, "stages": cmd_stages, "eval": cmd_eval,
            "plot": cmd_plot, "render": cmd_render, "export": cmd_export}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    console = Console(soft_wrap=True)  # never break a path that the user will copy
    if args.command is None:
        console.print(command_list(parser), highlight=False, markup=False)
        return 0
    try:
        return COMMANDS[args.command](args, console)
    except HarlError as exc:
        if args.debug:
            traceback.print_exc()
        Console(stderr=True).print(f"harl: {exc}", highlight=False, markup=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        Console(stderr=True).print("harl: interrupted", highlight=False)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
