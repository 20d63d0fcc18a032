"""Per-iteration cost of the MLflow and wandb trackers: microseconds per metrics row written.

    python benchmarks/tracker_overhead.py [--rows 300] [--out DIR]

Each tracker is opened as a run opens it (MLflow: a local file store; wandb: offline) and
writes ``--rows`` rows of the width a HAPPO 3-agent run logs (32 columns); the time of
``write`` is what an iteration pays.  Prints the load beside the numbers: on a busy machine
they are upper bounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import attrs

from harl.config.run import LoggingConfig
from harl.logging.sink import SinkContext, close_sinks, open_sinks

PIPELINE = '[run]\nseed = 1\n[env]\nkind = "mpe"\n[updater.objective]\nkind = "ppo"\nclip = 0.2\n'


def row(i: int) -> dict[str, float | int | str | None]:
    base = {"iteration": i, "env_steps": 4000 * i, "episodes": 160 * i, "wall_time": 1.5 * i,
            "steps_per_s": 2700.0, "train_return": -60.0 + i / 100, "train_length": 25.0,
            "eval_return": None, "value_loss": 0.05, "critic_grad_norm": 0.3, "lr_scale": 1.0,
            "agent_order": "0-1-2"}
    for a in range(3):
        base.update({f"agent{a}_{k}": 0.1 * a + i / 1000 for k in
                     ("policy_loss", "entropy", "ratio", "grad_norm", "factor", "kl", "clip_frac")})
    return base


def measure(name: str, rows: int, folder: Path) -> list[float]:
    run_dir = folder / name / "run"
    run_dir.mkdir(parents=True)
    (run_dir / "pipeline.toml").write_text(PIPELINE)
    config = attrs.evolve(LoggingConfig(), **{name: True}, wandb_mode="offline")
    (tracker,) = open_sinks({name: getattr(config, name)}, SinkContext(run_dir, PIPELINE))
    times = []
    for i in range(1, rows + 1):
        start = time.perf_counter()
        tracker.write(row(i))
        times.append((time.perf_counter() - start) * 1e6)
    close_sinks([tracker], None)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--out", type=Path, default=None, help="keep the stores here (default: a temp dir)")
    args = parser.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="harl-trackers-"))
    for name in ("mlflow", "wandb"):
        times = measure(name, args.rows, folder)
        print(f"{name}: {statistics.median(times):.0f} us median, {statistics.mean(times):.0f} us mean, "
              f"{max(times):.0f} us max per iteration ({args.rows} rows of {len(row(1))} columns)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; stores under {folder}")


if __name__ == "__main__":
    main()
