"""Where HARL puts a run: ``<log_dir>/<env>/<task>/<algo>/<exp_name>/seed-<seed>-<time>/``.

The facade makes that directory harl's run directory (metrics.csv, checkpoints/,
pipeline.toml) and writes HARL's ``config.json`` beside them, so HARL's plotting scripts
and ``--load_config`` find what they expect and ``harl train --resume`` continues the run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

TASK_KEYS: dict[str, tuple[str, ...]] = {
    "smac": ("map_name",), "smacv2": ("map_name",), "mamujoco": ("scenario", "agent_conf"),
    "gym": ("scenario",), "football": ("env_name",), "dexhands": ("task",), "lag": ("scenario", "task"),
}
"""HARL's task name per env: these env keys joined by "-" (pettingzoo_mpe: below)."""


def task_name(env: str, env_args: dict[str, Any]) -> str:
    if env == "pettingzoo_mpe":
        kind = "continuous" if env_args.get("continuous_actions") else "discrete"
        return f"{env_args.get('scenario', 'mpe')}-{kind}"
    keys = TASK_KEYS.get(env, ("scenario",))
    found = [str(env_args[k]) for k in keys if k in env_args]
    return "-".join(found) or env


def results_dir(args: dict[str, Any], algo_args: dict[str, Any], env_args: dict[str, Any]) -> Path:
    """A new directory in HARL's layout (a ``-2`` suffix if one of the same second exists)."""
    base = Path(str(algo_args.get("logger", {}).get("log_dir", "./results")))
    seed = int(algo_args.get("seed", {}).get("seed", 1))
    stamp = time.strftime("%Y-%m-%d-%H-%M-%S")
    parent = base / str(args["env"]) / task_name(str(args["env"]), env_args) / str(args["algo"]) / str(
        args.get("exp_name", "installtest"))
    path, n = parent / f"seed-{seed:0>5}-{stamp}", 1
    while path.exists():
        n += 1
        path = parent / f"seed-{seed:0>5}-{stamp}-{n}"
    path.mkdir(parents=True)
    return path


def write_config(run_dir: Path, args: dict[str, Any], algo_args: dict[str, Any],
                 env_args: dict[str, Any]) -> Path:
    """HARL's ``config.json``: the three dicts as ``main_args`` / ``algo_args`` / ``env_args``."""
    config = {"main_args": args, "algo_args": algo_args, "env_args": env_args}
    path = run_dir / "config.json"
    path.write_text(json.dumps(config, indent=4, sort_keys=True, default=str), encoding="utf-8")
    return path
