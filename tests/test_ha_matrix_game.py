"""The HA property: sequential updates coordinate where simultaneous ones miscoordinate."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from tests.fakes import matrix
from tests.fakes.matrix import PAYOFF

SEEDS = range(20)
ITERATIONS = 10
OBJECTIVES = {
    "ppo": {"kind": "ppo", "lr": 0.01, "epochs": 5},
    "trpo": {"kind": "trpo", "kl_threshold": 0.2, "categorical_kl": "exact"},
    "a2c": {"kind": "a2c", "lr": 0.01, "epochs": 5},
}
"""Per objective, settings that move the policy far enough in ten iterations.  TRPO bounds the exact
KL here: under HARL's approximate categorical KL (the default) the steps are so much smaller that
the simultaneous update also coordinates (measured, 20 seeds: 100 % at kl_threshold 0.2, 95 % at 1.0)."""


def train_on_matrix_game(updater: str, seed: int, objective: str = "ppo") -> float:
    """Train on the matrix game for a fixed small budget; return the greedy joint payoff."""
    assert matrix.MatrixGameConfig  # registers the "matrix" env kind
    data = {
        "run": {"seed": seed, "total_env_steps": ITERATIONS * 512},
        "env": {"kind": "matrix"},
        "collector": {"n_envs": 512, "rollout_length": 1},
        "critic": {"lr": 0.01, "value_norm": False},
        "updater": {"kind": updater, "objective": OBJECTIVES[objective]},
        "policy": {"hidden_sizes": [16], "input_norm": False},
        "evaluator": {"episodes": 1, "n_envs": 1},
    }
    stages = build_stages(structure_pipeline(data, "matrix-game"))
    try:
        for it in range(ITERATIONS):
            stages.collector.collect(stages.buffer)
            stages.returns.compute(stages.buffer)
            stages.updater.update(stages.buffer, it / ITERATIONS)
        return stages.evaluator.evaluate().mean_return
    finally:
        stages.close()


@functools.cache
def success_rate(updater: str, objective: str) -> float:
    """Fraction of SEEDS on which training ends on an optimal joint action (each computed once)."""
    best = float(PAYOFF.max())
    return float(np.mean([train_on_matrix_game(updater, s, objective) == best for s in SEEDS]))


CASES = [name if name == "ppo" else pytest.param(name, marks=pytest.mark.slow) for name in OBJECTIVES]
"""PPO runs in CI; A2C and TRPO (~40 s each on two cores) in nox -s slow."""


@pytest.mark.parametrize("objective", CASES)
def test_sequential_reaches_the_optimum_on_95_percent_of_seeds(objective: str) -> None:
    """The sequential update (HAPPO, HATRPO, HAA2C) finds an optimal joint action on >= 95 % of 20 seeds."""
    assert success_rate("sequential", objective) >= 0.95


@pytest.mark.parametrize("objective", CASES)
def test_simultaneous_update_miscoordinates_more_often(objective: str) -> None:
    """Simultaneous updates, same budget, succeed clearly less often (measured: ppo 35 %, trpo 15 %, a2c 35 %)."""
    rates = {kind: success_rate(kind, objective) for kind in ("sequential", "simultaneous")}
    assert rates["simultaneous"] <= rates["sequential"] - 0.3, rates
