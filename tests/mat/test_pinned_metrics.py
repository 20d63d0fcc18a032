"""MAT's metrics.csv pinned: short fixed-seed runs of ``pipelines/mat_mpe_spread.toml`` give the rows
recorded in ``tests/mat/data`` (wall-clock columns aside), which harl wrote before MAT's decoding orders
and values went into the step record (the policy then logged its orders for the update, and the critic
encoded every step a second time).

- ``fixed`` (the shipped pipeline's order): bit for bit.  The step's one encoder pass reads the same
  tensor the critic's second pass read, so every value is the same float.
- ``episode``, rollouts of 10 steps in episodes of 25 (orders carried across rollouts): to float rounding.
  The one pass encodes the agents in each env's decoding order (as the update does) where the critic
  encoded them in the env's; attention sums over the agents in another order, so about 5 % of the
  values move by one float32 ulp (at most 7.5e-8, relative 1.1e-6, measured on 3200 steps of trained
  weights), and the weights after 3 iterations by at most 1.2e-7.

To record again (a deliberate change of the numbers, or of the shipped pipeline, said so in the commit
message): ``HARL_RECORD_PINNED=1`` (``tests/pinned.py``, shared with ``tests/test_pinned_runs.py``, which
pins HAPPO, HASAC and QMIX the same way).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harl.cli import main
from tests.pinned import check_pinned, metrics_table, set_args

pytest.importorskip("mpe2", reason="these runs use MPE (pip install harl[mpe])")

ROOT = Path(__file__).parents[2]
MAT_MPE = ROOT / "pipelines" / "mat_mpe_spread.toml"
DATA = Path(__file__).parent / "data"


def settings(**extra: object) -> list[str]:
    """Four iterations of 8 envs x 25 steps, evaluated after each, a small transformer, on the CPU."""
    values: dict[str, object] = {
        "collector.n_envs": 8, "collector.rollout_length": 25, "run.total_env_steps": 800, "run.device": "cpu",
        "evaluator.episodes": 4, "evaluator.n_envs": 2, "evaluator.every_iterations": 1,
        "updater.objective.n_embd": 16, "updater.objective.epochs": 2, "checkpoint.every_iterations": 100,
        "logging.progress": "false", **extra,
    }
    return set_args(values)


def test_the_shipped_order_gives_the_recorded_rows_bit_for_bit(tmp_path: Path) -> None:
    assert main(["train", str(MAT_MPE), *settings(), "--run-dir", str(tmp_path / "run")]) == 0
    check_pinned(tmp_path / "run", DATA / "mat_mpe_spread_fixed.csv")


def test_episode_orders_give_the_recorded_rows_to_rounding(tmp_path: Path) -> None:
    extra = {"updater.objective.order": "episode", "collector.rollout_length": 10, "run.total_env_steps": 400}
    assert main(["train", str(MAT_MPE), *settings(**extra), "--run-dir", str(tmp_path / "run")]) == 0
    assert [row[0] for row in metrics_table(tmp_path / "run")[1:]] == ["1", "2", "3", "4", "5"]
    check_pinned(tmp_path / "run", DATA / "mat_mpe_spread_episode.csv", rel=1e-4)
