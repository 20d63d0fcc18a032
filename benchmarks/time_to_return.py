"""Time-to-return: wall-clock seconds, whole process (start-up included), until a run's
evaluation return first reaches a target; the median over seeds.  harl and PKU-MARL/HARL
side by side on the same physics and the same evaluation protocol.

    # harl: any pipeline; the run is stopped once an evaluation reaches the target
    python benchmarks/time_to_return.py harl pipelines/happo_mpe_torch_spread_fast.toml \\
        --target -97.5 --seeds 1,2,3
    # HARL (its own venv, a checkout of PKU-MARL/HARL): HAPPO on its MPE simple_spread
    python benchmarks/time_to_return.py HARL --harl-dir HARL --harl-python HARL-venv/bin/python \\
        --target -97.5 --seeds 1,2,3 --eval-interval 5

Targets are on the printed scale of the env they run on: -97.5 on HARL's (pettingzoo 1.22,
and harl's ``variant = "pettingzoo_1.22"``) is -60 on mpe2's (37.5 less self-collision
penalty).  Both evaluate deterministically on 20 episodes (HARL's default and harl's
``[evaluator] episodes``); ``--eval-interval`` sets HARL's (in iterations of 4,000 env steps)
to match harl's evaluation cadence.  Each line printed is one seed; the last the median.
Run on a quiet machine: these are wall-clock figures.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_EVAL = re.compile(r"Evaluation average episode reward is (-?\d+(?:\.\d+)?(?:e-?\d+)?)")
_STEPS = re.compile(r"total num timesteps (\d+)/")


def _stop(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def harl_seed(pipeline: str, seed: int, target: float, limit: float, sets: list[str]) -> tuple[float | None, int]:
    """(seconds from process start to the first evaluation >= target or None, env steps then)."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "harl", "train", pipeline, "--quiet", "--run-dir", str(run_dir),
               "--set", f"run.seed={seed}", *[a for s in sets for a in ("--set", s)]]
        start = time.perf_counter()
        process = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL)
        seen = 0
        try:
            while time.perf_counter() - start < limit:
                metrics = run_dir / "metrics.csv"
                if metrics.exists():
                    with metrics.open(newline="") as f:
                        rows = list(csv.DictReader(f))
                    for row in rows[seen:]:
                        if row.get("eval_return") and float(row["eval_return"]) >= target:
                            return time.perf_counter() - start, int(float(row["env_steps"]))
                    seen = max(seen, len(rows) - 1)  # the last row may be half-written
                if process.poll() is not None:
                    return None, 0
                time.sleep(0.05)
            return None, 0
        finally:
            _stop(process)


def HARL_seed(harl_dir: Path, python: str, seed: int, target: float, limit: float, eval_interval: int,
              extra: list[str]) -> tuple[float | None, int]:
    """HARL's HAPPO on pettingzoo_mpe simple_spread, stopped at its first evaluation >= target."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [python, "-u", "examples/train.py", "--algo", "happo", "--env", "pettingzoo_mpe", "--exp_name", "ttr",
               "--seed", str(seed), "--cuda", "False", "--torch_threads", "1", "--eval_interval", str(eval_interval),
               "--log_dir", tmp, *extra]
        start = time.perf_counter()
        process = subprocess.Popen(cmd, cwd=harl_dir, start_new_session=True, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
        assert process.stdout is not None
        steps = 0
        try:
            for raw in process.stdout:
                line = raw.decode(errors="replace")
                if m := _STEPS.search(line):
                    steps = int(m.group(1))
                if (m := _EVAL.search(line)) and float(m.group(1)) >= target:
                    return time.perf_counter() - start, steps
                if time.perf_counter() - start > limit:
                    break
            return None, steps
        finally:
            _stop(process)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="who", required=True)
    ours = sub.add_parser("harl")
    ours.add_argument("pipeline")
    ours.add_argument("--set", action="append", default=[], help="a pipeline override (repeatable)")
    theirs = sub.add_parser("HARL")
    theirs.add_argument("--harl-dir", default="HARL")
    theirs.add_argument("--harl-python", default="python")
    theirs.add_argument("--eval-interval", type=int, default=5, help="HARL's eval_interval (iterations)")
    theirs.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more HARL command-line arguments")
    for s in (ours, theirs):
        s.add_argument("--target", type=float, required=True)
        s.add_argument("--seeds", default="1,2,3")
        s.add_argument("--limit", type=float, default=3600.0, help="give a seed up after this many seconds")
    args = p.parse_args()
    times = []
    for seed in (int(s) for s in args.seeds.split(",")):
        if args.who == "harl":
            took, steps = harl_seed(args.pipeline, seed, args.target, args.limit, args.set)
        else:
            took, steps = HARL_seed(Path(args.harl_dir), args.harl_python, seed, args.target, args.limit,
                                    args.eval_interval, args.extra)
        load = os.getloadavg()[0]
        shown = "not reached" if took is None else f"{took:.1f} s at {steps:,} env steps"
        print(f"{args.who} seed {seed}: eval >= {args.target} {shown} (load {load:.1f})", flush=True)
        times.append(float("inf") if took is None else took)
    median = statistics.median(times)
    print(f"{args.who}: median time to eval >= {args.target} over {len(times)} seeds: {median:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
