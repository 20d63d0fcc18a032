"""Every shipped pipeline file loads, builds and trains two iterations end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from harl.build import start_run
from harl.logging.csv_log import read_metrics

PIPELINES = sorted(Path(__file__).parent.parent.glob("pipelines/*.toml"))


@pytest.mark.parametrize("path", PIPELINES, ids=[p.stem for p in PIPELINES])
def test_two_iterations(path: Path, tmp_path: Path) -> None:
    """Two iterations at the pipeline's own sizes write metrics, a checkpoint and the resolved pipeline."""
    pytest.importorskip("mpe2", reason="MPE pipelines need harl[mpe]")
    trainer, _ = start_run(path, ["logging.progress=false", "evaluator.episodes=4"],
                           run_dir=tmp_path / "run")
    spec = trainer.spec
    per_iteration = spec.collector.n_envs * spec.collector.rollout_length
    trainer.total_iterations = 2
    try:
        result = trainer.train()
    finally:
        trainer.stages.close()
    assert result.counters.env_steps == 2 * per_iteration
    rows = read_metrics(tmp_path / "run" / "metrics.csv")
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    assert all(r["train_return"] for r in rows) and rows[-1]["eval_return"]
    assert (tmp_path / "run" / "pipeline.toml").is_file()
    assert list((tmp_path / "run" / "checkpoints").glob("iter_0000002.pt"))
