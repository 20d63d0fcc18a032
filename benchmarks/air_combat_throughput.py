"""Raw env-steps/s of each air-combat task (HARL's lag.yaml six and a self-play one), random actions.

    python benchmarks/air_combat_throughput.py              # 300 vector steps of 4 envs per task
    python benchmarks/air_combat_throughput.py --steps 100 --n-envs 1

Each case is ``benchmarks/env_throughput.py``'s measurement (``vector_rate``: harl's inline
vector env built as a pipeline builds it, pre-drawn uniformly random actions, a warm-up of 5
steps) on one task, printed as one JSON line with the 1/5/15-minute load average beside it.
``env_steps_per_cpu_s`` divides by this process's CPU time, the steadier figure on a shared
machine.  Random stick and throttle crash within a few hundred steps, so episodes are short
and the per-episode start (a fresh JSBSim instance per aircraft, ~10 ms) weighs more than in
training; the hierarchical tasks' random high-level actions fly through the frozen controller
and live longer.  Missiles step 60 times per env step while they fly.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from env_throughput import vector_rate  # noqa: E402

from harl.envs.air_combat import AirCombatConfig  # noqa: E402
from harl.envs.air_combat.tasks import LAG_YAML_TASKS  # noqa: E402

TASKS = (*LAG_YAML_TASKS, "1v1/NoWeapon/Selfplay")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300, help="vector steps per task")
    p.add_argument("--n-envs", type=int, default=4, help="envs in the inline vector env")
    args = p.parse_args()
    torch.set_num_threads(1)
    for task in TASKS:
        config = AirCombatConfig(task=task, action_type="multidiscrete")
        wall, cpu = vector_rate(config, args.n_envs, args.steps)
        print(json.dumps({"task": task, "harl_task": config.task_name, "n_envs": args.n_envs,
                          "env_steps_per_s": round(wall), "env_steps_per_cpu_s": round(cpu),
                          "load_1_5_15": [round(x, 2) for x in os.getloadavg()]}), flush=True)


if __name__ == "__main__":
    main()
