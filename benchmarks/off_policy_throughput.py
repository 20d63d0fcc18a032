"""Off-policy throughput: env-steps/s of HASAC, HATD3, HADDPG (and more) at HARL's update ratio.

    python benchmarks/off_policy_throughput.py                     # the three MPE spread pipelines
    python benchmarks/off_policy_throughput.py pipelines/had3qn_mpe_spread_discrete.toml --iterations 3

For each pipeline: build it with its own settings (20 envs; 50 vector steps then 50 gradient
steps of batch 1000 per iteration: HARL's update-to-data ratio), fill the replay buffer
with the warm-up (random actions, not timed), then time ``--iterations`` full iterations
(collect + update; evaluation off).  Reported per pipeline: wall-clock env-steps/s, the
same rate counted in this process's CPU time (what the run would reach alone on one core:
on a shared machine wall time also counts other processes' turns), and the split between
collection and gradient steps.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from harl.build import build_stages
from harl.pipeline import load_pipeline

PIPELINES = ["pipelines/hasac_mpe_spread.toml", "pipelines/hatd3_mpe_spread.toml",
             "pipelines/haddpg_mpe_spread.toml"]


def measure(path: str, iterations: int, overrides: list[str]) -> dict:
    spec, _ = load_pipeline(path, ["logging.progress=false", *overrides])
    stages = build_stages(spec)
    try:
        collector, buffer, updater = stages.collector, stages.buffer, stages.updater
        while collector.warming_up:  # fill the buffer with the warm-up (not timed)
            collector.collect(buffer)
        collector.collect(buffer)
        updater.update(buffer, 0.0)  # one untimed iteration: allocations, lazy imports
        wall = {"collect": 0.0, "update": 0.0}
        cpu = {"collect": 0.0, "update": 0.0}
        steps = updates = 0
        for _ in range(iterations):
            t0, c0 = time.perf_counter(), time.process_time()
            steps += collector.collect(buffer).env_steps
            t1, c1 = time.perf_counter(), time.process_time()
            updates += updater.update(buffer, 0.0).updates
            t2, c2 = time.perf_counter(), time.process_time()
            wall["collect"] += t1 - t0
            wall["update"] += t2 - t1
            cpu["collect"] += c1 - c0
            cpu["update"] += c2 - c1
        total_wall, total_cpu = sum(wall.values()), sum(cpu.values())
        return {
            "pipeline": path, "overrides": overrides, "env_steps": steps, "gradient_steps": updates,
            "batch_size": spec.buffer.batch_size, "torch_threads": torch.get_num_threads(),
            "env_steps_per_s": round(steps / total_wall, 1),
            "env_steps_per_cpu_s": round(steps / total_cpu, 1),
            "ms_per_gradient_step_cpu": round(1000 * cpu["update"] / max(updates, 1), 1),
            "collect_share_wall": round(wall["collect"] / total_wall, 3),
        }
    finally:
        stages.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pipelines", nargs="*", default=PIPELINES)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--set", dest="overrides", action="append", default=[])
    args = p.parse_args()
    for path in args.pipelines:
        print(json.dumps(measure(path, args.iterations, args.overrides)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
