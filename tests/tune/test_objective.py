"""harl.tune.objective and the pruning callback: what a trial scores, what pruning compares, and a
pruned run (or --vectorize population) stopping through harl's callbacks with a checkpoint (no
optuna needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

import harl
from harl.tune.objective import intermediate, iqm, score
from harl.tune.pruning import PRUNED, Pruning
from harl.tune.worker import run_population

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


def test_a_pruned_trials_population_stops_every_member_with_a_checkpoint(tmp_path: Path) -> None:
    """--vectorize: the members carry the pruning callback, so a PRUNED trial's population stops after
    its iteration (here the first: the driver had pruned it already), each member with its checkpoint."""
    from harl.config.dump import dump_pipeline
    from harl.config.loading import load_spec_and_notes

    torch_mpe = ROOT / "pipelines" / "happo_mpe_torch_spread.toml"
    small = ["collector.n_envs=2", "collector.rollout_length=25", "run.total_env_steps=500", "evaluator.episodes=2",
             "evaluator.n_envs=2", "evaluator.every_iterations=1", "checkpoint.every_iterations=100",
             "run.device=cpu", "logging.progress=false"]
    trial = tmp_path / "trial-0000"
    run_dirs = [trial / f"run-s{seed}" for seed in (1, 2)]
    for seed, run_dir in zip((1, 2), run_dirs):
        run_dir.mkdir(parents=True)
        spec = load_spec_and_notes(torch_mpe, [*small, f"run.seed={seed}"])[0]
        (run_dir / "pipeline.toml").write_text(dump_pipeline(spec), encoding="utf-8")
    (trial / PRUNED).write_text("pruned\n")
    assert run_population(run_dirs) == 2  # not every member finished
    for run_dir in run_dirs:
        assert (run_dir / "outcome.json").read_text().startswith('{"status": "stopped"')
        assert [r["iteration"] for r in harl.read_metrics(run_dir)] == [1]  # of 10
        assert [p.name for p in (run_dir / "checkpoints").iterdir()] == ["iter_0000001.pt"]
