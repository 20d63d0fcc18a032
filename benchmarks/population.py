"""A population of seeds in one process against the same seeds as separate processes.

    python benchmarks/population.py --seeds 16 --iterations 3           # HARL's settings: 20 worlds x 200 steps
    python benchmarks/population.py --seeds 16 --iterations 3 --set collector.n_envs=128 --set collector.rollout_length=32
    python benchmarks/population.py --pipeline pipelines/matd3_mpe_spread.toml --seeds 8 --iterations 10 \
        --set env.kind=mpe_torch --set collector.warmup_steps=0           # off-policy: HARL's 20 envs x 50 steps

Three measurements, one after the other, on the same pipeline and budget (``--iterations``
per seed), whole processes timed from start to exit:

1. ``harl train P --seeds 1-S --vectorize`` (one population, ``--threads`` torch threads);
2. ``harl train P --seeds 1-S --vectorize --jobs J`` (J populations, one process and one torch
   thread each);
3. ``harl train P --seeds 1-S --jobs J`` (J processes at a time, one seed and one torch thread each);
4. in this process, one population iteration instrumented: where the time goes per env
   step (env, inference, buffer, returns, update).

Prints aggregate env-steps/s of 1-3 (whole processes, and steady: between start-up and exit),
their ratios to 3, the breakdown, and peak resident memory.  Run it on a quiet machine (the
load is printed).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

PIPELINE = "pipelines/happo_mpe_torch_spread.toml"
HARL_SETTINGS = ["collector.n_envs=20", "collector.rollout_length=200"]


def _timed(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB, the largest child's) of ``cmd``."""
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def steady_rate(run_dirs: list[Path], concurrent: int) -> float:
    """Aggregate env-steps/s between start-up and exit: per iteration after the first, each run's
    ``steps_per_s`` (collect + update); summed over the members of a population (``concurrent`` =
    0), or a run's median times the processes running at once."""
    import csv
    import statistics

    per_run = []
    for d in run_dirs:
        with (d / "metrics.csv").open(newline="") as f:
            per_run.append([float(r["steps_per_s"]) for r in csv.DictReader(f)][1:])
    if concurrent:
        return statistics.median(r for rates in per_run for r in rates) * concurrent
    return sum(statistics.median(rates) for rates in per_run)


def _wrap(owner: Any, name: str, bucket: str, times: dict[str, float]) -> None:
    inner: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            times[bucket] += time.perf_counter() - start

    setattr(owner, name, timed)


def breakdown(pipeline: str, seeds: int, sets: list[str], threads: int) -> dict[str, float]:
    """Microseconds per env step of each stage in one instrumented population iteration (the second)."""
    from harl.buffers.rollout import RolloutBuffer
    from harl.collect.off_policy import OffPolicyCollector
    from harl.collect.on_policy import OnPolicyCollector
    from harl.nets.population import Stack
    from harl.population import driver
    from harl.sweep.plan import Request, Sweep

    times: dict[str, float] = defaultdict(float)
    with tempfile.TemporaryDirectory() as tmp:
        request = Request.parse(pipeline, [*sets, "logging.progress=false", f"run.torch_threads={threads}",
                                           "evaluator.every_iterations=1000"], f"1-{seeds}", [])
        sweep = Sweep.new(request, Path(tmp) / "pop", None)
        trainers, venv = driver.open_population([s.run_dir for s in sweep.states], [s.spec for s in sweep.states],
                                                pipeline)
        with driver.Population(trainers, venv, [s.label for s in sweep.states]) as pop:
            pop.collect()  # first rollout: warm-up, not timed
            _wrap(venv, "step", "env", times)
            _wrap(Stack, "call", "inference", times)
            for name in ("insert", "inputs", "roll_over"):
                _wrap(RolloutBuffer, name, "buffer", times)
            _wrap(OnPolicyCollector, "observe", "buffer", times)
            _wrap(OffPolicyCollector, "random_actions", "inference", times)  # off-policy warm-up draws
            for name in ("inputs", "record"):  # off-policy (record stores the step)
                _wrap(OffPolicyCollector, name, "buffer", times)
            _wrap(OnPolicyCollector, "finish", "inference", times)
            start = time.perf_counter()
            rollouts = pop.collect()
            times["collect (all)"] = time.perf_counter() - start
            start = time.perf_counter()
            for s in pop.alive:
                stages = pop.trainers[s].stages
                stages.returns.compute(stages.buffer)
            times["returns"] = time.perf_counter() - start
            start = time.perf_counter()
            driver.population_update([t.stages.updater for t in pop.trainers], [t.stages.buffer for t in pop.trainers],
                                     0.0, batched=pop.batched)
            times["update"] = time.perf_counter() - start
            steps = sum(r.env_steps for r in rollouts.values())
    times["other collect"] = times["collect (all)"] - times["env"] - times["inference"] - times["buffer"]
    return {k: 1e6 * v / steps for k, v in times.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pipeline", default=PIPELINE)
    p.add_argument("--seeds", type=int, default=16)
    p.add_argument("--iterations", type=int, default=3, help="iterations per seed")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--threads", type=int, default=2, help="torch threads of the population process")
    p.add_argument("--set", action="append", default=None, help="pipeline overrides (default: HARL's settings)")
    args = p.parse_args()
    sets = HARL_SETTINGS if args.set is None else args.set
    from harl.config.loading import load_spec_and_notes

    collector = load_spec_and_notes(Path(args.pipeline), sets)[0].collector
    per_iteration = collector.n_envs * getattr(collector, "rollout_length", 1)
    budget = per_iteration * args.iterations
    total = budget * args.seeds
    common = [sys.executable, "-m", "harl", "train", args.pipeline, "--seeds", f"1-{args.seeds}", "--quiet",
              *[a for s in [*sets, f"run.total_env_steps={budget}", "evaluator.every_iterations=1000",
                            "checkpoint.every_iterations=1000"] for a in ("--set", s)]]
    print(f"{args.seeds} seeds x {budget:,} env steps ({args.iterations} iterations of {per_iteration:,}); "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} before", flush=True)
    out = Path(tempfile.mkdtemp())
    runs = [("one population", ["--vectorize", "--set", f"run.torch_threads={args.threads}"], 0),
            (f"{args.jobs} populations", ["--vectorize", "--jobs", str(args.jobs), "--set", "run.torch_threads=1"], 0),
            (f"--jobs {args.jobs} processes", ["--jobs", str(args.jobs), "--set", "run.torch_threads=1"], args.jobs)]
    try:
        measured = []
        for k, (name, flags, concurrent) in enumerate(runs):
            wall, rss = _timed([*common, *flags, "--run-dir", str(out / str(k))])
            steady = steady_rate(sorted(p for p in (out / str(k)).iterdir() if p.is_dir()), concurrent)
            measured.append((wall, steady))
            threads = args.threads if k == 0 else 1
            print(f"{name} ({threads} torch thread{'s' if threads > 1 else ''} each): {wall:.1f} s, "
                  f"{total / wall:,.0f} env-steps/s whole process, {steady:,.0f} steady; peak RSS of a child so far "
                  f"{rss / 1024:,.0f} MiB (load {os.getloadavg()[0]:.2f})", flush=True)
        base_wall, base_steady = measured[-1]
        for (name, _, _), (wall, steady) in zip(runs[:-1], measured[:-1]):
            print(f"{name} / --jobs {args.jobs} processes: {base_wall / wall:.2f}x whole processes, "
                  f"{steady / base_steady:.2f}x steady")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    parts = breakdown(args.pipeline, args.seeds, sets, args.threads)
    print("population, microseconds per env step: " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
