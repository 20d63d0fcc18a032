"""The on-policy minibatch step eager against compiled (``[updater] compile``, the fused step; issue 49,
item 2; until issue 58 ``[policy] compile``'s two graphs, which the figures in docs/performance.md measured).

    python benchmarks/compiled_update.py [--rounds 2] [--updates 8] [--cases happo_actor,...] [--modes eager,on,on_py]
    python benchmarks/compiled_update.py --threads [--rounds 2] [--iterations 6]   # [run] torch_threads 1 vs 2

Each case is one learner of a shipped pipeline, its shapes as that pipeline's update sees them:

    happo_actor    happo_mpe_torch_spread: an agent's 128-128 actor, Box(5), 4,096 rows, 1 minibatch
    happo_critic   its EP V critic, 128-128, 4,096 rows
    mappo_actor    mappo_smax_3m: the shared 128x3 actor, Discrete(9) with masks, 9,600 rows, 4 minibatches
    mappo_critic   its EP V critic, 128x3, 3,200 rows, 4 minibatches

and each mode a fresh process (``OMP_NUM_THREADS=1``) with an empty inductor cache (a cold compile,
what a first run pays): ``eager``; ``on`` (the fused minibatch step, forward, backward, clip and Adam,
compiled as one graph, ``harl.update.fused``, with inductor's C++ wrapper as harl sets it); ``on_py`` (the same
with inductor's default Python wrapper, ``cpp_wrapper = False``).  Reported per mode: the seconds of the first update (the compile), and the median wall and CPU (this process's,
less sensitive to a loaded machine) milliseconds per minibatch step after it; modes interleaved
per round, the load beside each line.

``--threads`` (issue 49, item 5): ``happo_mpe_torch_spread`` and ``mappo_smax_3m`` as whole
``harl train`` processes with ``run.torch_threads`` 1 and 2, interleaved, ``--iterations``
iterations each (evaluation and checkpoints off): the steady env steps per second (the mean of
``steps_per_s`` after the first iteration) and the update's share of the time (the progress line).
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
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

CASES = ("happo_actor", "happo_critic", "mappo_actor", "mappo_critic")
MODES = ("eager", "on", "on_py")


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def learner(case: str, mode: str) -> tuple[object, object]:
    """(learner, a function taking one update with it) of ``case`` in ``mode``."""
    import numpy as np
    import torch
    from gymnasium import spaces

    from harl.buffers.rollout import AgentBatch
    from harl.policy.on_policy import Actor, PolicyConfig
    from harl.update import compiled as compiled_module
    from harl.update.objectives.ppo import PPOConfig, ppo_learner
    from harl.update.v_critic import VCritic, VCriticConfig, VCriticLearner

    if mode == "on_py":
        compiled_module.INDUCTOR_OPTIONS["cpp_wrapper"] = False
    fused = mode != "eager"
    g = torch.Generator().manual_seed(0)
    happo = case.startswith("happo")
    widths = (128, 128) if happo else (128, 128, 128)
    if case.endswith("actor"):
        obs_dim, rows, minibatches = (18, 4096, 1) if happo else (30, 9600, 4)
        space = spaces.Box(-1, 1, (5,), np.float32) if happo else spaces.Discrete(9)
        actor = Actor(obs_dim, space, PolicyConfig(hidden_sizes=widths))
        learn = ppo_learner(actor, PPOConfig(epochs=5, minibatches=minibatches), g)
        if fused:
            learn.enable_fused()
        width = 5 if happo else 1
        actions = torch.rand(rows, 5) * 2 - 1 if happo else torch.randint(0, 9, (rows, 1)).float()
        avail = None if happo else (torch.rand(rows, 9) > 0.2).float()
        if avail is not None:
            avail[torch.arange(rows), actions[:, 0].long()] = 1.0
        batch = AgentBatch(obs=torch.randn(rows, obs_dim), actions=actions,
                           old_log_probs=-1.0 - 0.1 * torch.rand(rows, width), avail=avail,
                           active=torch.ones(rows, 1), advantages=torch.randn(rows, 1))
        factor = torch.ones(rows, 1)
        return learn, lambda: learn.update(batch, factor)
    state_dim, rows, minibatches = (54, 4096, 1) if happo else (48, 3200, 4)
    config = VCriticConfig(hidden_sizes=widths, epochs=5, minibatches=minibatches)
    critic = VCritic(state_dim, 3, config, state_space=spaces.Box(-1, 1, (state_dim,), np.float32))
    learn_v = VCriticLearner(critic, config, g)
    if fused:
        learn_v.enable_fused()
    states, old, returns = torch.randn(rows, state_dim), torch.randn(rows), torch.randn(rows)
    return learn_v, lambda: learn_v.update(states, old, returns)


def child(case: str, mode: str, updates: int) -> None:
    import torch

    torch.set_num_threads(1)
    learn, update = learner(case, mode)
    config: Any = learn.config  # type: ignore[attr-defined]
    per_update = config.epochs * config.minibatches
    t0 = time.perf_counter()
    update()  # type: ignore[operator]
    first = time.perf_counter() - t0
    times, cpu = [], []
    for _ in range(updates):
        t0, c0 = time.perf_counter(), time.process_time()
        update()  # type: ignore[operator]
        times.append((time.perf_counter() - t0) / per_update * 1e3)
        cpu.append((time.process_time() - c0) / per_update * 1e3)
    print(json.dumps({"first_s": first, "ms": statistics.median(times), "cpu_ms": statistics.median(cpu)}))


def run(case: str, mode: str, updates: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TORCHINDUCTOR_CACHE_DIR": cache}
        done = subprocess.run([sys.executable, __file__, "--child", case, mode, str(updates)], env=env,
                              capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{case} {mode} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


PIPELINES = ("happo_mpe_torch_spread", "mappo_smax_3m")


def train(pipeline: str, threads: int, iterations: int, out: Path) -> tuple[float, str]:
    """(steady env steps/s, the last progress line's stage shares) of one ``harl train``."""
    per_iteration = {"happo_mpe_torch_spread": 128 * 32, "mappo_smax_3m": 32 * 100}[pipeline]
    cmd = [sys.executable, "-m", "harl", "train", str(ROOT / "pipelines" / f"{pipeline}.toml"),
           "--set", f"run.total_env_steps={per_iteration * iterations}", "--set", f"run.torch_threads={threads}",
           "--set", f'logging.dir="{out}"', "--set", "evaluator.every_iterations=100000",
           "--set", "checkpoint.every_iterations=100000"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OMP_NUM_THREADS", None)
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    (metrics,) = out.glob("*/metrics.csv")
    with metrics.open() as f:
        rates = [float(row["steps_per_s"]) for row in csv.DictReader(f)]
    shares = [line for line in (done.stdout + done.stderr).splitlines() if "update" in line and "collect" in line]
    return statistics.mean(rates[1:] or rates), shares[-1].split("(")[-1].rstrip(")") if shares else ""


def threads_case(rounds: int, iterations: int) -> None:
    rates: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for r in range(rounds):
            for pipeline in PIPELINES:
                for threads in (1, 2):
                    rate, shares = train(pipeline, threads, iterations, Path(scratch) / f"{r}-{pipeline}-{threads}")
                    rates.setdefault((pipeline, threads), []).append(rate)
                    print(f"round {r}  {pipeline:23s} torch_threads {threads}: {rate:8.1f} env steps/s  ({shares})  "
                          f"({load()})", flush=True)
    for pipeline in PIPELINES:
        one, two = (statistics.median(rates[(pipeline, t)]) for t in (1, 2))
        print(f"  {pipeline:23s} 1 thread {one:8.1f}, 2 threads {two:8.1f} env steps/s: {two / one:.2f}x  ({load()})")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", action="store_true", help="run.torch_threads 1 against 2, whole runs")
    parser.add_argument("--iterations", type=int, default=6, help="iterations per run (--threads)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--updates", type=int, default=8, help="timed updates after the first, per process")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    if args.threads:
        threads_case(args.rounds, args.iterations)
        return
    cases, modes = args.cases.split(","), args.modes.split(",")
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for r in range(args.rounds):
        for case in cases:
            for mode in modes:
                got = run(case, mode, args.updates)
                results.setdefault((case, mode), []).append(got)
                print(f"round {r}  {case:13s} {mode:7s} first update {got['first_s']:7.1f} s, "
                      f"{got['ms']:7.2f} ms ({got['cpu_ms']:6.2f} ms CPU) per minibatch step  ({load()})", flush=True)
    print("medians (CPU ms per minibatch step, first update s; ratio: eager CPU ms / mode CPU ms):")
    for case in cases:
        eager = statistics.median(x["cpu_ms"] for x in results.get((case, "eager"), [{"cpu_ms": float("nan")}]))
        for mode in modes:
            ms = statistics.median(x["cpu_ms"] for x in results[(case, mode)])
            first = statistics.median(x["first_s"] for x in results[(case, mode)])
            print(f"  {case:13s} {mode:7s} {ms:7.2f} ms  first {first:6.1f} s  {eager / ms:5.2f}x  ({load()})")


if __name__ == "__main__":
    main()
