"""The Trainer alone, with stub stages that record what they are asked (no env, no network)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from harl.config.loading import structure_pipeline
from harl.evaluate import EvalStats
from harl.logging.csv_log import read_metrics
from harl.trainer import Trainer


@attrs.define
class Log:
    calls: list[str] = attrs.Factory(list)
    progress: list[float] = attrs.Factory(list)


@attrs.frozen
class Rollout:
    env_steps: int
    episodes: list[dict[str, float]]


@attrs.frozen
class Update:
    loss: float

    def row(self) -> dict[str, Any]:
        return {"stub_loss": self.loss}


@attrs.define
class Stub:
    """Every stage at once: each call is logged under the stage's slot name."""

    log: Log
    name: str
    steps_per_iteration: int = 10

    def collect(self, buffer: Any) -> Rollout:
        self.log.calls.append(f"{self.name}.collect({buffer.name})")
        return Rollout(10, [{"return": 2.0, "length": 5.0}])

    def compute(self, buffer: Any) -> None:
        self.log.calls.append(f"{self.name}.compute({buffer.name})")

    def update(self, buffer: Any, progress: float) -> Update:
        self.log.calls.append(f"{self.name}.update({buffer.name})")
        self.log.progress.append(progress)
        return Update(progress)

    def evaluate(self) -> EvalStats:
        self.log.calls.append(f"{self.name}.evaluate")
        return EvalStats(1.5, 0.5, 5.0, 2, {"win_rate": 0.25})


@attrs.define
class StubStages:
    log: Log
    collector: Stub = attrs.field(init=False)
    buffer: Stub = attrs.field(init=False)
    returns: Stub = attrs.field(init=False)
    updater: Stub = attrs.field(init=False)
    evaluator: Stub = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        for name in ("collector", "buffer", "returns", "updater", "evaluator"):
            setattr(self, name, Stub(self.log, name))

    def state_dict(self) -> dict[str, Any]:
        self.log.calls.append("state_dict")
        return {"stub": 1}


def spec(**run: Any) -> Any:
    return structure_pipeline({"run": {"total_env_steps": 30, **run}, "logging": {"progress": False},
                               "evaluator": {"every_iterations": 2}, "checkpoint": {"every_iterations": 2}},
                              "stub.toml")


def test_one_iteration_asks_each_stage_in_order(tmp_path: Path) -> None:
    """collect -> compute -> update on the one buffer, evaluation on iterations 1, 2 (every 2) and 3 (last)."""
    log = Log()
    result = Trainer(StubStages(log), spec(), tmp_path, "text").train(quiet=True)
    one = ["collector.collect(buffer)", "returns.compute(buffer)", "updater.update(buffer)"]
    assert log.calls == [*one, "evaluator.evaluate", *one, "evaluator.evaluate", "state_dict",
                         *one, "evaluator.evaluate", "state_dict"]
    assert log.progress == [0.0, 1 / 3, 2 / 3]
    assert (result.counters.iteration, result.counters.env_steps, result.counters.episodes) == (3, 30, 3)


def test_metrics_rows_carry_the_stages_numbers(tmp_path: Path) -> None:
    """Base columns, the evaluation's env metric and the updater's own columns, one row per iteration."""
    Trainer(StubStages(Log()), spec(), tmp_path, "text").train(quiet=True)
    rows = read_metrics(tmp_path / "metrics.csv")
    assert [r["env_steps"] for r in rows] == ["10", "20", "30"]
    assert [r["train_return"] for r in rows] == ["2", "2", "2"]
    assert [r["eval_win_rate"] for r in rows] == ["0.25", "0.25", "0.25"]
    assert [float(r["stub_loss"]) for r in rows] == pytest.approx([0.0, 1 / 3, 2 / 3], abs=1e-6)
