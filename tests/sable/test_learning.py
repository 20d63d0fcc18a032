"""Sable learns: on a tiny task that needs memory (tests/sable/cue_task.py), the recurrent Sable's
deterministic return rises from chance (about 4/3 per agent) past what any memoryless policy can
reach (2) within 1,280 env steps (about 8 s of CPU)."""

from __future__ import annotations

from pathlib import Path

from harl.api import read_metrics, train

PIPELINE = """
[run]
name = "sable-cue"
seed = 1
total_env_steps = 1_280
device = "cpu"
torch_threads = 1

[env]
kind = "python"
factory = "tests.sable.cue_task:make_env"

[collector]
kind = "on_policy"
rollout_length = 16
n_envs = 8

[returns]
kind = "gae"
proper_time_limits = false

[critic]
kind = "sable_v"

[updater]
kind = "joint"

[updater.objective]
kind = "sable"
embed_dim = 32
lr = 3e-3

[evaluator]
every_iterations = 10
episodes = 16
n_envs = 8

[checkpoint]
every_iterations = 100
"""


def test_recurrent_sable_learns_to_remember_the_cue(tmp_path: Path) -> None:
    path = tmp_path / "cue.toml"
    path.write_text(PIPELINE)
    train(path, run_dir=tmp_path / "run")
    evals = [row["eval_return"] for row in read_metrics(tmp_path / "run") if row.get("eval_return") is not None]
    first, last = float(evals[0]), float(evals[-1])  # type: ignore[arg-type]
    assert first < 2.0 and last > 3.0, (first, last)
