"""The Trainer's metrics rows on the counting env."""

from __future__ import annotations

from pathlib import Path

from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.logging.csv_log import CSVConfig, CSVSink, read_metrics
from harl.logging.sink import SinkContext
from harl.trainer import Trainer
from tests.fakes import counting


def test_env_episode_metrics_become_eval_columns(tmp_path: Path) -> None:
    """An env's episode info numbers ('counter' here) appear as eval_<name> on evaluated rows only."""
    assert counting.CountingConfig  # registers the "counting" env kind
    data = {
        "run": {"seed": 1, "total_env_steps": 40},
        "env": {"kind": "counting"},
        "collector": {"n_envs": 2, "rollout_length": 5},
        "policy": {"hidden_sizes": [8]},
        "critic": {"hidden_sizes": [8]},
        "evaluator": {"episodes": 2, "n_envs": 2, "every_iterations": 2},
        "logging": {"progress": False},
    }
    spec = structure_pipeline(data, "counting")
    stages = build_stages(spec)
    try:
        Trainer(stages, spec, tmp_path, "", sinks=[CSVSink(CSVConfig(), SinkContext(tmp_path, ""))]).train()
    finally:
        stages.close()
    rows = read_metrics(tmp_path / "metrics.csv")
    # the counting env's 3-step episodes end with counter = 3; iterations 1, 2 and 4 evaluate
    assert [(r["iteration"], r["eval_counter"]) for r in rows] == [("1", "3"), ("2", "3"), ("3", ""), ("4", "3")]
