"""``[collector] zero_reset_inputs``: JaxMARL's CTRolloutManager zeroes a done agent's input.

JaxMARL's ``wrapped_step`` (``jaxmarl/wrappers/baselines.py:432-436``) returns
``jnp.where(done, 0.0, obs)`` for each agent's preprocessed input (padded observation and one-hot id)
after the env has already reset, so the first input of every episode but the run's first is zeros.
"""

from __future__ import annotations

from pathlib import Path

import torch

import harl

PIPELINE = Path(__file__).resolve().parents[2] / "pipelines" / "pqn-vdn_mpe_torch_spread.toml"


def first_rollout(tmp_path: Path, zero: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The buffer's inputs and episode starts after one 30-step rollout of 2 envs (26-step episodes)."""
    sets = ["collector.n_envs=2", "collector.rollout_length=30", "updater.minibatches=1", "run.seed=3",
            f"collector.zero_reset_inputs={str(zero).lower()}", "evaluator.every_iterations=1000"]
    with harl.start(PIPELINE, sets, run_dir=tmp_path / f"run-{zero}") as trainer:
        stages = trainer.stages
        stages.collector.collect(stages.buffer)
        return stages.buffer.x.clone(), stages.buffer.starts.clone()


def test_the_first_input_of_each_later_episode_is_zeros(tmp_path: Path) -> None:
    x, starts = first_rollout(tmp_path, zero=True)
    assert x.shape[:3] == (31, 2, 3)
    begun = starts.nonzero()[:, 0].unique().tolist()
    assert begun == [26]  # 26-step episodes: slot 26 holds the second episode's first input
    assert torch.all(x[26] == 0)
    assert torch.all(x[0].abs().sum(-1) > 0)  # the run's first episode starts from its real observation
    assert torch.all(x[25].abs().sum(-1) > 0) and torch.all(x[27].abs().sum(-1) > 0)


def test_off_by_default_the_new_episode_starts_from_its_observation(tmp_path: Path) -> None:
    x, _ = first_rollout(tmp_path, zero=False)
    assert torch.all(x[26].abs().sum(-1) > 0)
    ids = x[26][..., -3:]
    assert torch.equal(ids, torch.eye(3).expand(2, 3, 3))  # the one-hot id is there too
