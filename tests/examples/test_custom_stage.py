"""examples/custom_stage: a user's return computer and objective, trained from TOML, no harl edit."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from examples.custom_stage.kl_ppo import adapt_beta, kl_estimate
from examples.custom_stage.td_lambda import lambda_returns
from harl.logging.csv_log import read_metrics
from harl.returns.gae import gae
from harl.run.lifecycle import start_run

EXAMPLES = Path(__file__).parent.parent.parent / "examples" / "custom_stage"


class TestTDLambda:
    def test_hand_computed(self) -> None:
        """gamma = lam = 0.5, rewards (1, 2), next values (4, 8)."""
        r, v = torch.tensor([[1.0], [2.0]]), torch.tensor([[4.0], [8.0]])
        no = torch.zeros(2, 1, dtype=torch.bool)
        # G1 = 2 + .5*8 = 6;  G0 = 1 + .5*(.5*4 + .5*6) = 3.5
        assert lambda_returns(r, v, no, no, 0.5, 0.5).flatten().tolist() == [3.5, 6.0]
        # terminated at t=1: G1 = 2;  G0 = 1 + .5*(.5*4 + .5*2) = 2.5
        assert lambda_returns(r, v, torch.tensor([[False], [True]]), no, 0.5, 0.5).flatten().tolist() == [2.5, 2.0]
        # truncated at t=0: G0 = 1 + .5*4 = 3 (bootstraps, ignores G1)
        assert lambda_returns(r, v, no, torch.tensor([[True], [False]]), 0.5, 0.5).flatten().tolist() == [3.0, 6.0]

    def test_equals_gae_plus_values(self) -> None:
        """Unclipped, lambda-returns minus values are GAE's advantages (with per-agent values too).

        As in a rollout buffer, the next value is the next row's value unless the episode ended.
        """
        gen = torch.Generator().manual_seed(0)
        T, E, A = 12, 4, 3
        rewards, values, final = (torch.randn(T + 1, E, A, generator=gen) for _ in range(3))
        terminated = torch.rand(T, E, generator=gen) < 0.15
        truncated = (torch.rand(T, E, generator=gen) < 0.15) & ~terminated
        ended = (terminated | truncated).unsqueeze(-1)
        rewards, next_values, values = rewards[:T], torch.where(ended, final[:T], values[1:]), values[:T]
        ours = lambda_returns(rewards, next_values, terminated, truncated, 0.97, 0.9) - values
        theirs = gae(rewards, values, next_values, terminated, truncated, 0.97, 0.9)
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


class TestKLPPO:
    def test_kl_estimate_by_hand(self) -> None:
        """Ratios (1, 2): ((1-1) - ln 1 + (2-1) - ln 2) / 2 = (1 - ln 2) / 2."""
        value = kl_estimate(torch.tensor([[1.0], [2.0], [5.0]]), torch.tensor([[1.0], [1.0], [0.0]]))
        assert float(value) == pytest.approx((1 - math.log(2)) / 2)

    def test_beta_rule(self) -> None:
        assert adapt_beta(1.0, 0.02, 0.01) == 2.0 and adapt_beta(1.0, 0.005, 0.01) == 0.5
        assert adapt_beta(1.0, 0.012, 0.01) == 1.0


@pytest.mark.parametrize("name", ["td_lambda", "kl_ppo"])
def test_trains_from_its_toml(name: str, tmp_path: Path) -> None:
    """Over 12,000 env steps the deterministic evaluation return rises well above the start's."""
    trainer, _ = start_run(EXAMPLES / f"{name}.toml", ["logging.progress=false", "run.total_env_steps=12000",
                                                       "evaluator.every_iterations=0"], run_dir=tmp_path / "run")
    try:
        trainer.train()
    finally:
        trainer.stages.close()
    evals = [float(r["eval_return"]) for r in read_metrics(tmp_path / "run" / "metrics.csv") if r["eval_return"]]
    assert evals[-1] > evals[0] + 15, evals  # seed 1: td_lambda -63 -> -34, kl_ppo -54 -> -31
