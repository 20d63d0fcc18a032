"""Learning parity and speed of harl's MAT against PKU-MARL/Multi-Agent-Transformer's own code.

Both sides train MAT on MPE simple_spread (3 agents, discrete actions) with MAT's
``scripts/train_mpe.sh`` settings: 128 envs x 25 steps, 10 PPO epochs of one minibatch, clip
0.05, lr 7e-4, n_block 1, n_embd 64, n_head 1, entropy 0.01.  Both step MAT's *own* MPE
(``benchmarks/mat_parity_env.py`` wraps it for harl), so the two sides differ only in the
learning code.  MAT runs in its own venv from a checkout of its repository::

    python benchmarks/mat_parity.py run --budget 160000 --seeds 1 2 3 --jobs 2     # both sides
    python benchmarks/mat_parity.py report --budget 160000                         # table, JSON, figure
    python benchmarks/mat_parity.py speed --steps 32000 --rounds 3                 # env-steps/s, interleaved

``run`` launches, per seed, MAT's ``train/train_mpe.py`` (``--mat-python``, default
``/work/mat_venv/bin/python``; the checkout ``--mat-ref``, default ``/work/mat_ref``) and
``harl train`` of ``pipelines/mat_mpe_spread.toml`` with its ``[env]`` replaced by MAT's env,
``--jobs`` at a time, each run's output under ``--out`` (default ``runs/mat_parity``).  Both
evaluate at every tenth of the budget on 32 deterministic episodes (MAT: ``--eval_interval
budget / 32,000 --n_eval_rollout_threads 32``) and report the training return every iteration; both returns
are the episode's summed team reward as every agent receives it (MAT's ``eval average episode
rewards`` is the 25 steps' sum averaged over envs and agents, its ``average episode rewards``
``mean(rewards) * 25``; harl's returns are per-step means over agents, summed), one scale.

``report`` applies the parity rule of the HARL work at every tenth of the budget (each run's
first evaluation, and its training return, at or after the mark: the difference of the two
sides' mean returns is within the larger of their two standard deviations over seeds,
population std), prints the markdown tables and writes ``benchmarks/results/mat_parity.json``
and the figure ``docs/learning_parity_mat_spread.png``.

``speed`` times whole training runs (start-up included) on the same settings, evaluation off, one
torch thread each: MAT's runner (its 128 env processes), harl's ``mat_mpe_spread.toml`` as shipped
(mpe2) and harl on MAT's own MPE, one after another, the order rotated each round, and writes
``benchmarks/results/mat_speed.json`` with ``uptime``'s load before and after every run.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from parity_marks import at_tenths, compare, markdown  # this folder: a script's own, on sys.path

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("mat", "harl")
RESULTS = ROOT / "benchmarks" / "results"
FIGURE = ROOT / "docs" / "learning_parity_mat_spread.png"
PIPELINE = ROOT / "pipelines" / "mat_mpe_spread.toml"
ROLLOUT = 128 * 25  # env steps per iteration on both sides
MAT_ARGS = ("--env_name MPE --algorithm_name mat --scenario_name simple_spread --num_agents 3 --num_landmarks 3 "
            "--n_block 1 --n_embd 64 --n_rollout_threads 128 --num_mini_batch 1 --episode_length 25 "
            "--ppo_epoch 10 --clip_param 0.05 --use_ReLU --gain 0.01 --lr 7e-4 --critic_lr 7e-4").split()
"""scripts/train_mpe.sh's arguments, less seed, budget, threads and evaluation (set per run)."""
ENV_TABLE = '[env]\nkind = "python"\nfactory = "benchmarks.mat_parity_env:make_env"\n\n'

_NUMBER = r"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)"
_STEPS = re.compile(r"total num timesteps (\d+)/\d+, FPS (\d+)")
_TRAIN = re.compile(r"^average episode rewards is " + _NUMBER)
_EVAL = re.compile(r"eval average episode rewards of agent: " + _NUMBER)

Curve = list[tuple[int, float]]


# --------------------------------------------------------------------------------------- runs
def harl_pipeline(out: Path) -> Path:
    """The shipped pipeline with its ``[env]`` table replaced by MAT's own MPE (whose observations end
    with the agents' ids: harl's ``agent_id`` off, so that they are not appended twice)."""
    text = PIPELINE.read_text(encoding="utf-8")
    new, count = re.subn(r"\[env\]\n.*?\n\n(?=\[collector\])", ENV_TABLE, text, flags=re.S)
    if count != 1:
        raise SystemExit(f"{PIPELINE}: expected one [env] table before [collector]")
    new, count = re.subn(r'(\[updater\.objective\]\nkind = "mat"\n)',
                         r"\1agent_id = false  # MAT's own MPE appends the ids already\n", new)
    if count != 1:
        raise SystemExit(f"{PIPELINE}: expected one [updater.objective] table of kind mat")
    path = out / "mat_mpe_spread_mat_env.toml"
    path.write_text("# pipelines/mat_mpe_spread.toml on MAT's own MPE (benchmarks/mat_parity.py)\n" + new)
    return path


def eval_every(budget: int) -> int:
    """Iterations between evaluations: one per tenth of the budget."""
    if budget % (10 * ROLLOUT):
        raise SystemExit(f"--budget {budget}: expected a multiple of 10 x {ROLLOUT} (a tenth is whole iterations)")
    return budget // (10 * ROLLOUT)


def mat_command(args: argparse.Namespace, seed: int, steps: int, experiment: str, every: int) -> list[str]:
    """MAT's train_mpe.py; ``every`` > 0: evaluate every that many updates on 32 envs (one episode each)."""
    cmd = [args.mat_python, "train/train_mpe.py", *MAT_ARGS, "--seed", str(seed), "--num_env_steps", str(steps),
           "--experiment_name", experiment, "--n_training_threads", "1", "--log_interval", "1"]
    if every:
        cmd += ["--use_eval", "--eval_interval", str(every), "--n_eval_rollout_threads", "32"]
    return cmd


def harl_command(pipeline: Path, seed: int, steps: int, run_dir: Path, every: int) -> list[str]:
    """harl train of ``pipeline``; ``every`` > 0: evaluate every that many iterations (32 episodes), 0: never."""
    return [sys.executable, "-m", "harl", "train", str(pipeline), "--set", f"run.seed={seed}",
            "--set", f"run.total_env_steps={steps}", "--set", f"evaluator.every_iterations={every}",
            "--run-dir", str(run_dir), "--quiet"]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def run(args: argparse.Namespace) -> int:
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    pipeline = harl_pipeline(out)
    scripts = args.mat_ref / "mat" / "scripts"
    every = eval_every(args.budget)
    jobs: list[tuple[str, list[str], Path, Path]] = []
    for seed in args.seeds:
        if "mat" in args.sides:
            # MAT evaluates after updates 0, every, 2 every, ...: one update past the budget gives the last mark.
            cmd = mat_command(args, seed, args.budget + ROLLOUT, f"parity_s{seed}", every)
            jobs.append(("mat", cmd, scripts, out / f"mat-s{seed}.log"))
        if "harl" in args.sides:
            cmd = harl_command(pipeline, seed, args.budget, out / f"harl-s{seed}", every)
            jobs.append(("harl", cmd, ROOT, out / f"harl-s{seed}.log"))
    running: list[tuple[subprocess.Popen[bytes], Path, float]] = []
    while jobs or running:
        while jobs and len(running) < args.jobs:
            side, cmd, cwd, log = jobs.pop(0)
            handle = log.open("wb")
            print(f"start {side}: {log.name} (load {os.getloadavg()[0]:.2f})", flush=True)
            running.append((subprocess.Popen(cmd, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT, env=_env()),
                            log, time.time()))
        time.sleep(5)
        for proc, log, start in list(running):
            if proc.poll() is not None:
                running.remove((proc, log, start))
                print(f"done {log.name}: rc {proc.returncode}, {time.time() - start:.0f} s", flush=True)
    return 0


# ------------------------------------------------------------------------------------ curves
def parse_mat_log(text: str) -> dict[str, Curve]:
    """MAT's stdout -> {"train": [(env steps, return)], "eval": [...], "fps": [...]}."""
    curves: dict[str, Curve] = {"train": [], "eval": [], "fps": []}
    steps = None
    for line in text.splitlines():
        line = line.strip()
        if m := _STEPS.search(line):
            steps = int(m.group(1))
            curves["fps"].append((steps, float(m.group(2))))
        elif steps is not None and (m := _TRAIN.search(line)):
            curves["train"].append((steps, float(m.group(1))))
        elif steps is not None and (m := _EVAL.search(line)):
            curves["eval"].append((steps, float(m.group(1))))
    return curves


def harl_curves(run_dir: Path) -> dict[str, Curve]:
    curves: dict[str, Curve] = {"train": [], "eval": [], "fps": []}
    with (run_dir / "metrics.csv").open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            steps = int(float(row["env_steps"]))
            if row.get("train_return"):
                curves["train"].append((steps, float(row["train_return"])))
            if row.get("eval_return"):
                curves["eval"].append((steps, float(row["eval_return"])))
            if row.get("steps_per_s"):
                curves["fps"].append((steps, float(row["steps_per_s"])))
    return curves


def figure(curves: dict[str, dict[int, dict[str, Curve]]], tables: dict[str, list[dict[str, object]]],
           budget: int, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.5))
    colors = {"MAT": "tab:orange", "harl": "tab:blue"}
    for ax, metric, title in ((axes[0], "eval", "evaluation (32 deterministic episodes)"),
                              (axes[1], "train", "training return (128 episodes)")):
        for side, color in colors.items():
            for _seed, c in sorted(curves[side].items()):
                ax.plot([s for s, _ in c[metric]], [r for _, r in c[metric]], color=color, alpha=0.25, lw=0.8)
            table = tables[metric]
            marks = [r["steps"] for r in table]
            mean = np.array([r[f"{side.lower()}_mean"] for r in table], dtype=float)
            std = np.array([r[f"{side.lower()}_std"] for r in table], dtype=float)
            ax.plot(marks, mean, color=color, marker="o", ms=3, label=f"{side} ({len(curves[side])} seeds)")
            ax.fill_between(marks, mean - std, mean + std, color=color, alpha=0.2)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("env steps")
        ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1000:.0f}k")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("episode return (team sum)")
    axes[0].legend(fontsize=8)
    fig.suptitle("MAT on MAT's MPE simple_spread: harl beside PKU-MARL's code (mean ± std at each tenth)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def report(args: argparse.Namespace) -> int:
    out = args.out.resolve()
    curves: dict[str, dict[int, dict[str, Curve]]] = {"MAT": {}, "harl": {}}
    for log in sorted(out.glob("mat-s*.log")):
        curves["MAT"][int(log.stem.split("-s")[1])] = parse_mat_log(log.read_text(encoding="utf-8"))
    for run_dir in sorted(out.glob("harl-s*")):
        if (run_dir / "metrics.csv").is_file():
            curves["harl"][int(run_dir.name.split("-s")[1])] = harl_curves(run_dir)
    tables = {}
    for metric in ("eval", "train"):
        sides = {side: [at_tenths(c[metric], args.budget, zero="first") for c in runs.values()]
                 for side, runs in curves.items()}
        tables[metric] = compare(sides["MAT"], sides["harl"], args.budget, NAMES)
        print(f"\n{metric} return at each tenth of {args.budget:,} env steps")
        print("\n".join(markdown(tables[metric], NAMES, ("MAT (PKU-MARL)", "harl"), digits=1)))
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"budget": args.budget, "tables": tables,
              "curves": {side: {str(s): c for s, c in runs.items()} for side, runs in curves.items()}}
    (RESULTS / "mat_parity.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS / 'mat_parity.json'}")
    if not args.no_figure:
        figure(curves, tables, args.budget, args.png)
        print(f"wrote {args.png}")
    return 0


# ------------------------------------------------------------------------------------- speed
def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def speed(args: argparse.Namespace) -> int:
    """Whole training runs, evaluation off: MAT's runner and harl's (``--sides``: on mpe2, the shipped
    pipeline; on mpe2's game in torch, ``env.kind = "mpe_torch"``; on MAT's own MPE), one after
    another, the order rotated each round."""
    out = args.out.resolve() / "speed"
    out.mkdir(parents=True, exist_ok=True)
    on_mat_env = harl_pipeline(out)
    scripts = args.mat_ref / "mat" / "scripts"
    sides = ["mat", *args.sides]
    records = []
    for rnd in range(args.rounds):
        for side in sides[rnd % len(sides):] + sides[:rnd % len(sides)]:
            if side == "mat":
                cmd, cwd = mat_command(args, 1, args.steps, f"speed_r{rnd}", 0), scripts
            else:
                pipe = on_mat_env if side == "harl_mat_env" else PIPELINE
                cmd, cwd = harl_command(pipe, 1, args.steps, out / f"{side}-r{rnd}", 0), ROOT
                if side == "harl_mpe_torch":
                    cmd += ["--set", "env.kind=mpe_torch"]
            before = _uptime()
            start = time.perf_counter()
            proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True)
            wall = time.perf_counter() - start
            after = _uptime()
            if proc.returncode != 0:
                raise SystemExit(f"{side} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
            fps = parse_mat_log(proc.stdout)["fps"] if side == "mat" else harl_curves(out / f"{side}-r{rnd}")["fps"]
            record = {"round": rnd, "side": side, "env_steps": args.steps, "wall_s": wall,
                      "whole_run_steps_per_s": args.steps / wall,
                      "reported_steps_per_s": fps[-1][1] if fps else None, "uptime_before": before,
                      "uptime_after": after}
            records.append(record)
            print(json.dumps(record), flush=True)
    rate = {side: float(np.mean([r["whole_run_steps_per_s"] for r in records if r["side"] == side])) for side in sides}
    summary = {"env_steps_per_run": args.steps, "records": records, "mean_whole_run_steps_per_s": rate,
               **{f"ratio_{side}_over_mat": rate[side] / rate["mat"] for side in args.sides}}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"mat_speed{args.tag}.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in summary.items() if k != "records"}))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("run", "report", "speed"):
        q = sub.add_parser(name)
        q.add_argument("--out", type=Path, default=ROOT / "runs" / "mat_parity")
        q.add_argument("--mat-ref", type=Path, default=Path(os.environ.get("MAT_REF", "/work/mat_ref")))
        q.add_argument("--mat-python", default="/work/mat_venv/bin/python")
        if name in ("run", "report"):
            q.add_argument("--budget", type=int, default=160_000,
                           help="env steps a run, a multiple of 32,000 (harl; MAT one update more)")
        if name == "run":
            q.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
            q.add_argument("--jobs", type=int, default=2, help="runs at a time")
            q.add_argument("--sides", nargs="+", choices=("mat", "harl"), default=["mat", "harl"])
        if name == "report":
            q.add_argument("--png", type=Path, default=FIGURE)
            q.add_argument("--no-figure", action="store_true")
        if name == "speed":
            q.add_argument("--steps", type=int, default=32_000)
            q.add_argument("--rounds", type=int, default=3, help="rounds of the runs, order rotated")
            q.add_argument("--sides", nargs="+", default=["harl_mpe2", "harl_mat_env"],
                           choices=("harl_mpe2", "harl_mpe_torch", "harl_mat_env"), help="harl's runs beside MAT's")
            q.add_argument("--tag", default="", help="suffix of the results file: mat_speed<tag>.json")
    args = p.parse_args()
    return {"run": run, "report": report, "speed": speed}[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
