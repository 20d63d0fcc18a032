"""MAT's collection speed: env-steps/s of ``collector.collect`` alone, two source trees side by side.

    git worktree add /tmp/mat-before <commit>          # the old code path, left as it was
    python benchmarks/mat_collect_speed.py --tree before=/tmp/mat-before --tree after=. --rounds 5

Each round runs one child process per tree, in turn (the order alternates from round to round), with
``PYTHONPATH`` set to that tree, so each child imports that tree's ``harl``.  A child builds the
pipeline (``pipelines/mat_mpe_spread.toml`` by default, its ``--set`` overrides), collects one
rollout to warm up, then times ``--rollouts`` rollouts (no update: the weights do not change, which
does not change a step's cost) and prints its env-steps/s.  The driver prints every round's rates,
each tree's median and the ratio of the medians to the first tree's, with ``uptime``'s load at the
start of each round: on a shared machine the load moves the numbers, and interleaving spreads it
over both trees alike.  One torch thread per child, as a run has on CPU.

``--child`` is the child's mode (the driver passes it); run it alone to time the tree you import.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "mat_mpe_spread.toml"


def child(pipeline: Path, overrides: list[str], rollouts: int) -> dict[str, float | str]:
    """Build the stages with the ``harl`` this process imports, warm up, time ``rollouts`` collections."""
    import torch

    import harl
    from harl.api import build

    torch.set_num_threads(1)
    with build(pipeline, ["run.device=cpu", *overrides]) as stages:
        stages.collector.collect(stages.buffer)  # the first reset, allocations, lazy imports
        began = time.perf_counter()
        for _ in range(rollouts):
            stages.collector.collect(stages.buffer)
        seconds = time.perf_counter() - began
        steps = rollouts * stages.collector.steps_per_iteration
    return {"harl": str(Path(harl.__file__).parent), "env_steps_per_s": steps / seconds, "seconds": seconds}


def load() -> str:
    """``uptime``'s load averages (1, 5, 15 min)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_child(tree: Path, args: argparse.Namespace) -> dict[str, float | str]:
    env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--pipeline", str(args.pipeline),
               "--rollouts", str(args.rollouts), *[a for s in args.set for a in ("--set", s)]]
    done = subprocess.run(command, env=env, cwd=str(tree), capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the child for {tree} failed:\n{done.stderr[-4000:]}")
    result: dict[str, float | str] = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(str(result["harl"])).resolve() != (tree / "harl").resolve():
        raise SystemExit(f"the child for {tree} imported harl from {result['harl']}")
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tree", action="append", default=[], help="NAME=PATH of a source tree (repeatable)")
    p.add_argument("--pipeline", type=Path, default=PIPELINE)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rollouts", type=int, default=4, help="timed rollouts per child")
    p.add_argument("--set", action="append", default=[], help="a pipeline override, e.g. collector.n_envs=32")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.pipeline, args.set, args.rollouts)))
        return
    trees = [(name, Path(path)) for name, path in (t.split("=", 1) for t in args.tree)]
    if not trees:
        raise SystemExit("name at least one --tree NAME=PATH")
    rates: dict[str, list[float]] = {name: [] for name, _ in trees}
    print(f"{args.pipeline.name} {' '.join(args.set)}: {args.rollouts} rollouts per child, env-steps/s of collection")
    for r in range(args.rounds):
        order = trees if r % 2 == 0 else trees[::-1]
        row = []
        started = load()
        for name, tree in order:
            rate = float(run_child(tree, args)["env_steps_per_s"])
            rates[name].append(rate)
            row.append(f"{name} {rate:8.1f}")
        print(f"round {r + 1}: {'  '.join(row)}   load {started}", flush=True)
    first = statistics.median(rates[trees[0][0]])
    for name, _ in trees:
        median = statistics.median(rates[name])
        print(f"{name:>8}: median {median:8.1f} env-steps/s  ({median / first:.3f} x {trees[0][0]})  "
              f"all {', '.join(f'{x:.1f}' for x in rates[name])}")
    print(f"load at the end {load()}")


if __name__ == "__main__":
    main()
