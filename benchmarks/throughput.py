"""Throughput benchmark: where an on-policy iteration's time and CPU go, and peak memory.

    python benchmarks/throughput.py                       # HAPPO and MAPPO, HARL's MPE settings
    python benchmarks/throughput.py --iterations 5 --set collector.backend=inline
    python benchmarks/throughput.py pipelines/happo_vmas_transport.toml --iterations 2 \
        --set collector.n_envs=1024 --set run.device=cpu      # VMAS on tensors end to end
    python benchmarks/throughput.py pipelines/happo_mpe_torch_spread.toml --rounds 5 \
        --variant policy.batch_agents=true --variant updater.compile=on   # interleaved rounds, medians

For each pipeline, one JSON line per figure, each with the 1-minute load average at the
time it was taken (``load``: on a shared machine wall-clock rates move with it; the CPU
figures move much less):

- ``raw_inline``: the pipeline's env in an ``InlineVectorEnv`` of the same ``n_envs`` in
  this process (one core), under pre-drawn uniformly random actions, with the CPU time
  of one env step; a tensor-native env (VMAS) is its own vector env and gets tensors.
- ``raw_vector``: the pipeline's own vector env under the same actions (``subprocess``:
  every worker, on every core), with the workers' CPU time per env step.
- ``iteration``: after one warm-up iteration, ``--iterations`` full iterations (collect,
  returns, update; evaluation off): the collection-phase rate (``collect_vs_raw``: its
  share of the raw vector rate), the whole-iteration rate, and the CPU split per env step:
  ``env`` (the workers' share at the inline CPU cost per env step; inline: the time
  inside ``venv.step``), ``transfer`` (the rest of the workers' CPU, plus the parent's
  inside ``venv.step``: IPC, copies), ``inference`` (policy and critic in the collector),
  ``collector`` (the rest of the collection: buffer writes), ``update`` (returns and
  update).  Process CPU comes from ``time.process_time`` (this process) and
  ``/proc/<pid>/stat`` (each worker; Linux); wall time from ``time.perf_counter``.
- ``memory``: peak RSS of this process (``ru_maxrss``) and of each worker (``VmHWM``),
  and their sum (an upper bound of the tree's peak: shared pages count in each).

torch runs on the pipeline's ``[run] torch_threads`` (default 1).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from harl.compose import build_stages
from harl.config.loading import load_spec_and_notes
from harl.envs.protocol import is_tensor_native
from harl.envs.vector import InlineVectorEnv

PIPELINES = ["pipelines/happo_mpe_spread.toml", "pipelines/mappo_mpe_spread.toml"]
TICK = os.sysconf("SC_CLK_TCK")


def load() -> float:
    return round(os.getloadavg()[0], 2)


def worker_pids(venv: Any) -> list[int]:
    return [w.process.pid for w in getattr(venv, "_workers", [])]


def proc_cpu(pids: list[int]) -> float:
    """User + system CPU seconds of processes ``pids`` so far."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def peak_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def random_actions(venv: Any, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for space in venv.action_spaces:
        if hasattr(space, "nvec"):
            out.append(np.stack([rng.integers(0, n, size=venv.n_envs) for n in space.nvec], 1).astype(np.float32))
        elif hasattr(space, "n"):
            out.append(rng.integers(0, space.n, size=(venv.n_envs, 1)).astype(np.float32))
        else:
            out.append(rng.uniform(space.low, space.high, size=(venv.n_envs, *space.shape)).astype(np.float32))
    return out


def raw_rate(venv: Any, steps: int) -> dict[str, float]:
    """Env steps/s and CPU µs per env step (this process, the workers) under random actions."""
    rng = np.random.default_rng(0)
    actions: list[Any] = [random_actions(venv, rng) for _ in range(16)]
    if is_tensor_native(venv):
        actions = [[torch.as_tensor(a, device=venv.device) for a in batch] for batch in actions]
    venv.reset(seed=0)
    for t in range(5):
        venv.step(actions[t])
    pids = worker_pids(venv)
    wall, cpu, workers = time.perf_counter(), time.process_time(), proc_cpu(pids)
    for t in range(steps):
        venv.step(actions[t % 16])
    n = steps * venv.n_envs
    wall, cpu, workers = time.perf_counter() - wall, time.process_time() - cpu, proc_cpu(pids) - workers
    return {"env_steps_per_s": round(n / wall), "parent_cpu_us_per_env_step": round(cpu / n * 1e6, 1),
            "workers_cpu_us_per_env_step": round(workers / n * 1e6, 1), "load": load()}


class Timed:
    """Accumulates this process's CPU seconds spent in wrapped methods."""

    def __init__(self) -> None:
        self.cpu = 0.0

    def wrap(self, obj: Any, name: str) -> None:
        method: Callable[..., Any] | None = getattr(obj, name, None)
        if method is None:
            return

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return method(*args, **kwargs)
            finally:
                self.cpu += time.process_time() - start

        object.__setattr__(obj, name, timed)


def iteration_rates(stages: Any, iterations: int, inline_cpu_per_step: float) -> dict[str, Any]:
    collector, venv = stages.collector, stages.venv
    inference, stepping = Timed(), Timed()
    for obj, names in ((getattr(collector, "team", None), ("act",)),
                       (getattr(collector, "critic", None), ("value", "step")),
                       (getattr(collector, "team", None), ("explore",))):
        for name in names if obj is not None else ():
            inference.wrap(obj, name)
    stepping.wrap(venv, "step")
    pids = worker_pids(venv)
    n = stages.buffer.n_samples
    totals = np.zeros(5)  # collect wall, collect cpu, update wall, update cpu, workers cpu
    inference_cpu = stepping_cpu = 0.0
    for i in range(iterations + 1):
        w0, c0, k0 = time.perf_counter(), time.process_time(), proc_cpu(pids)
        i0, s0 = inference.cpu, stepping.cpu
        stages.collector.collect(stages.buffer)
        w1, c1, k1 = time.perf_counter(), time.process_time(), proc_cpu(pids)
        if stages.returns is not None:
            stages.returns.compute(stages.buffer)
        stages.updater.update(stages.buffer, 0.0)
        w2, c2 = time.perf_counter(), time.process_time()
        if i > 0:  # the first iteration warms up allocators and caches
            totals += (w1 - w0, c1 - c0, w2 - w1, c2 - c1, k1 - k0)
            inference_cpu += inference.cpu - i0
            stepping_cpu += stepping.cpu - s0
    collect_wall, collect_cpu, update_wall, update_cpu, workers_cpu = totals / iterations
    inference_cpu, stepping_cpu = inference_cpu / iterations, stepping_cpu / iterations
    if pids:
        env_cpu = min(workers_cpu, inline_cpu_per_step * n)
        transfer_cpu = workers_cpu - env_cpu + stepping_cpu
    else:
        env_cpu, transfer_cpu = stepping_cpu, 0.0
    split = {"env": env_cpu, "transfer": transfer_cpu, "inference": inference_cpu,
             "collector": collect_cpu - inference_cpu - stepping_cpu, "update": update_cpu}
    return {
        "collect_env_steps_per_s": round(n / collect_wall), "train_env_steps_per_s": round(n / (collect_wall + update_wall)),
        "collect_s_per_iteration": round(collect_wall, 3), "update_s_per_iteration": round(update_wall, 3),
        "cpu_us_per_env_step": {k: round(v / n * 1e6, 1) for k, v in split.items()},
        "cpu_share": {k: round(v / sum(split.values()), 3) for k, v in split.items()},
        "load": load(),
    }


def compare_variants(path: str, overrides: list[str], variants: list[str], rounds: int, iterations: int) -> None:
    """Each variant built afresh in every round, the variants interleaved (so the machine's load
    falls on all of them alike); one JSON line per variant and round, then the medians."""
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for r in range(rounds):
        for variant in variants:
            extra = [x for x in variant.split(",") if x]
            spec, _ = load_spec_and_notes(path, ["logging.progress=false", *overrides, *extra])
            start = time.perf_counter()
            stages = build_stages(spec)
            try:
                build_s = time.perf_counter() - start
                rates = iteration_rates(stages, iterations, 0.0)
            finally:
                stages.close()
            rates["build_and_first_iteration_s"] = round(time.perf_counter() - start - rates["collect_s_per_iteration"]
                                                         * iterations - rates["update_s_per_iteration"] * iterations, 2)
            rates["build_s"] = round(build_s, 2)
            results[variant].append(rates)
            print(json.dumps({"pipeline": path, "variant": variant or "baseline", "round": r, "figure": "iteration",
                              **rates}), flush=True)
    print(f"\n{path}, medians of {rounds} interleaved rounds ({iterations} iterations each, after one warm-up):")
    print(f"{'variant':<56} {'train/s':>8} {'collect/s':>9} " + " ".join(f"{k:>9}" for k in
                                                                       ("inference", "env", "collector", "update"))
          + "   (CPU us per env step)  load")
    for variant, rows in results.items():
        def med(get: Callable[[dict[str, Any]], float], rows: list[dict[str, Any]] = rows) -> float:
            return float(np.median([get(row) for row in rows]))
        split = " ".join(f"{med(lambda row, k=k: row['cpu_us_per_env_step'][k]):>9.1f}"
                         for k in ("inference", "env", "collector", "update"))
        loads = [row["load"] for row in rows]
        print(f"{(variant or 'baseline')[:56]:<56} {med(lambda row: row['train_env_steps_per_s']):>8.0f} "
              f"{med(lambda row: row['collect_env_steps_per_s']):>9.0f} {split}   {min(loads)}-{max(loads)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pipelines", nargs="*", default=PIPELINES)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--raw-steps", type=int, default=400, help="vector steps of each raw-rate figure")
    p.add_argument("--set", dest="overrides", action="append", default=[])
    p.add_argument("--variant", action="append", default=[],
                   help="comma-separated overrides of one variant (repeatable): the variants and the pipeline as "
                        "given run interleaved for --rounds rounds, then one line of medians per variant")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the interleaved variants")
    args = p.parse_args()
    if args.variant:
        for path in args.pipelines:
            compare_variants(path, args.overrides, ["", *args.variant], args.rounds, args.iterations)
        return
    for path in args.pipelines:
        spec, _ = load_spec_and_notes(path, ["logging.progress=false", *args.overrides])
        head = {"pipeline": path, "overrides": args.overrides, "n_envs": spec.collector.n_envs,
                "backend": spec.collector.backend}
        stages = build_stages(spec)
        try:
            native = is_tensor_native(stages.venv)
            inline = raw_rate(stages.venv if native else InlineVectorEnv(spec.env, spec.collector.n_envs, 0),
                              args.raw_steps)
            print(json.dumps({**head, "figure": "raw_inline", **inline}), flush=True)
            raw = raw_rate(stages.venv, args.raw_steps)
            print(json.dumps({**head, "figure": "raw_vector", **raw}), flush=True)
            rates = iteration_rates(stages, args.iterations, inline["parent_cpu_us_per_env_step"] * 1e-6)
            rates["collect_vs_raw"] = round(rates["collect_env_steps_per_s"] / raw["env_steps_per_s"], 3)
            print(json.dumps({**head, "figure": "iteration", **rates}), flush=True)
            workers_kb = [peak_kb(pid) for pid in worker_pids(stages.venv)]
        finally:
            stages.close()
        parent_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({**head, "figure": "memory", "parent_peak_mb": round(parent_kb / 1024, 1),
                          "workers_peak_mb": [round(k / 1024, 1) for k in workers_kb],
                          "tree_peak_mb": round((parent_kb + sum(workers_kb)) / 1024, 1), "load": load()}), flush=True)


if __name__ == "__main__":
    main()
