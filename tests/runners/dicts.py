"""HARL-shaped dicts and small harl pipelines for the runner tests (until the converter lands,
the runners are handed the pipeline directly with ``pipeline=``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes import counting, matrix

assert counting.CountingConfig and matrix.MatrixGameConfig  # register the "counting" and "matrix" kinds


def harl_dicts(log_dir: Path, algo: str, env: str = "counting", seed: int = 1, model_dir: Any = None,
               **env_args: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(args, algo_args, env_args) with the keys the runners read."""
    args = {"algo": algo, "env": env, "exp_name": "test", "load_config": ""}
    algo_args = {"seed": {"seed": seed}, "logger": {"log_dir": str(log_dir)},
                 "train": {"model_dir": model_dir}, "render": {"use_render": False, "render_episodes": 1}}
    return args, algo_args, {"scenario": "fake", **env_args}


def on_policy(env: str = "counting", n_envs: int = 2, length: int = 4, steps: int = 24, **extra: Any) -> dict[str, Any]:
    data = {"run": {"seed": 1, "total_env_steps": steps}, "env": {"kind": env},
            "collector": {"n_envs": n_envs, "rollout_length": length},
            "policy": {"hidden_sizes": [16]}, "critic": {"hidden_sizes": [16]},
            "evaluator": {"episodes": 2, "n_envs": 2, "every_iterations": 0},
            "logging": {"progress": False}, "checkpoint": {"every_iterations": 1}}
    for key, table in extra.items():
        data.setdefault(key, {}).update(table)
    return data


def off_policy(env: str = "counting", objective: str = "sac", steps: int = 40, **extra: Any) -> dict[str, Any]:
    data = {"run": {"seed": 1, "total_env_steps": steps}, "env": {"kind": env},
            "collector": {"kind": "off_policy", "n_envs": 2, "rollout_length": 5, "updates_per_round": 2,
                          "warmup_steps": 10},
            "buffer": {"kind": "replay", "capacity": 200, "batch_size": 8}, "returns": {"kind": "n_step"},
            "critic": {"kind": "q"}, "updater": {"objective": {"kind": objective}},
            "policy": {"hidden_sizes": [16]}, "evaluator": {"episodes": 2, "n_envs": 2, "every_iterations": 0},
            "logging": {"progress": False}, "checkpoint": {"every_iterations": 1}}
    for key, table in extra.items():
        data.setdefault(key, {}).update(table)
    return data
