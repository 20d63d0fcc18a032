"""MAT exported as one joint TorchScript module: ``harl.load_policy`` of the export takes the run's
own deterministic actions (greedy under random action masks; the Gaussian's mean, in the Box)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import harl
from harl.cli import main
from harl.errors import HarlError
from harl.export import export_team, load_team
from tests.mat.test_runs import MAT_MPE, settings

pytest.importorskip("mpe2", reason="these runs use MPE (pip install harl[mpe])")
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
N = 64


def tiny_run(tmp: Path, objective: str, continuous: bool, order: str = "fixed") -> Path:
    run = tmp / "run"
    extra = {"updater.objective.kind": objective, "env.continuous_actions": str(continuous).lower(),
             "run.total_env_steps": 100, "evaluator.every_iterations": 1}
    if objective == "mat":
        extra["updater.objective.order"] = order
    assert main(["train", str(MAT_MPE), *settings(**extra), "--run-dir", str(run)]) == 0
    return run


@pytest.mark.parametrize(("objective", "continuous", "order"),
                         [("mat", False, "fixed"), ("mat", False, "random"), ("mat", False, "episode"), ("mat_dec", False, ""),
                          ("mat", True, "fixed")])
def test_load_policy_of_the_export_takes_the_runs_actions(tmp_path: Path, objective: str, continuous: bool,
                                                          order: str) -> None:
    run = tiny_run(tmp_path, objective, continuous, order)
    out = tmp_path / "ts"
    assert main(["export", str(run), "--format", "torchscript", "--out", str(out)]) == 0
    manifest = json.loads((out / "policy.json").read_text())
    assert manifest["joint"]["file"] == "team.pt" and all(a["joint"] for a in manifest["agents"])
    team = load_team(run)
    policy = team.policy
    rng = np.random.default_rng(0)
    obs = [rng.normal(size=(N, d)).astype(np.float32) for d in team.observation_dims]
    avail = None
    if not continuous:
        n = team.action_spaces[0].n
        avail = []
        for _ in obs:
            mask = (rng.random((N, n)) < 0.5).astype(np.float32)
            mask[np.arange(N), rng.integers(0, n, N)] = 1.0  # at least one action available
            avail.append(mask)
    want, _ = policy.act(obs, avail, deterministic=True)
    loaded = harl.load_policy(out)
    got, hidden = loaded.act(obs, avail, True)
    assert hidden is None and len(got) == len(obs)
    for i, (g, w) in enumerate(zip(got, want)):
        w = w.numpy()
        if continuous:
            space = team.action_spaces[i]
            np.testing.assert_allclose(g, np.clip(w, space.low, space.high), rtol=0, atol=1e-5)
        else:
            assert g.dtype == np.int64
            np.testing.assert_array_equal(g, w[:, 0].astype(np.int64))
            assert np.all(np.take_along_axis(avail[i], g[:, None], 1) == 1)
    single, _ = loaded.act([o[0] for o in obs], None if avail is None else [a[0] for a in avail], True)
    for s, g in zip(single, got):
        np.testing.assert_allclose(s, g[0], rtol=0, atol=1e-5)
    direct, _ = harl.load_policy(run).act(obs, avail, True)  # a run directory acts the same way
    for d, g in zip(direct, got):
        np.testing.assert_allclose(d, g, rtol=0, atol=1e-5)
    with pytest.raises(HarlError, match="deterministic"):
        loaded.act(obs, avail, False)


def test_onnx_is_refused_with_a_reason(tmp_path: Path) -> None:
    run = tiny_run(tmp_path, "mat", False)
    with pytest.raises(HarlError, match="--format torchscript"):
        export_team(load_team(run), "onnx", tmp_path / "onnx")
