"""The Trainer's metrics rows on the counting env."""

from __future__ import annotations

from pathlib import Path

import harl
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


def _counting(tmp_path: Path, name: str, fail_at: int) -> dict:
    assert counting.CountingConfig  # registers the "counting" env kind
    return {
        "run": {"seed": 3, "total_env_steps": 60},
        "env": {"kind": "counting"},
        "collector": {"n_envs": 2, "rollout_length": 6},
        "returns": {"kind": "tests.fakes.user_stages:FlakyReturnsConfig", "fail_at": fail_at},
        "policy": {"hidden_sizes": [8]},
        "critic": {"hidden_sizes": [8]},
        "evaluator": {"episodes": 2, "n_envs": 2, "every_iterations": 2},
        "checkpoint": {"every_iterations": 100},
        "logging": {"progress": False, "dir": str(tmp_path / name)},
    }


def _rows(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("wall_time", "steps_per_s")} for r in harl.read_metrics(run_dir)]


def test_a_users_stage_that_raises_is_named_and_the_last_whole_iteration_resumes_exactly(tmp_path: Path) -> None:
    """A user's returns stage raising in iteration 4: one paragraph naming the slot, kind, module and
    the user's frame; rows 1-3 and a checkpoint of iteration 3; resuming gives the uninterrupted rows."""
    import pytest


    whole = harl.train(_counting(tmp_path, "whole", 0), run_dir=tmp_path / "whole")
    with pytest.raises(harl.StageError) as failure:
        harl.train(_counting(tmp_path, "cut", 4), run_dir=tmp_path / "cut")
    message = str(failure.value)
    assert message.startswith('[returns] kind "tests.fakes.user_stages:FlakyReturnsConfig" '
                              "(tests.fakes.user_stages.FlakyReturns) raised ValueError: flaky on call 4; at ")
    assert "user_stages.py:" in message and "in compute: raise ValueError" in message
    frames = message.split("; at ")[1].split(". The run")[0]
    package = str(Path(harl.__file__).resolve().parent)  # harl's own files, wherever the checkout is (even .../harl/)
    assert all(not str(Path(f.split(":")[0]).resolve()).startswith(package + "/") for f in frames.split("; "))
    assert [r["iteration"] for r in harl.read_metrics(tmp_path / "cut")] == [1, 2, 3]
    assert [p.name for p in (tmp_path / "cut" / "checkpoints").iterdir()] == ["iter_0000003.pt"]
    harl.resume(tmp_path / "cut", overrides=["returns.fail_at=0"])
    cut, uncut = _rows(tmp_path / "cut"), _rows(whole.run_dir)
    # Exact but for the policy losses, which agree to 1e-3 here as after any resume on this env (its
    # restarted episodes rebuild slot 0 of the rollout instead of carrying it over).
    losses = [k for k in uncut[0] if k.endswith("policy_loss")]
    assert [{k: v for k, v in r.items() if k not in losses} for r in cut] == \
           [{k: v for k, v in r.items() if k not in losses} for r in uncut]
    for a, b in zip(cut, uncut):
        assert all(abs(a[k] - b[k]) <= 1e-3 * max(abs(b[k]), 1e-3) + 1e-6 for k in losses)


def test_an_evaluation_that_raises_still_writes_its_iterations_row(tmp_path: Path, monkeypatch: object) -> None:
    """The evaluator raising at iteration 2: row 2 is written with empty eval columns, then the
    error (naming [evaluator]) stops the run with a checkpoint of iteration 2; resume writes 3 on."""
    import pytest

    from harl.evaluator import Evaluator

    evaluate, calls = Evaluator.evaluate, []

    def second_call_raises(self: Evaluator, *args: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise OSError("the eval env's simulator went away")
        return evaluate(self, *args)

    monkeypatch.setattr(Evaluator, "evaluate", second_call_raises)  # type: ignore[attr-defined]
    with pytest.raises(harl.StageError, match=r"^\[evaluator\] kind \"Evaluator\" .* raised OSError"):
        harl.train(_counting(tmp_path, "run", 0), run_dir=tmp_path / "run")
    rows = harl.read_metrics(tmp_path / "run")
    assert [(r["iteration"], r["eval_return"]) for r in rows][:2] == [(1, rows[0]["eval_return"]), (2, None)]
    assert rows[0]["eval_return"] is not None and len(rows) == 2
    assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == ["iter_0000002.pt"]
    monkeypatch.setattr(Evaluator, "evaluate", evaluate)  # type: ignore[attr-defined]
    harl.resume(tmp_path / "run")
    assert [r["iteration"] for r in harl.read_metrics(tmp_path / "run")] == [1, 2, 3, 4, 5]
