"""harl's MAT update against numbers PKU-MARL's own ``MATTrainer.ppo_update`` produced.

``benchmarks/mat_parity_update.py --steps 3 --batch 256 --seed 2 --json
benchmarks/results/mat_update_pinned.json`` ran the same initial weights (harl's, seed 2) and
the same batch through MAT's code (PKU-MARL/Multi-Agent-Transformer, its ``MATTrainer`` and
``TransformerPolicy``, MAT's MPE settings) and kept MAT's losses and, per tensor, the sum of
the weight changes and of their absolute values after each Adam step.  Here harl's side runs
alone (no MAT checkout needed) and must give MAT's numbers to float32 rounding.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks.mat_parity_update import fingerprint, harl_steps

PINNED = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "mat_update_pinned.json"


@pytest.fixture(scope="module")
def replay():
    record = json.loads(PINNED.read_text(encoding="utf-8"))
    torch.set_num_threads(1)
    policy, initial, stats = harl_steps(record["seed"], record["batch_env_steps"], len(record["steps"]))
    after = {k: v.detach() for k, v in policy.named_parameters()}
    return record, stats, fingerprint(after, initial), {k: v.numel() for k, v in after.items()}


def test_losses_match_mat_step_by_step(replay):
    record, stats, _, _ = replay
    for ours, row in zip(stats, record["steps"], strict=True):
        mat = row["mat"]
        assert ours.policy_loss == pytest.approx(mat["policy_loss"], rel=1e-5, abs=1e-7)
        assert ours.value_loss == pytest.approx(mat["value_loss"], rel=1e-5)
        assert ours.entropy == pytest.approx(mat["entropy"], rel=1e-6)
        assert ours.grad_norm == pytest.approx(mat["grad_norm"], rel=1e-5)


def test_weights_after_the_updates_match_mat(replay):
    record, _, ours, numel = replay
    pinned = record["steps"][-1]["mat_weight_change"]
    assert sorted(ours) == sorted(pinned)
    for name, (total, magnitude) in pinned.items():
        # each element's change agrees to ~1e-7 (float32 rounding of a change of ~2e-3)
        tol = 1e-7 * numel[name] + 1e-9
        assert abs(ours[name][0] - total) <= tol, name
        assert abs(ours[name][1] - magnitude) <= tol, name
        assert magnitude > 0, name  # every tensor moved: the pin is not of an idle layer
