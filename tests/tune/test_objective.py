"""harl.tune.objective and the pruning callback: what a trial scores, what pruning compares, and a
pruned run stopping through harl's callbacks with a checkpoint (no optuna needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

import harl
from harl.tune.objective import intermediate, iqm, score
from harl.tune.worker import PRUNED, Pruning

ROOT = Path(__file__).resolve().parents[2]
HAPPO = ROOT / "pipelines" / "happo_mpe_spread.toml"
TINY = ["run.total_env_steps=200", "collector.n_envs=2", "collector.rollout_length=25", "collector.workers=1",
        "evaluator.episodes=2", "evaluator.n_envs=2", "evaluator.every_iterations=1", "run.device=cpu",
        "logging.progress=false"]


def _run(tmp_path: Path, name: str, returns: list[float | None]) -> Path:
    run_dir = tmp_path / name
    run_dir.mkdir()
    lines = ["iteration,env_steps,eval_return"]
    lines += [f"{i + 1},{(i + 1) * 100},{'' if r is None else r}" for i, r in enumerate(returns)]
    (run_dir / "metrics.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return run_dir


def test_the_score_is_the_mean_of_each_seeds_last_evaluations_or_their_iqm(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", [-90, None, -80, -70, -60])
    b = _run(tmp_path, "b", [-100, -50, -40, -30])
    assert score([a, b], "mean", 3) == pytest.approx(((-80 - 70 - 60) / 3 + (-50 - 40 - 30) / 3) / 2)
    assert score([a, b], "mean", 1) == pytest.approx(-45)
    assert score([a, b], "iqm", 3) == pytest.approx(iqm([-80, -70, -60, -50, -40, -30]))
    assert iqm([1, 2, 3, 4, 100, -100, 5, 6]) == pytest.approx((2 + 3 + 4 + 5) / 4)
    assert score([_run(tmp_path, "c", [None])], "mean", 3) is None


def test_pruning_compares_evaluation_k_once_every_seed_reached_it(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", [-90, -80, -70])
    b = _run(tmp_path, "b", [-100])
    assert intermediate([a, b], 0, [False, False]) == [(1, -95.0)]
    assert intermediate([a, b], 1, [False, False]) == []          # b has not got to its 2nd evaluation
    assert intermediate([a, b], 1, [False, True]) == [(2, -80.0), (3, -70.0)]   # b ended: a alone


def test_a_pruned_trial_stops_its_run_through_a_callback_with_a_checkpoint(tmp_path: Path) -> None:
    run_dir = tmp_path / "trial-0000" / "run-s1"
    (tmp_path / "trial-0000").mkdir()

    class PruneAfterFirst(Pruning):
        def on_iteration(self, row):  # the driver prunes the trial once iteration 1 is in
            (tmp_path / "trial-0000" / PRUNED).write_text("pruned\n")
            return super().on_iteration(row)

    result = harl.train(HAPPO, TINY, run_dir=run_dir, callbacks=[PruneAfterFirst(run_dir)])
    assert result.stopped_by == "callback" and result.counters.iteration == 1
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] == ["iter_0000001.pt"]
