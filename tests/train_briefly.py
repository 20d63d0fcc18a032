"""Train a pipeline for a few iterations in a test and read back what it logged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harl.logging.csv_log import read_metrics
from harl.run.lifecycle import start_run


def train_briefly(pipeline: Path, overrides: list[str], run_dir: Path,
                  iterations: int = 2) -> tuple[Any, list[dict[str, str]]]:
    """Run ``iterations`` iterations of ``pipeline`` into ``run_dir``; the train result and metrics.csv rows."""
    trainer, _ = start_run(pipeline, overrides, run_dir=run_dir)
    with trainer:
        result = trainer.train(max_iterations=iterations)
    return result, read_metrics(run_dir / "metrics.csv")
