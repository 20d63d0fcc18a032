"""Throughput of two commits of harl, side by side: the same pipelines trained by each, rounds interleaved.

    python benchmarks/commit_throughput.py 29ab41a HEAD --rounds 3 \\
        pipelines/happo_mpe_torch_spread.toml:200000 \\
        pipelines/hasac_mpe_spread.toml:16000:collector.warmup_steps=1000

Each commit is checked out once into a temporary ``git worktree`` and imported from there
(``PYTHONPATH`` ahead of any installed harl; the interpreter is this one, so both commits run on the
same torch and packages).  A run is ``harl train PIPELINE --set run.total_env_steps=N`` in a fresh
process with evaluation off; its figure is the steady rate (env steps per second from the end of the
first quarter of its iterations to the last, from metrics.csv's ``wall_time``).  The rounds alternate
which commit goes first.  Printed: one JSON line per run (with the 1-minute load average after it),
then per pipeline the median rate of each commit and their ratio (second ÷ first).  Run it on a
quiet machine: these are wall-clock figures.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def steady(times: list[float], steps: list[float]) -> float:
    """Env steps per second from the end of the first quarter of the iterations to the last."""
    k = max(0, len(times) // 4 - 1)
    return (steps[-1] - steps[k]) / (times[-1] - times[k]) if len(times) > k + 1 else float("nan")


def run(tree: Path, pipeline: str, steps: int, overrides: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "harl", "train", pipeline, "--quiet", "--run-dir", str(run_dir),
               "--set", f"run.total_env_steps={steps}", "--set", "evaluator.every_iterations=1000000",
               *(x for o in overrides for x in ("--set", o))]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        subprocess.run(cmd, check=True, cwd=tree, env=env, stdout=subprocess.DEVNULL)
        with open(run_dir / "metrics.csv") as f:
            rows = list(csv.DictReader(f))
    return steady([float(r["wall_time"]) for r in rows], [float(r["env_steps"]) for r in rows])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("pipelines", nargs="+", help="PIPELINE:ENV_STEPS[:KEY=VALUE,...] (the pipeline relative to "
                   "the repository, then overrides of its runs alone)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--set", dest="overrides", action="append", default=[], help="an override of every run")
    args = p.parse_args()
    base = Path(tempfile.mkdtemp(prefix="harl-commits-"))
    trees = {}
    for name in (args.before, args.after):
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=10", name], check=True,
                                capture_output=True, text=True).stdout.strip()
        tree = base / commit
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit], check=True,
                       capture_output=True)
        check = subprocess.run([sys.executable, "-c", "import harl; print(harl.__file__)"], cwd=tree,
                               env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
        assert check.stdout.strip().startswith(str(tree)), f"harl imported from {check.stdout!r}, not {tree}"
        trees[commit] = tree
    rates: dict[tuple[str, str], list[float]] = {}
    try:
        for r in range(args.rounds):
            for item in args.pipelines:
                pipeline, steps, *own = item.split(":", 2)
                extra = own[0].split(",") if own else []
                order = list(trees) if r % 2 == 0 else list(reversed(trees))
                for commit in order:
                    rate = run(trees[commit], pipeline, int(steps), args.overrides + extra)
                    rates.setdefault((pipeline, commit), []).append(rate)
                    print(json.dumps({"round": r, "pipeline": pipeline, "commit": commit,
                                      "steady_env_steps_per_s": round(rate, 1),
                                      "load": round(os.getloadavg()[0], 2)}), flush=True)
    finally:
        for tree in trees.values():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    first, second = list(trees)
    for item in args.pipelines:
        pipeline = item.split(":", 1)[0]
        a = statistics.median(rates[(pipeline, first)])
        b = statistics.median(rates[(pipeline, second)])
        print(json.dumps({"pipeline": pipeline, first: round(a, 1), second: round(b, 1),
                          "ratio": round(b / a, 3)}), flush=True)


if __name__ == "__main__":
    main()
