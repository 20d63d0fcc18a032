"""Learning parity with HARL on MPE: run PKU-MARL/HARL and harl alike, then tabulate.

HARL steps pettingzoo 1.22's MPE; harl plays the same dynamics and rewards with
``env.variant = "pettingzoo_1.22"``, so both report returns on one scale.  Each run lands in
``--out`` as a harl-style run directory (``pipeline.toml`` + ``metrics.csv``), so
``harl plot OUT`` draws HARL's seeds and harl's side by side.

    # HARL (its own venv: torch, pettingzoo==1.22.3, supersuit, pyyaml, tensorboardX, absl-py)
    python benchmarks/harl_parity.py harl --harl-dir ~/HARL --harl-python ~/harl-venv/bin/python \\
        --algo happo --seed 1 --steps 1_000_000 --out runs/parity
    python benchmarks/harl_parity.py ours --algo happo --seed 1 --steps 1_000_000 --out runs/parity
    python benchmarks/harl_parity.py table runs/parity          # train/eval return per 100k
    python benchmarks/harl_parity.py compare runs/parity2       # off-policy: within one seed spread?
    harl plot runs/parity --metric eval_return --out parity.png

Without a HARL checkout (``--harl-dir`` missing ``examples/train.py``, or its python unable
to import pettingzoo 1.22) the ``harl`` command prints why and exits 0: it is skipped.
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

PIPELINES = {"happo": "pipelines/happo_mpe_spread.toml", "mappo": "pipelines/mappo_mpe_spread.toml",
             "hatrpo": "pipelines/hatrpo_mpe_spread.toml"}
# Off-policy: both sides train from the same HARL tuned config.json (harl reads it directly).
TUNED = {"hasac": "simple_spread_v2-continuous/hasac", "hatd3": "simple_spread_v2-continuous/hatd3",
         "matd3": "simple_spread_v2-continuous/matd3", "maddpg": "simple_spread_v2-continuous/maddpg",
         "had3qn": "simple_speaker_listener_v3-discrete/had3qn",
         "hasac_discrete": "simple_spread_v2-discrete/hasac"}
WARMUP = 10_000  # env steps of random actions before HARL's off-policy step count starts (all of TUNED)
LOG_EVERY = 10_000  # env steps between HARL's off-policy log lines (its eval_interval, in vector steps x 20)
COLUMNS = ("iteration", "env_steps", "train_return", "eval_return")
_STEPS = re.compile(r"total num timesteps (\d+)/|Step (\d+) / \d+, average step reward")
_NUMBER = r"(-?\d+(?:\.\d+)?(?:e-?\d+)?)"
_TRAIN = re.compile(r"average episode reward is " + _NUMBER)
_EVAL = re.compile(r"Evaluation average episode reward is " + _NUMBER)


def _harl_missing(harl_dir: Path, python: str) -> str | None:
    if not (harl_dir / "examples" / "train.py").is_file():
        return f"{harl_dir}/examples/train.py not found (clone PKU-MARL/HARL there, or pass --harl-dir)"
    probe = subprocess.run([python, "-c", "import harl, pettingzoo, supersuit; print(pettingzoo.__version__)"],
                           cwd=harl_dir / "examples", capture_output=True, text=True)
    if probe.returncode != 0 or not probe.stdout.startswith("1.22"):
        return (f"{python} cannot run HARL's MPE (needs HARL installed and pettingzoo 1.22.x): "
                f"{(probe.stderr.strip().splitlines() or [probe.stdout.strip()])[-1]}")
    return None


def parse_harl_log(lines: list[str]) -> list[dict[str, float | str]]:
    """One row per HARL log block: env steps, mean train episode return, evaluation return."""
    rows: list[dict[str, float | str]] = []
    for line in lines:
        if m := _STEPS.search(line):
            rows.append({"iteration": len(rows) + 1, "env_steps": int(m.group(1) or m.group(2)),
                         "train_return": "", "eval_return": ""})
        elif rows and (m := _TRAIN.search(line)) and "Evaluation" not in line:
            rows[-1]["train_return"] = float(m.group(1))
        elif rows and (m := _EVAL.search(line)):
            rows[-1]["eval_return"] = float(m.group(1))
    return rows


def _write_run(run_dir: Path, name: str, seed: int, extra: str, rows: list[dict[str, float | str]]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "pipeline.toml").write_text(f'[run]\nname = "{name}"\nseed = {seed}\n\n{extra}')
    with (run_dir / "metrics.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def run_harl(args: argparse.Namespace) -> int:
    harl_dir = Path(args.harl_dir).expanduser()
    if why := _harl_missing(harl_dir, args.harl_python):
        print(f"skipped: HARL is not installed: {why}")
        return 0
    run_dir = Path(args.out) / f"HARL-{args.algo}-s{args.seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    if args.algo in TUNED:  # off-policy: HARL counts steps after its warm-up; log train returns
        config = harl_dir / "tuned_configs" / "pettingzoo_mpe" / TUNED[args.algo] / "config.json"
        head = ["--load_config", str(config.resolve()), "--num_env_steps", str(args.steps - WARMUP),
                "--use_eval", "False", "--eval_interval", str(LOG_EVERY // 20)]
    else:
        head = ["--algo", args.algo, "--env", "pettingzoo_mpe", "--num_env_steps", str(args.steps)]
    cmd = [args.harl_python, "examples/train.py", *head, "--exp_name", "parity", "--seed", str(args.seed),
           "--cuda", "False", "--torch_threads", "1", "--log_dir", str((run_dir / "results").resolve())]
    print(" ".join(cmd))
    with (run_dir / "stdout.log").open("w") as log:
        done = subprocess.run(cmd, cwd=harl_dir, stdout=log, stderr=subprocess.STDOUT)
    rows = parse_harl_log((run_dir / "stdout.log").read_text().splitlines())
    _write_run(run_dir, f"HARL-{args.algo}", args.seed,
               f'[reference]\nimplementation = "PKU-MARL/HARL"\nalgo = "{args.algo}"\n', rows)
    return done.returncode


def run_ours(args: argparse.Namespace) -> int:
    run_dir = Path(args.out) / f"harl-{args.algo}-s{args.seed}"
    sets = [f"run.seed={args.seed}", f"run.total_env_steps={args.steps}", "run.torch_threads=1",
            "env.variant=pettingzoo_1.22", "collector.backend=inline", *args.set]
    if args.algo in TUNED:  # the HARL config.json itself; its converter sets variant = "pettingzoo_1.22"
        source = str(Path(args.harl_dir).expanduser() / "tuned_configs" / "pettingzoo_mpe" / TUNED[args.algo] / "config.json")
        sets.append("evaluator.every_iterations=0")  # train returns are compared (HARL runs without eval)
    else:
        source = PIPELINES[args.algo]
    cmd = [sys.executable, "-m", "harl", "train", source, "--quiet", "--run-dir", str(run_dir)]
    for s in sets:
        cmd += ["--set", s]
    print(" ".join(cmd))
    return subprocess.run(cmd).returncode


def windows(rows: list[dict[str, str]], every: int) -> dict[int, tuple[float, float]]:
    """``{k: (mean train return over rows in (k - every, k], eval return at k)}``."""
    train, evals = defaultdict(list), {}
    for r in rows:
        step = int(float(r["env_steps"]))
        k = -(-step // every) * every
        if r.get("train_return"):
            train[k].append(float(r["train_return"]))
        if r.get("eval_return") and step % every == 0:
            evals[k] = float(r["eval_return"])
    return {k: (float(np.mean(train[k])), evals.get(k, float("nan"))) for k in sorted(train)}


def _groups(out: str, every: int, only: str = "", warmup: int = 0) -> dict[str, dict[int, dict[int, tuple[float, float]]]]:
    """{run name: {seed: windows}} of the runs in ``out`` (names ending in ``-only``).

    ``warmup`` (off-policy): HARL's first log line, at ``warmup + LOG_EVERY`` env steps, averages
    every episode since the run began, the warm-up's random ones included (its episode list
    starts before the warm-up); harl's rows of the warm-up are counted in that same block."""
    groups: dict[str, dict[int, dict[int, tuple[float, float]]]] = defaultdict(dict)
    for metrics in sorted(Path(out).glob("*/metrics.csv")):
        name, _, seed = metrics.parent.name.rpartition("-s")
        if only and not name.endswith(f"-{only}"):
            continue
        with metrics.open(newline="") as f:
            rows = list(csv.DictReader(f))
        if warmup:
            rows = [{**r, "env_steps": str(warmup + LOG_EVERY)} if int(float(r["env_steps"])) <= warmup else r
                    for r in rows]
        groups[name][int(seed)] = windows(rows, every)
    return groups


def figure(args: argparse.Namespace) -> int:
    """One panel per algorithm: mean train return per block over seeds, ± std, HARL and harl."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    algos = [a for a in args.algos.split(",")]
    fig, axes = plt.subplots(1, len(algos), figsize=(4.2 * len(algos), 3.4), squeeze=False)
    for ax, algo in zip(axes[0], algos):
        for name, runs in sorted(_groups(args.out, args.every, algo, WARMUP).items()):
            steps = sorted({k for w in runs.values() for k in w})
            means = np.array([np.mean([w[k][0] for w in runs.values() if k in w]) for k in steps])
            stds = np.array([np.std([w[k][0] for w in runs.values() if k in w]) for k in steps])
            label = f"{'HARL' if name.startswith('HARL') else 'harl'} ({len(runs)} seeds)"
            ax.plot(steps, means, label=label)
            ax.fill_between(steps, means - stds, means + stds, alpha=0.2)
        ax.set_title(algo)
        ax.set_xlabel("env steps")
        ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1000:.0f}k")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("train return (HARL's scale)")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.png}")
    return 0


def table(args: argparse.Namespace) -> int:
    groups = _groups(args.out, args.every, args.only, WARMUP if args.only in TUNED else 0)
    steps = sorted({k for runs in groups.values() for w in runs.values() for k in w})
    names = sorted(groups)
    head = " | ".join(f"{n} train | {n} eval" for n in names)
    print(f"| env steps | {head} |\n|---|" + "---|" * (2 * len(names)))
    for k in steps:
        cells = []
        for n in names:
            for j in (0, 1):
                vals = [w[k][j] for w in groups[n].values() if k in w and not np.isnan(w[k][j])]
                cells.append(f"{np.mean(vals):.1f} ± {np.std(vals):.1f} ({len(vals)})" if vals else "")
        print(f"| {k:,} | " + " | ".join(cells) + " |")
    return 0


def compare(args: argparse.Namespace) -> int:
    """Per off-policy algorithm in ``out``: HARL beside harl per block, their difference, and whether
    it is within one seed spread (at most the larger side's range over its seeds)."""
    for algo in [a for a in TUNED if not args.only or a == args.only]:
        groups = _groups(args.out, args.every, algo, WARMUP)
        ref, ours = groups.get(f"HARL-{algo}", {}), groups.get(f"harl-{algo}", {})
        if not ref or not ours:
            continue
        print(f"**{algo}** (mean train return per {args.every // 1000}k block; mean ± std over seeds, count in brackets)\n")
        print("| env steps | HARL | harl | harl − HARL | within one seed spread |\n|---|---|---|---|---|")
        for k in sorted({k for w in [*ref.values(), *ours.values()] for k in w}):
            h, o = ([w[k][0] for w in side.values() if k in w] for side in (ref, ours))
            if not h or not o:
                continue
            spread = max(float(np.ptp(h)), float(np.ptp(o)))
            d = float(np.mean(o) - np.mean(h))
            ok = "n/a (1 seed)" if min(len(h), len(o)) < 2 else "yes" if abs(d) <= spread else "no"
            print(f"| {k:,} | {np.mean(h):.1f} ± {np.std(h):.1f} ({len(h)}) | {np.mean(o):.1f} ± {np.std(o):.1f} "
                  f"({len(o)}) | {d:+.1f} | {ok} |")
        print()
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("harl", "ours"):
        s = sub.add_parser(name)
        s.add_argument("--algo", choices=sorted({*PIPELINES, *TUNED}), default="happo")
        s.add_argument("--harl-dir", default="HARL", help="a PKU-MARL/HARL checkout (ours reads its tuned configs)")
        s.add_argument("--seed", type=int, default=1)
        s.add_argument("--steps", type=lambda v: int(v.replace("_", "")), default=1_000_000)
        s.add_argument("--out", default="runs/parity")
    sub.choices["harl"].add_argument("--harl-python", default="python")
    sub.choices["ours"].add_argument("--set", action="append", default=[], help="extra pipeline override")
    t = sub.add_parser("table")
    t.add_argument("out")
    t.add_argument("--every", type=int, default=100_000)
    t.add_argument("--only", default="", help="only the runs of this algorithm (e.g. hasac)")
    c = sub.add_parser("compare", help="off-policy: HARL beside harl per block, within one seed spread or not")
    c.add_argument("out")
    c.add_argument("--every", type=int, default=20_000)
    c.add_argument("--only", default="", help="only this algorithm (e.g. had3qn)")
    f = sub.add_parser("figure", help="train return per block, HARL beside harl, one panel per algorithm")
    f.add_argument("out")
    f.add_argument("--algos", default="hatd3,matd3,hasac,had3qn,hasac_discrete")
    f.add_argument("--every", type=int, default=10_000)
    f.add_argument("--png", default="learning_parity_off_policy.png")
    args = p.parse_args()
    return {"harl": run_harl, "ours": run_ours, "table": table, "compare": compare, "figure": figure}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
