"""The ``harl compare`` and ``harl export-results`` commands: their options and handlers, kept
here so the CLI module only registers them."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harl.errors import HarlError

COMPARE_HELP = "IQM, mean, median, optimality gap with bootstrap CIs, P(improvement), profiles (docs/compare.md)"


def add_compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="run directories, or directories holding runs (sweeps, runs/)")
    p.add_argument("--out", metavar="DIR", help="folder for the tables and figures (default: compare/ in the "
                   "one directory given, else in the folder that holds them all)")
    p.add_argument("--bounds", action="append", default=[], metavar="TASK=RANDOM,BEST",
                   help="normalise TASK's returns to (return - RANDOM) / (BEST - RANDOM) (repeatable; TASK or "
                   "env/task), e.g. --bounds simple_spread=-180,-60")
    p.add_argument("--bounds-file", metavar="FILE", help="a TOML or JSON file: TASK = {random = R, best = B}")
    p.add_argument("--label", action="append", default=[], metavar="DIR=NAME",
                   help="the runs in DIR (a run or a sweep) are algorithm NAME (repeatable)")
    p.add_argument("--split-by", action="append", default=[], metavar="KEY",
                   help="a pipeline key whose value is part of the algorithm (repeatable), e.g. "
                   "--split-by updater.objective.lr")
    p.add_argument("--reps", type=int, default=2000, metavar="N", help="bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")
    p.add_argument("--no-figures", action="store_true", help="tables only, no PNG files")


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="run directories, or directories holding runs (sweeps, runs/)")
    p.add_argument("--out", required=True, metavar="FILE.json", help="the marl-eval JSON file to write")
    p.add_argument("--label", action="append", default=[], metavar="DIR=NAME",
                   help="the runs in DIR (a run or a sweep) are algorithm NAME (repeatable)")
    p.add_argument("--split-by", action="append", default=[], metavar="KEY",
                   help="a pipeline key whose value is part of the algorithm (repeatable)")
    p.add_argument("--missing-absolute", choices=("last", "omit"), default="last",
                   help="a run without absolute_metric.json: its last evaluation stands in (last, the "
                   "default) or it has no absolute_metrics step (omit)")


def _labels(specs: list[str]) -> dict[str, str]:
    out = {}
    for spec in specs:
        folder, sep, name = spec.partition("=")
        if not sep or not folder or not name:
            raise HarlError(f"--label {spec}: expected DIR=NAME, e.g. --label runs/ablation=HAPPO-no-clip")
        out[folder] = name
    return out


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    from harl.compare import compare, load_bounds, parse_bounds, show

    bounds = load_bounds(args.bounds_file) if args.bounds_file else {}
    bounds.update(parse_bounds(args.bounds))
    result = compare(args.run_dirs, Path(args.out) if args.out else None, labels=_labels(args.label),
                     split_by=args.split_by, bounds=bounds, reps=args.reps, seed=args.seed,
                     draw=not args.no_figures)
    show(result, console)
    return 0


def cmd_export_results(args: argparse.Namespace, console: Console) -> int:
    from harl.compare import export_results

    result = export_results(args.run_dirs, args.out, labels=_labels(args.label), split_by=args.split_by,
                            missing_absolute=args.missing_absolute)
    runs = sum(len(r) for tasks in result.data.values() for algs in tasks.values() for r in algs.values())
    console.print(f"wrote {result.path}: {runs} runs in marl-eval's JSON", highlight=False, markup=False)
    for note in result.notes:
        console.print(f"note: {note}", highlight=False, markup=False)
    return 0
