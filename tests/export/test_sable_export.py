"""Sable exported as one joint TorchScript module: the export takes the in-harl policy's deterministic
actions on fixed inputs (greedy under random action masks; the Gaussian's mean, in the Box), and a
recurrent Sable's retention states (and step counts) ride in and out of it from step to step."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

import harl
from harl.cli import main
from harl.errors import HarlError
from harl.export import write_torchscript
from harl.export.sable import deploy_sable, sable_entry, sable_example
from harl.inference import JointTeamActor
from harl.policy.sable_policy import SablePolicy

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
PIPELINES = Path(__file__).parents[2] / "pipelines"
REC, FF = PIPELINES / "sable_mpe_torch_spread.toml", PIPELINES / "sable-ff_mpe_torch_spread.toml"
B = 5


def _policy(memory: bool, discrete: bool, encoding: bool = False) -> SablePolicy:
    """Agents of different observation widths (zero-padded), random weights everywhere."""
    torch.manual_seed(0)
    obs = [spaces.Box(-1, 1, (d,)) for d in (4, 6, 5)]
    act = [spaces.Discrete(4) if discrete else spaces.Box(-0.5, 0.5, (2,))] * 3
    policy = SablePolicy(obs, act, memory=memory, embed_dim=16, n_head=2, n_block=2, positional_encoding=encoding)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in policy.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g))
    return policy.eval()


def _load(policy: SablePolicy, masked: bool, tmp: Path) -> JointTeamActor:
    space = policy_space(policy)
    module = deploy_sable(policy, space, masked)
    write_torchscript(module, sable_example(module), tmp / "team.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loaded = torch.jit.load(str(tmp / "team.pt"))
    return JointTeamActor(loaded, sable_entry("team.pt", module, space), [])


def policy_space(policy: SablePolicy) -> spaces.Space:
    return spaces.Discrete(policy.action_dim) if policy.discrete else spaces.Box(-0.5, 0.5, (2,))


def _inputs(step: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(step)
    obs = [rng.normal(size=(B, d)).astype(np.float32) for d in (4, 6, 5)]
    avail = []
    for _ in obs:
        mask = (rng.random((B, 4)) < 0.5).astype(np.float32)
        mask[np.arange(B), rng.integers(0, 4, B)] = 1.0
        avail.append(mask)
    return obs, avail


@pytest.mark.parametrize(("memory", "discrete", "encoding"), [
    (False, True, False), (False, False, False), (True, True, False), (True, False, False), (True, True, True)],
    ids=["ff-discrete", "ff-box", "rec-discrete", "rec-box", "rec-encoded"])
def test_exported_actions_equal_the_policys(tmp_path: Path, memory: bool, discrete: bool, encoding: bool) -> None:
    """Four steps of 5 envs (traced at 2), episodes starting at step 0 and in rows 1 and 3 at step 2, the
    states carried by each side on its own."""
    policy = _policy(memory, discrete, encoding)
    team = _load(policy, masked=discrete, tmp=tmp_path)
    ours = policy.initial_hidden(B)
    theirs = team.initial_hidden(B)
    assert (theirs is None) == (not memory)
    for step in range(4):
        obs, avail = _inputs(step)
        masks = avail if discrete else None
        starts = np.ones(B, np.float32) if step == 0 else np.isin(np.arange(B), [1, 3]).astype(np.float32) * (step == 2)
        want, ours = policy.act([torch.as_tensor(o) for o in obs], masks, True, hidden=ours,
                                starts=torch.as_tensor(starts))
        got, theirs = team.act(obs, masks, True, hidden=theirs, starts=starts)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            if discrete:
                assert g.dtype == np.int64
                np.testing.assert_array_equal(g, w[:, 0].numpy().astype(np.int64))
                assert np.all(np.take_along_axis(avail[i], g[:, None], 1) == 1)
            else:
                np.testing.assert_allclose(g, np.clip(w.numpy(), -0.5, 0.5), rtol=0, atol=1e-5)
        if memory:
            assert theirs is not None
            net = ours.network if encoding else ours
            for a, b in zip(theirs[:3], net, strict=True):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
            if encoding:
                assert torch.equal(theirs[3], ours.steps)


def test_the_manifest_names_the_carried_states(tmp_path: Path) -> None:
    module = deploy_sable(_policy(True, True, True), spaces.Discrete(4), True)
    entry = sable_entry("team.pt", module, spaces.Discrete(4))
    assert entry["kind"] == "sable" and entry["state"] == ["encoder", "decoder_self", "decoder_cross", "steps"]
    assert [t["name"] for t in entry["inputs"]] == ["obs", "avail", "starts", "encoder", "decoder_self",
                                                    "decoder_cross", "steps"]
    assert [t["name"] for t in entry["outputs"]] == ["actions", "encoder", "decoder_self", "decoder_cross", "steps"]
    assert entry["inputs"][3]["shape"] == ["batch", 2, 2, 8, 8]


def _tiny_run(tmp: Path, pipeline: Path) -> Path:
    run = tmp / "run"
    assert main(["train", str(pipeline), "--set", "collector.n_envs=4", "--set", "collector.rollout_length=8",
                 "--set", "updater.objective.embed_dim=16", "--set", "run.total_env_steps=64",
                 "--set", "evaluator.every_iterations=1", "--set", "evaluator.episodes=2", "--set", "evaluator.n_envs=2",
                 "--set", 'run.device="cpu"', "--run-dir", str(run)]) == 0
    return run


@pytest.mark.parametrize("pipeline", [FF, REC], ids=["ff", "rec"])
def test_harl_export_of_a_run_takes_its_actions(tmp_path: Path, pipeline: Path) -> None:
    run = _tiny_run(tmp_path, pipeline)
    out = tmp_path / "ts"
    assert main(["export", str(run), "--format", "torchscript", "--out", str(out)]) == 0
    manifest = json.loads((out / "policy.json").read_text())
    assert manifest["joint"]["kind"] == "sable" and manifest["joint"]["file"] == "team.pt"
    from harl.export import load_team

    policy = load_team(run).policy
    loaded = harl.load_policy(out)
    direct = harl.load_policy(run)
    rng = np.random.default_rng(0)
    ours, theirs, again = policy.initial_hidden(B), loaded.initial_hidden(B), direct.initial_hidden(B)
    for step in range(3):
        obs = [rng.normal(size=(B, 18)).astype(np.float32) for _ in range(3)]
        starts = np.full(B, float(step == 0), np.float32)
        want, ours = policy.act([torch.as_tensor(o) for o in obs], None, True, hidden=ours,
                                starts=torch.as_tensor(starts))
        got, theirs = loaded.act(obs, None, True, hidden=theirs, starts=starts)
        same, again = direct.act(obs, None, True, hidden=again, starts=starts)
        for g, s, w in zip(got, same, want, strict=True):
            np.testing.assert_array_equal(g, w[:, 0].numpy().astype(np.int64))
            np.testing.assert_array_equal(s, g)


def test_onnx_is_refused_with_a_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _tiny_run(tmp_path, FF)
    assert main(["export", str(run), "--format", "onnx", "--out", str(tmp_path / "x")]) == 2
    assert "Sable's agents act through one network" in " ".join(capsys.readouterr().err.split())
    with pytest.raises(HarlError, match="--with-distribution"):
        from harl.export import export_team, load_team
        export_team(load_team(run), "torchscript", tmp_path / "y", with_params=True)
