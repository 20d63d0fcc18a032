"""The value family's recurrent unroll: EPyMARL's step loop against the fused GRU (issue 49, item 4).

Two measurements, each A against B interleaved, the load average printed beside every figure:

    python benchmarks/iql_unroll.py step [--rounds 5]          # one JointTD gradient step
    python benchmarks/iql_unroll.py train [--rounds 2] [--steps 20000]   # IQL on SMAX 3m, whole process

``step``: one gradient step of IQL's joint TD loss (online and target unrolls, backward, clip,
Adam) on a batch shaped as ``pipelines/iql_smax_3m.toml`` samples it (32 episodes of 101 rows, 3
agents, one shared 128-wide GRU agent), with ``AgentQNetworks.unroll`` (fused) and
``AgentQNetworks.unroll_loop`` (the loop harl ran before).  ``train``: the shipped
``iql_smax_3m.toml`` as a whole ``harl train`` process, once as it is and once with the loop
patched back in (``unroll = unroll_loop``); reported: the steady env steps per second (the
mean of ``steps_per_s`` over the iterations after the first, which holds JAX's compile) and the
whole process's wall seconds.  One intra-op thread (``OMP_NUM_THREADS=1``), as the runs use.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def step_case(rounds: int, repeats: int) -> None:
    import torch
    from gymnasium import spaces

    from harl.buffers.episodes import EpisodeBatch
    from harl.policy.agent_q import AgentQNetworks
    from harl.returns.episode_td import EpisodeTD, EpisodeTDConfig
    from harl.update.mixers import NoMixer
    from harl.update.q_learning import JointTD, JointTDConfig

    torch.set_num_threads(1)
    torch.manual_seed(0)
    B, T, A, D, n, S = 32, 100, 3, 30, 9, 48  # SMAX 3m's widths, pipelines/iql_smax_3m.toml's batch
    team = AgentQNetworks([spaces.Box(-1, 1, (D,))] * A, [spaces.Discrete(n)] * A, hidden_dim=128,
                          recurrent=True, share_parameters=True, agent_id=True)
    objective = JointTD(JointTDConfig(lr=3e-4), team, NoMixer(), EpisodeTD(EpisodeTDConfig(gamma=0.99)))
    g = torch.Generator().manual_seed(1)
    batch = EpisodeBatch(obs=[torch.randn(B, T + 1, D, generator=g) for _ in range(A)],
                         state=torch.randn(B, T + 1, S, generator=g), avail=[None] * A,
                         actions=torch.randint(0, n, (B, T, A), generator=g), rewards=torch.randn(B, T, generator=g),
                         terminated=torch.zeros(B, T, dtype=torch.bool), filled=torch.ones(B, T, dtype=torch.bool))
    cases = {"loop (before)": AgentQNetworks.unroll_loop, "fused": AgentQNetworks.unroll}
    fused = AgentQNetworks.unroll
    times: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for r in range(rounds):
            for name, unroll in cases.items():
                AgentQNetworks.unroll = unroll  # type: ignore[method-assign]
                objective.update(batch)  # warm
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(repeats):
                    objective.update(batch)
                times[name].append((time.perf_counter() - t0) / repeats * 1e3)
                cpu[name].append((time.process_time() - c0) / repeats * 1e3)
                print(f"round {r}  {name:14s} {times[name][-1]:7.1f} ms ({cpu[name][-1]:7.1f} ms CPU) per gradient "
                      f"step  ({load()})", flush=True)
    finally:
        AgentQNetworks.unroll = fused  # type: ignore[method-assign]
    a, b = (statistics.median(v) for v in cpu.values())
    print(f"median CPU: loop {a:.1f} ms, fused {b:.1f} ms per gradient step: {a / b:.2f}x  ({load()})")


PATCH = ("import runpy, sys; import harl.policy.agent_q as q; q.AgentQNetworks.unroll = q.AgentQNetworks.unroll_loop; "
         "sys.argv = ['harl', *sys.argv[1:]]; runpy.run_module('harl', run_name='__main__')")


def train_once(loop: bool, steps: int, out: Path) -> tuple[float, float, int]:
    """(steady env steps/s, whole-process seconds, iterations) of one ``harl train`` of IQL SMAX 3m."""
    args = ["train", str(ROOT / "pipelines" / "iql_smax_3m.toml"), "--set", f"run.total_env_steps={steps}",
            "--set", f'logging.dir="{out}"', "--set", "evaluator.every_iterations=1000",
            "--set", "checkpoint.every_iterations=1000"]
    cmd = [sys.executable, "-c", PATCH, *args] if loop else [sys.executable, "-m", "harl", *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    (metrics,) = out.glob("*/metrics.csv")
    with metrics.open() as f:
        rates = [float(row["steps_per_s"]) for row in csv.DictReader(f) if row.get("steps_per_s")]
    return statistics.mean(rates[1:] or rates), wall, len(rates)


def train_case(rounds: int, steps: int) -> None:
    rates: dict[str, list[float]] = {"loop (before)": [], "fused": []}
    with tempfile.TemporaryDirectory() as scratch:
        for r in range(rounds):
            for name in rates:
                out = Path(scratch) / f"{r}-{name.split()[0]}"
                rate, wall, its = train_once(name.startswith("loop"), steps, out)
                rates[name].append(rate)
                print(f"round {r}  {name:14s} steady {rate:7.1f} env steps/s over {its - 1} iterations, "
                      f"whole process {wall:6.1f} s  ({load()})", flush=True)
    a, b = (statistics.median(v) for v in rates.values())
    print(f"median steady rate: loop {a:.1f}, fused {b:.1f} env steps/s: {b / a:.2f}x  ({load()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=("step", "train"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5, help="gradient steps timed per round (step)")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per run (train)")
    args = parser.parse_args()
    if args.case == "step":
        step_case(args.rounds, args.repeats)
    else:
        train_case(args.rounds, args.steps)


if __name__ == "__main__":
    main()
