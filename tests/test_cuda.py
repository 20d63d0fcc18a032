"""The CUDA path: both families train on a GPU, a GPU run resumes exactly, and a run trained on
a GPU is read back on the CPU.

CI has no GPU, so these skip there; ``benchmarks/cuda_check.sh`` runs them on a machine that
has one (the same-seed comparisons are within one machine and one process, where cuBLAS and
harl's kernels are deterministic).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from harl.cli import main
from harl.inference import load_policy
from tests.test_determinism import off_policy_settings, resume_from_3, rows, same_final_state, settings

pytest.importorskip("mpe2", reason="these runs use MPE (pip install harl[mpe])")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device here (benchmarks/cuda_check.sh runs these on a GPU)")

ROOT = Path(__file__).parents[1]
OFF_POLICY = off_policy_settings(**{"checkpoint.replay_buffer": "true"})
CASES = {  # pipeline file, its five-iteration settings
    "happo_mpe": ("happo_mpe_spread.toml", settings()),
    "mappo_mpe": ("mappo_mpe_spread.toml", settings()),
    "happo_mpe_torch_on_gpu": ("happo_mpe_spread.toml", settings(**{"env.kind": "mpe_torch", "env.device": "cuda"})),
    "hasac_mpe": ("hasac_mpe_spread.toml", OFF_POLICY),
    "had3qn_mpe": ("had3qn_mpe_spread_discrete.toml", OFF_POLICY),
    "hatd3_mpe": ("hatd3_mpe_spread.toml", OFF_POLICY),
}


def train(case: str, run_dir: Path) -> Path:
    pipeline, values = CASES[case]
    args = ["train", str(ROOT / "pipelines" / pipeline), *values, "--set", "run.device=cuda"]
    assert main([*args, "--run-dir", str(run_dir)]) == 0
    return run_dir


@pytest.mark.parametrize("case", sorted(CASES))
def test_trains_on_cuda_and_resumes_exactly(case: str, tmp_path: Path) -> None:
    """Same seed, same rows; a resume from iteration 3 repeats rows 4 and 5 bit for bit."""
    whole = train(case, tmp_path / "whole")
    assert rows(train(case, tmp_path / "again")) == rows(whole)
    resume_from_3(whole, tmp_path / "resumed")
    assert rows(tmp_path / "resumed") == rows(whole)
    assert same_final_state(tmp_path / "resumed", whole)


def test_a_gpu_run_acts_on_the_cpu(tmp_path: Path) -> None:
    """load_policy reads a checkpoint written from CUDA tensors and acts with CPU inputs."""
    run = train("happo_mpe", tmp_path / "run")
    team = load_policy(run)
    obs = [np.zeros((4, 18), np.float32) for _ in range(3)]
    actions, _ = team.act(obs)
    assert [a.shape for a in actions] == [(4, 5)] * 3 and all(np.isfinite(a).all() for a in actions)
