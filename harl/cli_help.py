"""``harl``'s arguments and what it says about itself: the parser, its version, the command
list a bare ``harl`` prints, and the examples under ``harl train --help``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from harl.compare.command import COMPARE_HELP, add_compare_arguments, add_export_arguments
from harl.suite.command import add_suite_arguments

TRAIN_EXAMPLES = """\
examples:
  harl train pipelines/happo_mpe_spread.toml                       # HAPPO on MPE simple_spread
  harl train pipelines/happo_mpe_spread.toml --set updater.kind=simultaneous --set run.seed=3
  harl train --resume runs/happo-mpe-spread-s1-20261130-101500     # continue an interrupted run
"""


EXAMPLES = {
    "check": """\
examples:
  harl check pipelines/happo_mpe_spread.toml                       # validate and build every stage
  harl check pipelines/happo_mpe_spread.toml --set updater.objective.kind=trpo
""",
    "stages": """\
examples:
  harl stages                       # every stage kind of every slot
  harl stages updater               # the kinds of one slot
  harl stages ppo                   # one kind's keys, defaults and docs
""",
    "eval": """\
examples:
  harl eval runs/happo-mpe-spread-s1-20261130-101500 --episodes 20
  harl eval runs/happo-mpe-spread-s1-20261130-101500 --checkpoint runs/happo-mpe-spread-s1-20261130-101500/checkpoints/iter_0000100.pt
  harl eval runs/tag-s1 --against runs/tag-s2 --team predators    # teams: one run's predators against another's prey
  harl eval runs/tag-s1 --against scripted:random                 # ... against a script, or --against pool
""",
    "crossplay": """\
examples:
  harl crossplay runs/tag-s1 runs/tag-s2 runs/tag-s3 --team predators --episodes 40
  harl crossplay runs/sp-s1 runs/sp-s2        # self-play runs: each learner flies the other's pool seat
""",
    "plot": """\
examples:
  harl plot runs/happo-mpe-spread-sweep-20261130-101500             # seeds as mean ± std (pip install "harl[plot]")
  harl plot runs/happo-sweep runs/mappo-sweep --metric train_return --smooth 5 --out curves.png
""",
    "render": """\
examples:
  harl render runs/happo-mpe-spread-s1-20261130-101500 --episodes 3 --out spread.gif   # pip install "harl[video]"
  harl render runs/happo-air-combat-2v2-shoot-missile-s1-20261130-101500 --out fight.acmi   # open in Tacview
  harl render runs/happo-air-combat-2v2-shoot-missile-s1-20261130-101500 --format png3d --out fight.png
""",
    "export": """\
examples:
  harl export runs/happo-mpe-spread-s1-20261130-101500 --format onnx --out spread-onnx   # pip install "harl[onnx]"
  harl export runs/happo-mpe-spread-s1-20261130-101500 --format torchscript --out spread-ts
""",
    "convert": """\
examples:
  harl convert HARL/tuned_configs/pettingzoo_mpe/simple_spread_v2-continuous/happo/config.json -o spread.toml
  harl convert results/pettingzoo_mpe/simple_spread_v2/happo/test/seed-1/config.json   # print the pipeline
""",
    "compare": """\
examples (pip install "harl[compare]": rliable, pandas, matplotlib):
  harl compare runs/happo-sweep runs/mappo-sweep --out compare/
  harl compare runs/ --split-by updater.objective.lr --bounds simple_spread=-180,-60
""",
    "export-results": """\
examples:
  harl export-results runs/happo-sweep runs/mappo-sweep --out results.json   # marl-eval's JSON
""",
    "suite": """\
examples:
  harl suite benchmarks/suites/smoke.toml --out runs/smoke            # each family learns (CI runs it)
  harl suite benchmarks/suites/smax.toml --jobs 2                      # the SMAX benchmark
  harl suite benchmarks/suites/mpe.toml --ray HEAD_IP:6379             # on a Ray cluster
  harl suite --resume runs/smoke                                      # continue a stopped suite
  harl suite report benchmarks/results --out docs/results.md          # the results page from committed runs
""",
    "tune": """\
examples (pip install "harl[tune]": optuna, matplotlib):
  harl tune pipelines/happo_mpe_torch_spread.toml --space space.toml --trials 40 --seeds 1-3 --jobs 3
  harl tune pipelines/happo_mpe_torch_spread.toml --space space.toml --timeout 3600 --vectorize
  harl tune pipelines/happo_mpe_spread.toml --space space.toml --trials 100 --ray HEAD_IP:6379 --storage /shared/runs
  harl tune --resume runs/happo-mpe-torch-spread-tune-20261130-101500          # continue a stopped study
""",
}
"""The examples under each command's --help (train's: TRAIN_EXAMPLES)."""


def harl_version() -> str:
    """The installed distribution's version (``unknown`` when run from an uninstalled tree)."""
    try:
        return version("harl")
    except PackageNotFoundError:
        return "unknown"


def command_list(parser: argparse.ArgumentParser) -> str:
    """``harl``'s commands, one line each, from the parser's own help strings."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {action.dest: action.help or "" for action in sub._choices_actions}
    width = max(map(len, helps))
    lines = [f"harl {harl_version()}: {parser.description}", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, text in helps.items()]
    lines += ["", "harl COMMAND --help shows a command's options and examples."]
    return "\n".join(lines)


EPILOG = """\
examples:
  harl train pipelines/happo_mpe_spread.toml
  harl train pipelines/happo_mpe_spread.toml --set updater.kind=simultaneous --set run.seed=3
  harl train --resume runs/happo-mpe-spread-s1-20261130-101500
  harl check pipelines/happo_mpe_spread.toml
  harl stages updater
  harl eval runs/happo-mpe-spread-s1-20261130-101500 --episodes 20
  harl train pipelines/happo_mpe_spread.toml --seeds 1,2,3 --jobs 2
  harl train pipelines/happo_mpe_torch_spread.toml --seeds 1-16 --vectorize
  harl train pipelines/happo_mpe_spread.toml --seeds 1-4 --grid updater.objective.lr=1e-4,5e-4 --ray auto
  harl plot runs/happo-mpe-spread-sweep-20261130-101500
  harl render runs/happo-mpe-spread-s1-20261130-101500 --episodes 3 --out spread.gif
  harl export runs/happo-mpe-spread-s1-20261130-101500 --format onnx --out spread-onnx
  harl convert HARL/tuned_configs/pettingzoo_mpe/simple_spread_v2-continuous/happo/config.json -o spread.toml
  harl compare runs/happo-sweep runs/mappo-sweep --out compare/

--set takes a dotted key path and a TOML literal (a bare word is a string):
  --set run.total_env_steps=2_000_000  --set policy.hidden_sizes=[64,64]  --set env.scenario=simple_reference
"""


def parser() -> argparse.ArgumentParser:
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
    t.add_argument("--vectorize", action="store_true",
                   help="with --seeds: train the seeds as one population in this process, their envs one "
                   "vector env and their networks batched (on-policy PPO/A2C pipelines; docs/population.md); "
                   "with --jobs N: N populations, one process each")
    t.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                   help="run the sweep's trials as Ray tasks: on the cluster at ADDRESS, or (auto, also "
                   "RAY_ADDRESS) the one Ray finds; see docs/ray.md")
    t.add_argument("--storage", metavar="PATH", help="with --ray: make the sweep directory under PATH, a "
                   "directory every node reaches at that path (a shared filesystem)")
    t.add_argument("--max-retries", type=int, default=2, metavar="N",
                   help="restart a trial whose process or Ray worker died up to N times, from its newest "
                   "checkpoint (default 2)")
    t.add_argument("--opponent", metavar="RUN_DIR", help="a pipeline with [teams]: the run whose policy plays "
                   "its frozen team (role = \"frozen\"; the same as --set teams.NAME.checkpoint=RUN_DIR; "
                   "docs/teams.md)")
    t.add_argument("--quiet", action="store_true", help="no progress display or log lines (batch jobs)")

    def examples(name: str) -> dict[str, Any]:
        return {"epilog": EXAMPLES[name], "formatter_class": argparse.RawDescriptionHelpFormatter}

    c = sub.add_parser("check", help="validate a pipeline and build every stage, run nothing", **examples("check"))
    c.add_argument("pipeline")
    overrides(c)

    s = sub.add_parser("stages", help="list every stage kind with its keys, defaults and docs", **examples("stages"))
    s.add_argument("slot", nargs="?", help="only this slot (e.g. updater) or kind (e.g. ppo)")

    e = sub.add_parser("eval", help="evaluate a run's policy (newest checkpoint)", **examples("eval"))
    e.add_argument("run_dir")
    e.add_argument("--episodes", type=int, default=None, help="episodes (default: the pipeline's [evaluator] episodes)")
    e.add_argument("--checkpoint", metavar="FILE", help="evaluate this checkpoint instead of the newest")
    e.add_argument("--sample", action="store_true", help="sample actions instead of taking the most likely")
    e.add_argument("--against", metavar="OPPONENT", help="a run with [teams]: its team (--team) against another "
                   "run's (RUN_DIR), a script (scripted, scripted:KIND) or its own self-play pool (pool): win, "
                   "loss and draw rates and each side's return, with 95%% confidence intervals (docs/teams.md)")
    e.add_argument("--team", help="with --against: the run's team that plays (default: its first learning team)")
    e.add_argument("--seat", action="append", default=[], metavar="SEAT=TEAM", help="with --against RUN_DIR: "
                   "that run's learning team TEAM plays this run's team SEAT (repeatable; default: the team of "
                   "the seat's name, else the learning team whose snapshots play the seat in self-play, else "
                   "that run's one learning team)")
    x = sub.add_parser("crossplay", help="teams: each run's team against each other run's, a table of win rates",
                       description="Play each run's team (--team) against every run's other teams, frozen, and "
                       "print the win rates with 95% intervals: a policy that beats strong opponents is told "
                       "from one that exploits a weak one.", **examples("crossplay"))
    x.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    x.add_argument("--team", help="the team that plays (default: each run's first learning team)")
    x.add_argument("--seat", action="append", default=[], metavar="SEAT=TEAM", help="the column run's "
                   "learning team TEAM plays the row run's team SEAT (repeatable; default as harl eval --seat's: "
                   "two self-play runs play each other's learner in the pool's seat)")
    x.add_argument("--episodes", type=int, default=None, help="episodes per pair (default: [evaluator] episodes)")

    pl = sub.add_parser("plot", help="learning curves of runs (seeds as mean ± std bands) to a PNG",
                        description="Draw a metric of runs against env steps.  Runs of the same pipeline "
                        "with different seeds are drawn as their mean with a ± std band.", **examples("plot"))
    pl.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                    help="run directories, or directories holding runs (a sweep directory, runs/)")
    pl.add_argument("--metric", help="a metrics.csv column (default: eval_return if evaluated, else train_return; "
                    "runs with [teams]: each team's return, evaluated or else trained)")
    pl.add_argument("--out", metavar="FILE.png", help="default: <metric>.png in the one directory given, "
                    "else in the current directory")
    pl.add_argument("--smooth", type=int, default=1, metavar="N", help="draw each run's trailing mean over "
                    "its last N points (default 1: the points as logged)")

    r = sub.add_parser("render", help="film a run's policy (deterministic) to a .gif or .mp4 (air combat: "
                       "a Tacview .acmi or a 3-D .png)",
                       description="Run a checkpoint's policy deterministically in an env that renders "
                       "rgb_array frames, write a video and print the episode returns; an air-combat run's "
                       "episode is written as a Tacview ACMI file or a 3-D picture (--format).",
                       **examples("render"))
    r.add_argument("run_dir")
    r.add_argument("--episodes", type=int, default=1, help="episodes to film (default 1)")
    r.add_argument("--out", metavar="FILE", help="a .gif or .mp4 (default: RUN_DIR/render.mp4 when "
                   "imageio-ffmpeg is installed, else RUN_DIR/render.gif); air combat: a .acmi or .png "
                   "(default: RUN_DIR/render.acmi)")
    r.add_argument("--checkpoint", metavar="FILE", help="film this checkpoint instead of the newest")
    r.add_argument("--fps", type=int, default=None, help="frames per second (default: the env's, else 10)")
    r.add_argument("--format", choices=("video", "acmi", "png3d"), default=None,
                   help="air combat: acmi writes one episode as a Tacview ACMI 2.1 file, png3d as a 3-D "
                   "picture (default: from --out's ending; else acmi for air combat, video for the rest)")
    x = sub.add_parser("export", help="a run's actors as ONNX or TorchScript files plus policy.json",
                       description="Export every agent's actor (deterministic action in the env's action "
                       "space; see docs/export.md) with a policy.json manifest.", **examples("export"))
    x.add_argument("run_dir")
    x.add_argument("--format", required=True, choices=("onnx", "torchscript"))
    x.add_argument("--out", required=True, metavar="DIR", help="folder for agent<i>.onnx|.pt and policy.json")
    x.add_argument("--checkpoint", metavar="FILE", help="export this checkpoint instead of the newest")
    x.add_argument("--team", help="a run with [teams]: export this learning team's actors (default: its one "
                   "learning team; a run with several needs --team)")
    x.add_argument("--with-distribution", action="store_true",
                   help="also output the action distribution's parameters")

    v = sub.add_parser("convert", help="a HARL config.json as a harl pipeline file (docs/harl-compat.md)",
                       description="Convert a HARL config.json (a HARL results directory's, or one of HARL's "
                       "tuned_configs/) into a harl pipeline; harl train CONFIG.json trains it directly.",
                       **examples("convert"))
    v.add_argument("config", metavar="CONFIG.json")
    v.add_argument("-o", "--out", metavar="FILE.toml", help="write the pipeline here (default: print it)")

    cp = sub.add_parser("compare", help=COMPARE_HELP, description="Compare algorithms over run and sweep "
                        "directories after Gorsane et al. 2022 / rliable (docs/compare.md); needs pip install "
                        '"harl[compare]".', **examples("compare"))
    add_compare_arguments(cp)
    er = sub.add_parser("export-results", help="runs as marl-eval's JSON (env/task/algorithm/run/step)",
                        **examples("export-results"))
    add_export_arguments(er)
    add_tune_parser(sub, overrides, examples("tune"))
    su = sub.add_parser("suite", help="run a benchmark suite: its runs, thresholds, IQM/CI tables, curves",
                        description="Run every entry of a suite file (benchmarks/suites/) as a --seeds sweep, "
                        "judge each against its threshold and write results.json, marl-eval JSON, harl "
                        "compare's tables and harl plot's curves (docs/benchmarks.md); exit 1 when a "
                        "threshold fails.", **examples("suite"))
    add_suite_arguments(su)
    return p


def add_tune_parser(sub: Any, overrides: Callable[[argparse.ArgumentParser], None], extra: dict[str, Any]) -> None:
    """``harl tune``'s options (docs/tune.md)."""
    u = sub.add_parser("tune", help="search hyper-parameters on Optuna: TPE, pruning, resumable (harl[tune])",
                       description="Search a space of pipeline keys (a TOML file) with Optuna: each trial trains "
                       "the pipeline on --seeds, scored on its evaluation returns; the best values become a "
                       "pipeline file, re-evaluated on fresh seeds against the starting one (docs/tune.md); "
                       'needs pip install "harl[tune]".', **extra)
    u.add_argument("pipeline", nargs="?", help="the starting pipeline TOML file")
    u.add_argument("--space", metavar="SPACE.toml", help="the search space: [params] and optionally [objective], "
                   "[pruner], [sampler]")
    u.add_argument("--trials", type=int, metavar="N", help="trials in the study (with --resume: raise the count)")
    u.add_argument("--timeout", type=float, metavar="SECONDS", help="start no new trial after this long")
    u.add_argument("--seeds", metavar="LIST", help="the seeds each trial trains, e.g. 1-3 (default 1,2,3)")
    u.add_argument("--final-seeds", metavar="LIST", help="fresh seeds to re-evaluate the best pipeline and the "
                   "starting one on (default: as many as --seeds, from the largest + 100); none: skip it")
    u.add_argument("--jobs", type=int, metavar="N", help="runs at once, each its own process "
                   "(default 1; with --ray: default the cluster's CPUs; with --resume: the study's)")
    u.add_argument("--vectorize", action="store_true", help="train each trial's seeds as one population "
                   "in one process (docs/population.md), pruned the same way as seeds run side by side")
    u.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS", help="run the trials' runs as Ray "
                   "tasks (docs/ray.md)")
    u.add_argument("--storage", metavar="PATH", help="make the tune directory under PATH (with --ray: a shared "
                   "filesystem)")
    u.add_argument("--run-dir", metavar="DIR", help="the tune directory (default <logging.dir>/<name>-tune-<time>)")
    u.add_argument("--resume", metavar="DIR", help="continue the study in this tune directory")
    u.add_argument("--quiet", action="store_true", help="print only the trials' results")
    overrides(u)
