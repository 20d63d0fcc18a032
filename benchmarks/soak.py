"""Memory soak: a run's resident memory once its replay buffer is full must stay flat.

::

    python benchmarks/soak.py pipelines/hasac_mpe_spread.toml --capacity 50000 --steps 200000

Trains the pipeline with ``buffer.capacity`` small enough to fill early, samples the RSS of the
training process (and its children) every ``--every`` seconds, and prints the RSS against env
steps read from metrics.csv, then the growth from the first sample after the buffer filled to
the last.  A leak shows as steady growth after the fill.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants, in MB (Linux /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        total += next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        todo.extend(int(c) for c in children)
    return total / 1024


def env_steps(run_dir: Path) -> int:
    path = run_dir / "metrics.csv"
    if not path.is_file():
        return 0
    rows = list(csv.DictReader(path.open()))
    return int(rows[-1]["env_steps"]) if rows else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pipeline")
    p.add_argument("--capacity", type=int, default=50_000)
    p.add_argument("--steps", type=int, default=200_000)
    p.add_argument("--every", type=float, default=10.0)
    p.add_argument("--set", dest="overrides", action="append", default=[])
    args = p.parse_args()
    run_dir = Path(tempfile.mkdtemp(prefix="harl-soak-")) / "run"
    cmd = [sys.executable, "-m", "harl", "train", args.pipeline, "--quiet", "--run-dir", str(run_dir),
           "--set", f"buffer.capacity={args.capacity}", "--set", f"run.total_env_steps={args.steps}",
           *(x for o in args.overrides for x in ("--set", o))]
    proc = subprocess.Popen(cmd)
    samples: list[tuple[int, float]] = []
    while proc.poll() is None:
        samples.append((env_steps(run_dir), rss_mb(proc.pid)))
        print(f"{samples[-1][0]:>9,} env steps  {samples[-1][1]:8.1f} MB", flush=True)
        time.sleep(args.every)
    full = [(s, m) for s, m in samples if s >= args.capacity]
    if len(full) >= 2:
        (s0, m0), (s1, m1) = full[0], full[-1]
        print(f"after the buffer filled: {m0:.1f} MB at {s0:,} env steps -> {m1:.1f} MB at {s1:,} "
              f"({m1 - m0:+.1f} MB over {s1 - s0:,} env steps)")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
