"""The rules of ``harl train``'s flags (which go together) and its sweep driver.

Kept beside the CLI, not in it: ``harl.cli`` is argument parsing and dispatch only.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from rich.console import Console

from harl.errors import HarlError


def train_mode(args: argparse.Namespace) -> str:
    """``sweep``, ``resume`` or ``start``; a ``HarlError`` for flags that do not go together."""
    from harl.sweep.plan import RECORD

    sweep = args.seeds or args.grid or (args.resume and (Path(args.resume) / RECORD).is_file())
    if args.jobs != 1 and not sweep:
        raise HarlError("--jobs only goes with --seeds or --grid (it runs several trials at once)")
    if args.vectorize and not sweep:
        raise HarlError("--vectorize goes with --seeds (it trains the seeds as one population), or with "
                        "--resume SWEEP_DIR of such a sweep")
    if sweep:
        return "sweep"
    if args.ray or args.storage:
        raise HarlError(f"--{'ray' if args.ray else 'storage'} runs a sweep's trials: it goes with --seeds or --grid")
    if args.resume:
        if args.pipeline or args.run_dir:
            raise HarlError("harl train --resume RUN_DIR takes no pipeline file or --run-dir: a run continues "
                            "in its own directory with its own pipeline.toml (--set changes keys that change "
                            "no shapes, e.g. --set run.total_env_steps=2_000_000 to train longer)")
        return "resume"
    if not args.pipeline:
        raise HarlError("harl train needs a pipeline file (e.g. harl train "
                        "pipelines/happo_mpe_spread.toml) or --resume RUN_DIR")
    if args.checkpoint:
        raise HarlError("--checkpoint only goes with --resume RUN_DIR")
    return "start"


def train_sweep(args: argparse.Namespace, console: Console) -> int:
    """``harl train --seeds/--grid`` (or ``--resume SWEEP_DIR``): run the trials, print the summary."""
    from harl.rundir.lock import take
    from harl.sweep.plan import Request, Sweep
    from harl.sweep.ray_backend import import_ray, ray_address
    from harl.sweep.report import exit_code, follow_ups, summary_table

    address = ray_address(args.ray)
    if args.jobs < 1 or args.max_retries < 0:
        raise HarlError(f"--{'jobs' if args.jobs < 1 else 'max-retries'}: expected a "
                        f"{'positive' if args.jobs < 1 else 'non-negative'} integer, got "
                        f"{args.jobs if args.jobs < 1 else args.max_retries}")
    if args.vectorize and (address or args.grid):
        flag = "--ray" if address else "--grid"
        raise HarlError(f"--vectorize trains the seeds of one pipeline as one population in this process; "
                        f"{flag} does not go with it (drop one of the two)")
    if address and args.jobs != 1:  # flags that do not go together before a missing extra
        raise HarlError("--jobs is for local processes; on Ray the cluster's free CPUs decide how many "
                        "trials run at once")
    if address:
        import_ray()  # a missing extra before any directory is made
    if args.checkpoint:
        raise HarlError("--checkpoint goes with --resume RUN_DIR of one run; a sweep resumes each trial "
                        "from its newest checkpoint")
    request = Request.parse(args.pipeline, args.overrides, args.seeds, args.grid) if args.pipeline else None
    with contextlib.ExitStack() as held:  # one driver per sweep directory, for the sweep's life
        if args.resume:
            if args.run_dir or args.storage:
                raise HarlError("--resume SWEEP_DIR continues a sweep in its own directory: drop --run-dir/--storage")
            held.enter_context(take(Path(args.resume), "sweep"))  # before anything is read or written
            sweep = Sweep.resume(Path(args.resume), request)
        elif request is None:
            raise HarlError("harl train --seeds/--grid needs a pipeline file, e.g. harl train "
                            "pipelines/happo_mpe_spread.toml --seeds 1,2,3")
        else:
            sweep = Sweep.new(request, Path(args.run_dir) if args.run_dir else None,
                              Path(args.storage) if args.storage else None, vectorize=args.vectorize)
            held.enter_context(take(sweep.sweep_dir, "sweep"))
        sweep.run(args.jobs, address, args.max_retries, args.quiet, console,
                  vectorize=args.vectorize or sweep.vectorize)
    console.print(summary_table(sweep.states, f"{sweep.sweep_dir}: {len(sweep.states)} trials"))
    for line in follow_ups(sweep.sweep_dir, sweep.states):
        console.print(line, highlight=False, markup=False)
    console.print(f"curves: harl plot {sweep.sweep_dir}", highlight=False)
    return exit_code(sweep.states)


def opponent_overrides(pipeline: str | None, opponent: str) -> list[str]:
    """``--opponent RUN_DIR``: ``teams.NAME.checkpoint=RUN_DIR`` for the pipeline's frozen team."""
    from harl.config.loading import read_toml
    from harl.errors import ConfigError

    if not pipeline:
        raise ConfigError("--opponent needs a pipeline file with a frozen team (harl train PIPELINE --opponent RUN_DIR)")
    teams = read_toml(Path(pipeline)).get("teams", {})
    frozen = [name for name, table in teams.items() if isinstance(table, dict) and table.get("role") == "frozen"]
    if len(frozen) != 1:
        found = ", ".join(frozen) if frozen else "no team has role = \"frozen\""
        raise ConfigError(f"{pipeline}: --opponent {opponent}: --opponent plays the one frozen team of "
                          f"[teams], but there are {len(frozen)} ({found}); give one team "
                          'role = "frozen", or set each with --set teams.NAME.checkpoint=RUN_DIR')
    if not Path(opponent).exists():
        raise ConfigError(f"--opponent {opponent}: no such run directory; name a folder harl train wrote "
                          "(runs/<run-dir>)")
    return [f"teams.{frozen[0]}.checkpoint={opponent}"]
