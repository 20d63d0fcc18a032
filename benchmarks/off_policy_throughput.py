"""Off-policy throughput: env-steps/s of HASAC, HATD3, HADDPG (and more) at HARL's update ratio.

    python benchmarks/off_policy_throughput.py                     # the three MPE spread pipelines
    python benchmarks/off_policy_throughput.py pipelines/had3qn_mpe_spread_discrete.toml --iterations 3
    python benchmarks/off_policy_throughput.py --variant precision=bf16 --variant threads=2
    python benchmarks/off_policy_throughput.py pipelines/matd3_mpe_spread.toml --set env.kind=mpe_torch \
        --variant batch_agents=true --iterations 10       # [policy] batch_agents off and on, interleaved

For each pipeline: build it with its own settings (20 envs; 50 vector steps then 50 gradient
steps of batch 1000 per iteration: HARL's update-to-data ratio), fill the replay buffer
with the warm-up (random actions, not timed), then time ``--iterations`` full iterations
(collect + update; evaluation off).  Reported per pipeline: wall-clock env-steps/s, the
same rate counted in this process's CPU time (what the run would reach alone on one core:
on a shared machine wall time also counts other processes' turns), and the split between
collection and gradient steps.

``--variant`` (repeatable) adds an A/B inside the same process: the timed iterations go
round-robin over the pipeline as configured and each variant (``precision=fp32|bf16``,
``threads=N`` for the torch threads of the gradient steps, ``batch_agents=true|false`` for
``[policy] batch_agents``, comma-separated), so every variant sees the same machine load.
Variants of one ``batch_agents`` value share one built pipeline and its replay buffer; each
value gets its own, built from the same seed (the same warm-up in both).  One row per variant.
With more than one torch thread the CPU time counts every thread: compare wall rates there,
on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import torch

from harl.compose import build_stages
from harl.config.loading import load_spec_and_notes

PIPELINES = ["pipelines/hasac_mpe_spread.toml", "pipelines/hatd3_mpe_spread.toml",
             "pipelines/haddpg_mpe_spread.toml"]


def parse_variant(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        if key not in ("precision", "threads", "batch_agents") or not value:
            raise SystemExit(f"--variant {text!r}: expected precision=fp32|bf16, threads=N and/or batch_agents=true|false")
        out[key] = value
    return out


def warmed(path: str, overrides: list[str]) -> Any:
    """The pipeline's stages, built, their replay buffer filled with the warm-up (not timed) and one
    untimed iteration done (allocations, lazy imports)."""
    spec, _ = load_spec_and_notes(path, ["logging.progress=false", *overrides])
    stages = build_stages(spec)
    collector, buffer = stages.collector, stages.buffer
    while collector.warming_up:
        collector.collect(buffer)
    collector.collect(buffer)
    stages.updater.update(buffer, 0.0)
    return stages


def measure(path: str, iterations: int, overrides: list[str], variants: list[dict[str, str]]) -> list[dict]:
    spec, _ = load_spec_and_notes(path, ["logging.progress=false", *overrides])
    base = {"precision": getattr(spec.run, "precision", "fp32"), "threads": str(torch.get_num_threads()),
            "batch_agents": str(spec.policy.batch_agents).lower()}
    runs = [base, *({**base, **v} for v in variants)]
    built: dict[str, Any] = {}
    try:
        for value in dict.fromkeys(run["batch_agents"] for run in runs):
            built[value] = warmed(path, [*overrides, f"policy.batch_agents={value}"])
        tallies = [{"wall": [0.0, 0.0], "cpu": [0.0, 0.0], "steps": 0, "updates": 0} for _ in runs]
        for it in range(iterations * len(runs)):
            run, tally = runs[it % len(runs)], tallies[it % len(runs)]
            stages = built[run["batch_agents"]]
            collector, buffer, updater = stages.collector, stages.buffer, stages.updater
            t0, c0 = time.perf_counter(), time.process_time()
            tally["steps"] += collector.collect(buffer).env_steps
            t1, c1 = time.perf_counter(), time.process_time()
            updater.precision = run["precision"]
            torch.set_num_threads(int(run["threads"]))
            tally["updates"] += updater.update(buffer, 0.0).updates
            torch.set_num_threads(int(base["threads"]))
            t2, c2 = time.perf_counter(), time.process_time()
            tally["wall"][0] += t1 - t0
            tally["wall"][1] += t2 - t1
            tally["cpu"][0] += c1 - c0
            tally["cpu"][1] += c2 - c1
        rows = []
        for run, tally in zip(runs, tallies):
            total_wall, total_cpu = sum(tally["wall"]), sum(tally["cpu"])
            rows.append({
                "pipeline": path, "overrides": overrides, "precision": run["precision"],
                "update_threads": int(run["threads"]), "batch_agents": run["batch_agents"] == "true",
                "env_steps": tally["steps"],
                "gradient_steps": tally["updates"], "batch_size": spec.buffer.batch_size,
                "env_steps_per_s": round(tally["steps"] / total_wall, 1),
                "env_steps_per_cpu_s": round(tally["steps"] / total_cpu, 1),
                "ms_per_gradient_step_cpu": round(1000 * tally["cpu"][1] / max(tally["updates"], 1), 1),
                "ms_per_gradient_step_wall": round(1000 * tally["wall"][1] / max(tally["updates"], 1), 1),
                "collect_share_wall": round(tally["wall"][0] / total_wall, 3),
                "load_avg_1min": round(os.getloadavg()[0], 2),
            })
        return rows
    finally:
        for stages in built.values():
            stages.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pipelines", nargs="*", default=PIPELINES)
    p.add_argument("--iterations", type=int, default=5, help="timed iterations per variant")
    p.add_argument("--set", dest="overrides", action="append", default=[])
    p.add_argument("--variant", dest="variants", action="append", default=[], type=parse_variant)
    args = p.parse_args()
    for path in args.pipelines:
        for row in measure(path, args.iterations, args.overrides, args.variants):
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
