"""harl.compare.absolute: the best kept checkpoint re-evaluated on 10x the evaluation episodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harl.compare.absolute import Candidate, absolute_metric, best_candidate, candidates
from harl.compare.runs import load_runs
from tests.compare.synthetic import make_run


def test_best_candidate() -> None:
    """The highest eval_return wins (the later on a tie); with no evaluated checkpoint, the newest."""
    found = [Candidate("a", 1, 10, -5.0), Candidate("b", 2, 20, -3.0), Candidate("c", 3, 30, -3.0),
             Candidate("d", 4, 40, None)]
    assert best_candidate(found) == (found[2], "eval_return")
    assert best_candidate([found[3]]) == (found[3], "newest (no kept checkpoint's iteration has an evaluation)")


def test_candidates_read_the_run(tmp_path: Path) -> None:
    """Each kept checkpoint is paired with the evaluation logged at its iteration, if any."""
    run = make_run(tmp_path, "sequential", "ppo", 1, [1.0, 2.0])
    (run / "checkpoints").mkdir()
    for iteration in (2, 3):
        (run / "checkpoints" / f"iter_{iteration:07d}.pt").write_bytes(b"")
    assert candidates(run) == [Candidate("checkpoints/iter_0000002.pt", 2, 1001, None),
                               Candidate("checkpoints/iter_0000003.pt", 3, 2000, 2.0)]


def test_on_a_trained_run(tmp_path: Path) -> None:
    """A tiny HAPPO run gets absolute_metric.json: 10 x 2 episodes of its best checkpoint, read by compare."""
    pytest.importorskip("mpe2", reason='the run uses MPE (pip install "harl[mpe]")')
    from tests.test_cli import train

    run = train(tmp_path)
    record = absolute_metric(run, factor=10)
    assert record["episodes"] == 20 and len(record["returns"]) == 20
    assert record["chosen_by"] == "eval_return" and record["checkpoint"].startswith("checkpoints/iter_")
    assert json.loads((run / "absolute_metric.json").read_text()) == record
    (loaded,), _ = load_runs([run])
    assert loaded.score("absolute") == pytest.approx(record["mean_return"])


def test_the_evaluator_option_records_it_when_a_run_spends_its_budget(tmp_path: Path) -> None:
    """[evaluator] absolute_factor = 3: harl.train ends with absolute_metric.json (3 x 2 episodes);
    a run stopped early (max_iterations) gets none, and its resume to the end does."""
    pytest.importorskip("mpe2", reason='the run uses MPE (pip install "harl[mpe]")')
    import harl

    tiny = ["run.total_env_steps=600", "collector.n_envs=4", "collector.rollout_length=50", "collector.workers=1",
            "evaluator.episodes=2", "evaluator.n_envs=2", "evaluator.absolute_factor=3", "run.device=cpu"]
    result = harl.train("pipelines/happo_mpe_spread.toml", tiny, run_dir=tmp_path / "run", max_iterations=1)
    assert result.stopped_by == "max_iterations" and not (tmp_path / "run" / "absolute_metric.json").exists()
    harl.resume(tmp_path / "run")
    record = json.loads((tmp_path / "run" / "absolute_metric.json").read_text())
    assert record["episodes"] == 6 and record["factor"] == 3 and len(record["returns"]) == 6
