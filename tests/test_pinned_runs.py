"""One-team runs pinned (issue 55): short fixed-seed CPU runs of HAPPO, HASAC and QMIX on MPE simple_spread
write the metrics.csv recorded in ``tests/data/pinned`` (wall-clock columns aside), bit for bit: every
cell as the same text (harl writes 6 significant digits).  MAT's run is pinned the same way in
``tests/mat/test_pinned_metrics.py``.  The files were recorded at commit 910e2fd, before issue 55's one
rollout loop, so a refactor of the loop that keeps one-team runs unchanged passes these unchanged.

Each run is a few iterations of the shipped pipeline, shrunk (small networks, 2 envs, the inline env
backend, 1 torch thread, on the CPU) and evaluated after every iteration, so the evaluation columns are
pinned too; the off-policy runs warm up and fill batches quickly, so their updates run from the first
iterations (and QMIX copies its target networks every 2 gradient steps).

Re-record (``HARL_RECORD_PINNED=1``; see ``tests/pinned.py``) only when the numbers are meant to change,
and say in the commit message which ones changed and why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harl.cli import main
from tests.pinned import check_pinned, set_args

pytest.importorskip("mpe2", reason="these runs use MPE (pip install harl[mpe])")

ROOT = Path(__file__).parents[1]
DATA = Path(__file__).parent / "data" / "pinned"

COMMON: dict[str, object] = {
    "run.seed": 1, "run.device": "cpu", "run.torch_threads": 1, "collector.backend": "inline",
    "collector.n_envs": 2, "evaluator.every_iterations": 1, "evaluator.episodes": 2, "evaluator.n_envs": 2,
    "checkpoint.every_iterations": 100, "logging.progress": "false",
}

RUNS: dict[str, tuple[str, dict[str, object]]] = {
    # 3 iterations of 2 envs x 25 steps (one episode each), 2 epochs of actors and critic
    "happo": ("happo_mpe_spread.toml", {
        "collector.rollout_length": 25, "run.total_env_steps": 150, "updater.objective.epochs": 2,
        "critic.epochs": 2, "policy.hidden_sizes": "[16,16]", "critic.hidden_sizes": "[16,16]"}),
    # 6 iterations of 2 envs x 10 steps; random actions for the first 40 env steps, then 4 updates an
    # iteration on batches of 16 with 5-step targets
    "hasac": ("hasac_mpe_spread.toml", {
        "collector.rollout_length": 10, "collector.updates_per_round": 4, "collector.warmup_steps": 40,
        "run.total_env_steps": 120, "buffer.capacity": 1000, "buffer.batch_size": 16, "returns.n_step": 5,
        "policy.hidden_sizes": "[16,16]", "critic.hidden_sizes": "[16,16]"}),
    # 3 iterations of 2 envs x 25 steps; epsilon 1 -> 0.05 over 100 env steps, a gradient step per
    # finished episode from the first iteration on (batches of 2), the target copied every 2 gradient steps
    "qmix": ("qmix_mpe_spread_discrete.toml", {
        "collector.rollout_length": 25, "run.total_env_steps": 150, "collector.epsilon_anneal_steps": 100,
        "buffer.capacity": 50, "buffer.batch_size": 2, "updater.target_update_interval": 2,
        "policy.hidden_sizes": "[16]", "critic.mixing_embed_dim": 8, "critic.hypernet_embed": 16}),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_a_short_run_writes_the_recorded_metrics(name: str, tmp_path: Path) -> None:
    pipeline, extra = RUNS[name]
    run_dir = tmp_path / "run"
    assert main(["train", str(ROOT / "pipelines" / pipeline), *set_args({**COMMON, **extra}),
                 "--run-dir", str(run_dir)]) == 0
    check_pinned(run_dir, DATA / f"{Path(pipeline).stem}.csv")
