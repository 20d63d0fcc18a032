"""The Trainer alone, with stub stages that record what they are asked (no env, no network)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from harl.config.loading import structure_pipeline
from harl.evaluator import EvalStats
from harl.logging.csv_log import CSVConfig, CSVSink, read_metrics
from harl.logging.sink import SinkContext
from harl.trainer import Trainer


@attrs.define
class Log:
    calls: list[str] = attrs.Factory(list)
    progress: list[float] = attrs.Factory(list)


@attrs.frozen
class Rollout:
    env_steps: int
    episodes: list[dict[str, float]]

    def row(self) -> dict[str, float]:
        return {}


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


def csv_sink(run_dir: Path) -> CSVSink:
    return CSVSink(CSVConfig(), SinkContext(run_dir, "text"))


@attrs.define
class Recorder:
    """A sink and a callback at once: what the Trainer handed it, in order."""

    seen: list[Any] = attrs.Factory(list)
    stop_at: int = 0

    def write(self, row: Any) -> None:
        self.seen.append(("write", row["iteration"]))

    def close(self, checkpoint: Path | None) -> None:
        self.seen.append(("close", checkpoint.name if checkpoint else None))

    def on_iteration(self, row: Any) -> bool:
        self.seen.append(("iteration", row["iteration"]))
        return row["iteration"] == self.stop_at

    def on_evaluation(self, stats: EvalStats) -> None:
        self.seen.append(("evaluation", stats.mean_return))

    def on_checkpoint(self, path: Path) -> None:
        self.seen.append(("checkpoint", path.name))


def test_one_iteration_asks_each_stage_in_order(tmp_path: Path) -> None:
    """collect -> compute -> update on the one buffer, evaluation on iterations 1, 2 (every 2) and 3 (last)."""
    log = Log()
    result = Trainer(StubStages(log), spec(), tmp_path, "text", sinks=[csv_sink(tmp_path)]).train(quiet=True)
    one = ["collector.collect(buffer)", "returns.compute(buffer)", "updater.update(buffer)"]
    assert log.calls == [*one, "evaluator.evaluate", *one, "evaluator.evaluate", "state_dict",
                         *one, "evaluator.evaluate", "state_dict"]
    assert log.progress == [0.0, 1 / 3, 2 / 3]
    assert (result.counters.iteration, result.counters.env_steps, result.counters.episodes) == (3, 30, 3)


def test_metrics_rows_carry_the_stages_numbers(tmp_path: Path) -> None:
    """Base columns, the evaluation's env metric and the updater's own columns, one row per iteration."""
    result = Trainer(StubStages(Log()), spec(), tmp_path, "text", sinks=[csv_sink(tmp_path)]).train(quiet=True)
    assert [r["eval_win_rate"] for r in result.metrics] == [0.25, 0.25, 0.25]  # numbers, not text
    rows = read_metrics(tmp_path / "metrics.csv")
    assert [r["env_steps"] for r in rows] == ["10", "20", "30"]
    assert [r["train_return"] for r in rows] == ["2", "2", "2"]
    assert [r["eval_win_rate"] for r in rows] == ["0.25", "0.25", "0.25"]
    assert [float(r["stub_loss"]) for r in rows] == pytest.approx([0.0, 1 / 3, 2 / 3], abs=1e-6)


class TestSinksAndCallbacks:
    def test_sinks_and_callbacks_see_every_iteration_then_the_close(self, tmp_path: Path) -> None:
        """Each row goes to the sinks, then the callbacks; evaluations and checkpoints are announced;
        the sinks are closed with the newest checkpoint."""
        recorder = Recorder()
        result = Trainer(StubStages(Log()), spec(), tmp_path, "text", sinks=[recorder],
                         callbacks=[recorder]).train(quiet=True)
        assert recorder.seen == [
            ("write", 1), ("iteration", 1), ("evaluation", 1.5),
            ("write", 2), ("iteration", 2), ("evaluation", 1.5), ("checkpoint", "iter_0000002.pt"),
            ("write", 3), ("iteration", 3), ("evaluation", 1.5), ("checkpoint", "iter_0000003.pt"),
            ("close", "iter_0000003.pt"),
        ]
        assert (result.stopped_by, result.interrupted) == ("budget", False)

    def test_a_callback_returning_true_stops_with_a_checkpoint(self, tmp_path: Path) -> None:
        """True from on_iteration at iteration 1 of 3: one row, a checkpoint of iteration 1, interrupted."""
        recorder = Recorder(stop_at=1)
        result = Trainer(StubStages(Log()), spec(), tmp_path, "text", callbacks=[recorder]).train(quiet=True)
        assert (result.counters.iteration, result.interrupted, result.stopped_by) == (1, True, "callback")
        assert [r["iteration"] for r in result.metrics] == [1]
        assert recorder.seen[-1] == ("checkpoint", "iter_0000001.pt")
        assert (tmp_path / "checkpoints" / "iter_0000001.pt").is_file()

    def test_a_plain_function_is_an_on_iteration_callback(self, tmp_path: Path) -> None:
        """A function of the row that returns True at iteration 2 stops the run there."""
        result = Trainer(StubStages(Log()), spec(), tmp_path, "text",
                         callbacks=[lambda row: row["iteration"] >= 2]).train(quiet=True)
        assert (result.counters.iteration, result.stopped_by) == (2, "callback")

    def test_not_a_callback(self, tmp_path: Path) -> None:
        """An object with no hook that is not callable is refused when the Trainer is made."""
        with pytest.raises(TypeError, match="is not a callback"):
            Trainer(StubStages(Log()), spec(), tmp_path, "text", callbacks=[3])


class TestMaxIterations:
    def test_stops_there_evaluating_and_checkpointing_as_a_last_iteration(self, tmp_path: Path) -> None:
        """max_iterations=1 of 3: iteration 1 evaluates and checkpoints; the lr schedule follows the budget."""
        log = Log()
        trainer = Trainer(StubStages(log), spec(**{"total_env_steps": 40}), tmp_path, "text")
        result = trainer.train(quiet=True, max_iterations=1)
        assert (result.counters.iteration, result.interrupted, result.stopped_by) == (1, False, "max_iterations")
        assert log.calls[-2:] == ["evaluator.evaluate", "state_dict"]
        assert log.progress == [0.0]
        assert not trainer.finished

    def test_counts_from_where_the_run_is(self, tmp_path: Path) -> None:
        """A second train(max_iterations=2) of the same Trainer runs iterations 2 and 3, then the budget is spent."""
        trainer = Trainer(StubStages(Log()), spec(), tmp_path, "text")
        trainer.train(quiet=True, max_iterations=1)
        result = trainer.train(quiet=True, max_iterations=5)
        assert (result.counters.iteration, result.stopped_by) == (3, "budget") and trainer.finished

    def test_must_be_positive(self, tmp_path: Path) -> None:
        """max_iterations=0 is refused with the valid range."""
        with pytest.raises(ValueError, match="max_iterations: expected a positive integer, got 0"):
            Trainer(StubStages(Log()), spec(), tmp_path, "text").train(max_iterations=0)
