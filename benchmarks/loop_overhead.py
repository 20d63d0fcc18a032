"""What harl's training loop adds to the phases of an iteration, in one process (issue 58).

    python benchmarks/loop_overhead.py                         # IPPO on JaxMARL's settings, compiled, 1 thread
    python benchmarks/loop_overhead.py --threads 2 --iterations 60 --rounds 2

The stages of one run are built once and compiled (10 iterations of ``Trainer.train``); then, per round,
the same stages are timed two ways, one after the other:

- **alone**: ``collector.collect``, ``returns.compute`` and ``updater.update`` called in a bare loop
  (``--alone`` iterations), as ``benchmarks/update_profile.py`` times them;
- **loop**: ``Trainer.train(max_iterations=--iterations)``, harl's own loop (the non-finite check, the
  RNG snapshot, the metrics row, callbacks, the checkpoint schedule), its iteration time read from the
  run's ``wall_time`` as the side-by-side scripts read their steady rate, and the whole call's time
  beside it (the row, the sinks and the last iteration's evaluation and save included).

Printed per way: the iteration's milliseconds, each phase's median and the rest.  The phases are timed
by wrapping the stages' methods, so the two ways time the same calls.  The machine's other work shows
in every number: the load average is printed beside each line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import harl  # noqa: E402

PHASES = (("collector", "collect"), ("returns", "compute"), ("updater", "update"))


def timed(stages: Any, record: list[tuple[str, float]]) -> None:
    """Wrap each phase's method of ``stages`` so that every call appends (phase, seconds) to ``record``."""
    for stage, method in PHASES:
        obj = getattr(stages, stage)
        inner = getattr(obj, method)

        def wrapper(*args: Any, _inner: Any = inner, _name: str = method, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = _inner(*args, **kwargs)
            record.append((_name, time.perf_counter() - start))
            return out

        setattr(obj, method, wrapper)


def line(label: str, per_iteration_s: float, record: list[tuple[str, float]]) -> str:
    phases = {name: statistics.median(s for n, s in record if n == name) * 1e3 for _, name in PHASES}
    rest = per_iteration_s * 1e3 - sum(phases.values())
    return (f"{label:>6}: {per_iteration_s * 1e3:7.1f} ms an iteration  "
            + "  ".join(f"{k} {v:6.1f}" for k, v in phases.items()) + f"  rest {rest:5.1f}"
            + f"  load {os.getloadavg()[0]:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pipeline", default="pipelines/ippo_mpe_spread_jaxmarl.toml")
    p.add_argument("--threads", type=int, default=1, help="run.torch_threads")
    p.add_argument("--iterations", type=int, default=60, help="iterations of harl's loop per round")
    p.add_argument("--alone", type=int, default=6, help="iterations of the bare phases per round")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--set", action="append", default=[], help="a pipeline override (repeatable)")
    args = p.parse_args()
    overrides = ["collector.compile=on", "updater.compile=on", f"run.torch_threads={args.threads}",
                 "evaluator.every_iterations=1000000", "run.total_env_steps=100000000", *args.set]
    record: list[tuple[str, float]] = []
    run_dir = Path(tempfile.mkdtemp(prefix="harl-loop-overhead-")) / "run"
    try:
        with harl.start(ROOT / args.pipeline, overrides, run_dir=run_dir) as trainer:
            stages = trainer.stages
            timed(stages, record)
            trainer.train(quiet=True, max_iterations=10)  # compiles
            for _ in range(args.rounds):
                record.clear()
                start = time.perf_counter()
                for _ in range(args.alone):
                    stages.collector.collect(stages.buffer)
                    stages.returns.compute(stages.buffer)
                    stages.updater.update(stages.buffer, progress=trainer.progress)
                print(line("alone", (time.perf_counter() - start) / args.alone, record), flush=True)
                record.clear()
                wall, start = trainer.counters.wall_time, time.perf_counter()
                trainer.train(quiet=True, max_iterations=args.iterations)
                whole = (time.perf_counter() - start) / args.iterations
                print(line("loop", (trainer.counters.wall_time - wall) / args.iterations, record)
                      + f"  (the whole call: {whole * 1e3:.1f} ms an iteration)", flush=True)
    finally:
        shutil.rmtree(run_dir.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
