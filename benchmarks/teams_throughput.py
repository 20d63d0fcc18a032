"""Teams' collection speed: a two-team pipeline beside the one-team pipeline of the same world.

    python benchmarks/teams_throughput.py                          # MPE simple_tag, 20 envs x 200 steps
    python benchmarks/teams_throughput.py --rounds 8 --set collector.n_envs=32
    python benchmarks/teams_throughput.py --pipeline pipelines/mappo_smax_3m_selfplay.toml

Both pipelines are one file (``--pipeline``, by default ``pipelines/happo-vs-mappo_mpe_tag.toml``):
the teams one as shipped (there: predators HAPPO, prey MAPPO), the one-team one the same file
without ``[teams]`` (every agent in one team with the file's stages).  Each round times one ``collect`` of each, in alternating order, after a
warm-up collect each, so both see the same machine load; reported: the median env-steps/s of
each, their ratio, this process's CPU time per env step, and the load average (issue 45, item 7:
two teams at no more than 10 % below one team per env step).  Updates are not timed: the
teams' updates are each team's own, the same work as the one-team update split in two.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import attrs
import torch

from harl.compose import build_stages
from harl.config.loading import load_spec_and_notes

PIPELINE = Path(__file__).parents[1] / "pipelines" / "happo-vs-mappo_mpe_tag.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", type=Path, default=PIPELINE)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--full-pool", action="store_true",
                        help="fill each self-play pool to its size first (as late in a run: each env plays "
                             "one of pool_size snapshots)")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    torch.set_num_threads(1)
    two, _ = load_spec_and_notes(args.pipeline, args.overrides)
    one = attrs.evolve(two, teams=(), evaluator=attrs.evolve(two.evaluator, team=None, env={}))
    rates: dict[str, list[float]] = {"one team": [], "two teams": []}
    cpu: dict[str, list[float]] = {"one team": [], "two teams": []}
    with build_stages(one) as a, build_stages(two) as b:
        built = {"one team": a, "two teams": b}
        if args.full_pool:
            for _ in range(max((p.player.pool.size for p in b.updater.self_play), default=0)):
                b.updater.snapshot_all()
        for stages in built.values():
            stages.collector.collect(stages.buffer)  # warm-up: first resets, allocations
        for r in range(args.rounds):
            for name in (("one team", "two teams") if r % 2 == 0 else ("two teams", "one team")):
                stages = built[name]
                wall, clock = time.perf_counter(), time.process_time()
                stats = stages.collector.collect(stages.buffer)
                wall, clock = time.perf_counter() - wall, time.process_time() - clock
                rates[name].append(stats.env_steps / wall)
                cpu[name].append(clock / stats.env_steps * 1e6)
    load = os.getloadavg()
    for name in rates:
        print(f"{name:10s} {statistics.median(rates[name]):9.0f} env-steps/s (median of {args.rounds}), "
              f"{statistics.median(cpu[name]):6.1f} us CPU per env step")
    ratio = statistics.median(rates["two teams"]) / statistics.median(rates["one team"])
    cpu_ratio = statistics.median(cpu["one team"]) / statistics.median(cpu["two teams"])
    print(f"two teams / one team: {ratio:.3f} by wall time, {cpu_ratio:.3f} by CPU time; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
