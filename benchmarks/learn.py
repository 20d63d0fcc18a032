"""Learning benchmark: train a shipped pipeline for a budget and print its evaluation curve.

    python benchmarks/learn.py pipelines/happo_mpe_spread.toml --steps 1_000_000 --eval-every 25
    python benchmarks/learn.py pipelines/mappo_mpe_spread.toml --steps 1_000_000 --set run.seed=2

The run is an ordinary harl run (its directory holds metrics.csv, pipeline.toml and
checkpoints); this script only sets the budget and prints the curve and a summary line.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import harl
from harl.logging.csv_log import read_metrics


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pipeline")
    p.add_argument("--steps", type=lambda s: int(s.replace("_", "")), default=1_000_000)
    p.add_argument("--eval-every", type=int, default=25, help="iterations between evaluations")
    p.add_argument("--set", dest="overrides", action="append", default=[])
    p.add_argument("--dir", default="runs/benchmarks")
    args = p.parse_args()
    overrides = [f"run.total_env_steps={args.steps}", f"evaluator.every_iterations={args.eval_every}",
                 f"logging.dir={args.dir}", "logging.progress=false", *args.overrides]
    start = time.perf_counter()
    result = harl.train(args.pipeline, overrides, quiet=False)
    wall = time.perf_counter() - start
    rows = [r for r in read_metrics(result.run_dir / "metrics.csv") if r["eval_return"]]
    print(f"{'env steps':>12} {'eval return':>12} {'train return':>13}")
    for r in rows:
        print(f"{int(r['env_steps']):>12,} {float(r['eval_return']):>12.2f} {float(r['train_return'] or 'nan'):>13.2f}")
    summary = {
        "pipeline": args.pipeline, "overrides": args.overrides, "env_steps": result.counters.env_steps,
        "wall_s": round(wall, 1), "env_steps_per_s": round(result.counters.env_steps / wall, 1),
        "final_eval_return": float(rows[-1]["eval_return"]) if rows else None,
        "best_eval_return": max(float(r["eval_return"]) for r in rows) if rows else None,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "run_dir": str(result.run_dir),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
