"""``harl``: train (one seed or a sweep), resume, check, evaluate, plot and render runs;
list stage kinds.

Argument parsing (``harl.cli_help``) and dispatch only: each command is a short function
over the public API (``harl.api``).  User errors (a bad pipeline, run directory,
checkpoint, missing package) print one paragraph and exit with status 2; ``--debug``
shows the traceback too.
"""

from __future__ import annotations

import argparse
import sys
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harl import api, cli_rules
from harl.cli_help import command_list, parser
from harl.compare.command import cmd_compare, cmd_export_results
from harl.errors import HarlDeprecationWarning, HarlError


def cmd_train(args: argparse.Namespace, console: Console) -> int:
    def say(text: str) -> None:
        console.print(text, highlight=False)

    if getattr(args, "opponent", None):
        args.overrides = [*cli_rules.opponent_overrides(args.pipeline, args.opponent), *args.overrides]
    mode = cli_rules.train_mode(args)
    if mode == "sweep":
        return cli_rules.train_sweep(args, console)
    if mode == "resume":
        trainer = api.start_resume(args.resume, args.checkpoint, overrides=args.overrides)
        c = trainer.counters
        if trainer.finished:
            api.close(trainer, say)
            say(f"{trainer.run_dir}: nothing to do, the run already finished ({c.iteration} iterations, "
                f"{c.env_steps:,} env steps, run.total_env_steps = {trainer.spec.run.total_env_steps:,}); "
                f"to train longer: harl train --resume {trainer.run_dir} --set run.total_env_steps=N")
            return 0
        say(f"resuming {trainer.run_dir} at iteration {c.iteration} ({c.env_steps:,} env steps)")
    else:
        trainer = api.start(args.pipeline, args.overrides, args.run_dir)
        for note in api.pipeline_notes(trainer.spec):
            say(f"note: {note}")
        say(f"run directory: {trainer.run_dir}")
    for note in getattr(trainer.stages, "notes", ()):
        say(f"note: {note}")
    try:
        result = trainer.train(quiet=args.quiet)
    finally:
        api.close(trainer, say)
    absolute = api.finish(trainer, result)
    if absolute is not None:
        say(f"absolute metric: {absolute['mean_return']:.3f} over {absolute['episodes']} episodes of "
            f"{absolute['checkpoint']} (absolute_metric.json)")
    width = console.width if console.is_terminal else sys.maxsize  # a log or a pipe: one line each
    for text in api.summary_lines(result, width, resumable=trainer.newest_checkpoint() is not None):
        say(text)
    return api.exit_status(result)


def cmd_check(args: argparse.Namespace, console: Console) -> int:
    spec = api.load_pipeline(args.pipeline, args.overrides)
    for note in api.pipeline_notes(spec):
        console.print(f"note: {note}", highlight=False)
    table = Table(title=f"{args.pipeline}: valid")
    for column in ("slot", "kind", "built"):
        table.add_column(column)
    with api.build(spec, source=args.pipeline) as stages:
        for row in stages.describe():
            table.add_row(*row)
    for note in stages.notes:
        console.print(f"note: {note}", highlight=False)
    console.print(table)
    return 0


def cmd_stages(args: argparse.Namespace, console: Console) -> int:
    if args.slot in (None, "families"):  # what the collector's kind chooses: its family's stages
        table = Table(title="families (a pipeline's is its collector kind's)", title_justify="left")
        families = api.families()
        table.add_column("family", no_wrap=True, min_width=max(len(name) for name, _ in families))  # never cut
        for column in ("what it is", "algorithms"):
            table.add_column(column, overflow="fold")
        for name, doc in families:
            named = [a.name for a in api.algorithms(name)]
            table.add_row(escape(name), escape(doc), escape(", ".join(named) or "-"))
        console.print(table)
        if args.slot == "families":
            return 0
    for slot, kind, cls, keys in api.stage_kinds(args.slot):
        title = api.stage_title(slot, kind)
        doc = _summary(cls.__doc__ or "", title)
        if not keys:
            console.print(escape(title) + (f": {escape(doc)}" if doc else "") + " (no keys besides kind)",
                          highlight=False)
            continue
        table = Table(title=escape(title), title_justify="left", caption=escape(doc) or None,
                      caption_justify="left")
        for column in ("key", "type", "default", "meaning"):
            table.add_column(column)
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


def _show_match(match: Any, console: Console) -> None:
    console.print(f"{match.run} ({match.team}) against {match.opponent}: {match.episodes} episodes; "
                  f"win {match.win.show()}, loss {match.loss.show()}, draw {match.draw.show()}", highlight=False)
    for name, value in match.returns.items():
        console.print(f"  return of {name}: {value.show()}", highlight=False)
    for name, value in match.metrics.items():
        console.print(f"  {name}: {value.show()}", highlight=False)


def cmd_crossplay(args: argparse.Namespace, console: Console) -> int:
    table = api.crossplay(args.run_dirs, args.episodes, args.team, api.parse_seats(args.seat))
    grid = Table(title="win rate of the row's team against the column's (95% interval)")
    grid.add_column("run")
    for run in args.run_dirs:
        grid.add_column(Path(run).name)
    for run, row in zip(args.run_dirs, table):
        grid.add_row(Path(run).name, *(m.win.show(2) for m in row))
    console.print(grid)
    return 0


def cmd_eval(args: argparse.Namespace, console: Console) -> int:
    if args.against:
        _show_match(api.play(args.run_dir, args.against, args.episodes, args.team, args.checkpoint,
                             deterministic=not args.sample, seats=api.parse_seats(args.seat)), console)
        return 0
    api.check_eval_team(args.run_dir, args.team, api.parse_seats(args.seat))
    path, stats = api.evaluate_run(args.run_dir, args.episodes, args.checkpoint, deterministic=not args.sample)
    # a teams run: each team's return, not their mean
    shown = api.team_returns(stats.metrics) or f"return {stats.mean_return:.3f} ± {stats.std_return:.3f}"
    console.print(f"{path}: {stats.episodes} episodes, {shown}, length {stats.mean_length:.1f}", highlight=False)
    for name, value in stats.metrics.items():
        console.print(f"  {name}: {value:.4g}", highlight=False)
    logged = api.logged_evaluation(args.run_dir, path)
    if logged is not None:  # why the two numbers of one checkpoint differ
        console.print(f"the run's own evaluation of iteration {logged['iteration']} read {logged['eval_return']:.3f}: "
                      "other episodes (a run's evaluations continue their envs' seeds; this one starts them "
                      "afresh), so the two differ by sampling", highlight=False)
    return 0


def cmd_plot(args: argparse.Namespace, console: Console) -> int:
    out, groups = api.plot_runs(args.run_dirs, args.metric, args.out, args.smooth)
    runs = sum(len(g.runs) for g in groups)
    console.print(f"wrote {out}: {runs} run{'s' if runs > 1 else ''} in {len(groups)} "
                  f"curve{'s' if len(groups) > 1 else ''}", highlight=False)
    for group in groups:
        console.print(f"  {group.label}", highlight=False, markup=False)
    return 0


def cmd_render(args: argparse.Namespace, console: Console) -> int:
    result = api.render(args.run_dir, args.episodes, args.out, args.checkpoint, args.fps, args.format)
    for k, (ret, length) in enumerate(zip(result.returns, result.lengths)):
        console.print(f"episode {k}: return {ret:.3f}, length {length}", highlight=False)
    console.print(f"wrote {result.path}: {result.frames} frames", highlight=False)
    return 0


def cmd_export(args: argparse.Namespace, console: Console) -> int:
    path = api.export(args.run_dir, args.format, args.out, args.checkpoint, args.with_distribution, args.team)
    console.print(f"wrote {path} and the agents' {args.format} files beside it", highlight=False)
    return 0


def cmd_convert(args: argparse.Namespace, console: Console) -> int:
    conversion = api.convert_harl_config(args.config)
    for note in conversion.notes:
        console.print(f"note: {note}", highlight=False, markup=False)
    text = conversion.to_toml()
    if args.out is None:
        console.print(text, highlight=False, markup=False, end="")
        return 0
    api.write_text(args.out, text, "the pipeline")
    console.print(f"wrote {args.out}: harl train {args.out}", highlight=False)
    return 0


def cmd_tune(args: argparse.Namespace, console: Console) -> int:
    def say(text: str) -> None:
        console.print(text, highlight=False, markup=False)

    final = None if args.final_seeds is None else [] if args.final_seeds == "none" else args.final_seeds
    result = api.tune(args.pipeline, args.space, args.trials, timeout=args.timeout, seeds=args.seeds,
                      jobs=args.jobs if not (args.ray and args.jobs == 1) else 0, ray=args.ray,
                      storage=args.storage, vectorize=args.vectorize, overrides=args.overrides,
                      run_dir=args.run_dir, resume=args.resume, final_seeds=final, quiet=args.quiet, say=say)
    if result.trials:
        console.print(result.table())
    for path in result.files:
        say(f"wrote {path}")
    return int(result.exit_status)


def cmd_suite(args: argparse.Namespace, console: Console) -> int:
    if args.suite == "report":
        page, current = api.suite_report(args.results or "benchmarks/results", args.out or "docs/results.md",
                                         check=args.check)
        if args.check:
            console.print(f"{page}: {'up to date' if current else 'differs from the results; run harl suite report'}",
                          highlight=False, markup=False)
            return 0 if current else 1
        console.print(f"wrote {page}" + (" (unchanged)" if current else ""), highlight=False, markup=False)
        return 0
    if args.results is not None:
        raise HarlError(f"harl suite takes one suite file, not {args.suite} and {args.results} (harl suite report "
                        "RESULTS makes the results page)")
    result = api.suite(args.suite, args.out, jobs=args.jobs, ray=args.ray, resume=args.resume,
                       max_retries=args.max_retries, reps=args.reps, quiet=args.quiet, console=console)
    console.print(result.table())  # its notes too, broken at spaces on a terminal
    console.print(f"wrote {', '.join(str(p.relative_to(result.suite_dir)) for p in result.files)} in "
                  f"{result.suite_dir}", highlight=False, markup=False)
    if result.exit_status > 128:  # stopped by a signal: 130 Ctrl-C, 143 SIGTERM
        console.print(f"continue the suite with: harl suite --resume {result.suite_dir}", highlight=False,
                      markup=False)
    for failure in result.failures:
        Console(stderr=True).print(f"harl: threshold failed: {failure}", highlight=False, markup=False,
                                   soft_wrap=True)
    return int(result.exit_status)


COMMANDS = {"train": cmd_train, "check": cmd_check, "stages": cmd_stages, "eval": cmd_eval,
            "plot": cmd_plot, "render": cmd_render, "export": cmd_export, "convert": cmd_convert,
            "compare": cmd_compare, "export-results": cmd_export_results, "tune": cmd_tune,
            "crossplay": cmd_crossplay, "suite": cmd_suite}


def main(argv: Sequence[str] | None = None) -> int:
    # Python hides a DeprecationWarning raised inside a library; the old names a pipeline still
    # uses ([logging] mlflow_experiment, ...) are the user's to change, so the command shows them.
    warnings.simplefilter("default", HarlDeprecationWarning)
    p = parser()
    args = p.parse_args(argv)
    console = Console(soft_wrap=True)  # never break a path that the user will copy
    if args.command is None:
        console.print(command_list(p), highlight=False, markup=False)
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
        return api.interrupted_status()  # 130 for Ctrl-C, 143 for SIGTERM: the first stop signal
    finally:
        if argv is None:  # the process's own command line: a late Ctrl-C cannot turn its status into -2
            api.ignore_stops_until_exit()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
