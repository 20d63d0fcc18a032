"""Tiny synthetic run directories (pipeline.toml + metrics.csv) with known values."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

import tomli_w

STEPS = (1000, 2000, 3000, 4000)


def make_run(root: Path, updater: str, objective: str, seed: int, returns: Sequence[float],
             scenario: str = "simple_spread", env: str = "mpe", steps: Sequence[int] = STEPS,
             absolute: Sequence[float] | None = None, extra: dict | None = None) -> Path:
    """A run whose evaluations at ``steps`` logged ``returns`` (means); ``absolute``: per-episode
    returns for an absolute_metric.json."""
    name = f"{objective}-{updater}-{scenario}"
    path = root / f"{name}-s{seed}"
    path.mkdir(parents=True)
    pipeline = {"run": {"name": name, "seed": seed},
                "env": {"kind": env, "scenario": scenario},
                "updater": {"kind": updater, "objective": {"kind": objective, "lr": 5e-4}},
                "logging": {"dir": str(root)}}
    for table, values in (extra or {}).items():
        pipeline.setdefault(table, {}).update(values)
    (path / "pipeline.toml").write_text(tomli_w.dumps(pipeline), encoding="utf-8")
    with (path / "metrics.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["iteration", "env_steps", "train_return", "eval_return", "eval_return_std"])
        for k, (step, value) in enumerate(zip(steps, returns), start=1):
            writer.writerow([2 * k - 1, step, value - 1, value, 0.5])
            writer.writerow([2 * k, step + 1, value - 1, "", ""])  # an iteration without an evaluation
    if absolute is not None:
        record = {"mean_return": sum(absolute) / len(absolute), "returns": list(absolute),
                  "checkpoint": "checkpoints/iter_0000004.pt"}
        (path / "absolute_metric.json").write_text(json.dumps(record), encoding="utf-8")
    return path


def two_algorithms(root: Path, seeds: int = 5, gap: float = 10.0) -> Path:
    """HAPPO beating MAPPO by ``gap`` on every seed of simple_spread; returns the sweep folder."""
    sweep = root / "sweep"
    for seed in range(1, seeds + 1):
        make_run(sweep, "sequential", "ppo", seed, [-100 + 10 * k + seed + gap for k in range(4)])
        make_run(sweep, "simultaneous", "ppo", seed, [-100 + 10 * k + seed for k in range(4)])
    return sweep
