"""harl.load_policy: a team from an export folder or a run directory, acting like harl's actors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import harl
from harl.cli import main
from harl.errors import HarlDeprecationWarning, HarlError
from harl.export import load_team
from harl.export.deploy import team_actors
from tests.export.test_export import COUNTING_HAPPO, counting_run
from tests.fakes.counting import FORBIDDEN_ACTION, OBS_SIZES


@pytest.fixture(scope="module")
def gru_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GRU HAPPO team on the counting env: Box, masked Discrete and MultiDiscrete agents."""
    return counting_run(tmp_path_factory.mktemp("gru"), COUNTING_HAPPO.format(recurrent="naive"))


@pytest.fixture(scope="module")
def exported(gru_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ts") / "team"
    assert main(["export", str(gru_run), "--format", "torchscript", "--out", str(out), "--with-distribution"]) == 0
    return out


def observations(batch: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((batch, size)).astype(np.float32) for size in OBS_SIZES]


def harl_steps(run: Path, obs: list[np.ndarray], steps: int) -> list[list[np.ndarray]]:
    """harl's deterministic actions for ``steps`` steps of the same observations, from a zero GRU state."""
    team = load_team(run)
    hidden = team.policy.initial_hidden(len(obs[0]))
    out = []
    for t in range(steps):
        starts = torch.full((len(obs[0]),), float(t == 0))
        actions, hidden = team.policy.act([torch.as_tensor(o) for o in obs], None, True, hidden, starts)
        out.append([a.numpy() for a in actions])
    return out


@pytest.mark.parametrize("source", ["export", "run"])
def test_batched_actions_and_gru_state_follow_harl(source: str, gru_run: Path, exported: Path) -> None:
    """Three steps of a batch of 64: the same actions as harl's team (state carried between steps)."""
    team = harl.load_policy(exported if source == "export" else gru_run)
    obs = observations(64)
    want = harl_steps(gru_run, obs, 3)
    state = None
    for t in range(3):
        actions, state = team.act(obs, hidden=state)
        assert state is not None and state[0].shape == (64, team.hidden_size)
        np.testing.assert_allclose(actions[0], np.clip(want[t][0], -1, 1), atol=1e-5, rtol=0)
        assert actions[1].dtype == np.int64 and np.array_equal(actions[1], want[t][1][:, 0])
        assert np.array_equal(actions[2], want[t][2].astype(np.int64))


def test_a_single_observation_gives_actions_without_a_batch_axis(exported: Path) -> None:
    team = harl.load_policy(exported)
    actions, state = team.act([o[0] for o in observations(1)])
    assert [np.shape(a) for a in actions] == [(2,), (), (2,)]
    assert state[0].shape == (1, team.hidden_size)


def test_sampling_respects_masks_and_bounds(exported: Path) -> None:
    """deterministic=False draws: a masked action never, Box samples inside the bounds, not all the mean."""
    team = harl.load_policy(exported)
    obs = observations(2000, seed=1)
    avail = [None, np.tile(np.array([1, 1, 1, 0], np.float32), (2000, 1)), np.ones((2000, 5), np.float32)]
    sampled, _ = team.act(obs, avail, deterministic=False)
    greedy, _ = team.act(obs, avail)
    assert FORBIDDEN_ACTION not in sampled[1] and set(np.unique(sampled[1])) == {0, 1, 2}
    assert sampled[0].min() >= -1 and sampled[0].max() <= 1 and not np.allclose(sampled[0], greedy[0])


def test_sampling_needs_the_distribution(gru_run: Path, tmp_path: Path) -> None:
    assert main(["export", str(gru_run), "--format", "torchscript", "--out", str(tmp_path / "plain")]) == 0
    with pytest.raises(HarlError, match="export again with --with-distribution"):
        harl.load_policy(tmp_path / "plain").act(observations(2), deterministic=False)


def test_what_is_not_a_team(tmp_path: Path) -> None:
    with pytest.raises(HarlError) as info:
        harl.load_policy(tmp_path)
    assert str(info.value) == (f"{tmp_path}: neither a harl export folder (no policy.json) nor a run directory "
                               "(no pipeline.toml); pass what harl export --out or harl train wrote")


def test_onnx_without_its_extra_is_a_clear_error(gru_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    for module in ("onnx", "onnxruntime"):  # hidden both, so the answer is the same with the extra or without
        monkeypatch.setitem(sys.modules, module, None)
    assert main(["export", str(gru_run), "--format", "onnx", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.strip() == ('harl: harl export --format onnx needs: pip install "harl[onnx]" '
                                               '(the optional package "onnx" is not installed)')


def test_importing_the_inference_api_loads_no_training_stack_or_env() -> None:
    """harl.load_policy needs torch only: no gymnasium, env package or harl stage is imported."""
    code = ("import sys, harl; harl.load_policy; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('gymnasium', 'mpe2', 'attrs', 'cattrs') "
            "or (m.startswith(('harl.compose', 'harl.run.lifecycle', 'harl.config', 'harl.envs', 'harl.policy', "
            "'harl.export')) and m != 'harl.inference')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_manifest_describes_each_agent(exported: Path) -> None:
    import json

    manifest = json.loads((exported / "policy.json").read_text())
    assert manifest["format"] == "torchscript" and "kind = \"counting\"" in manifest["pipeline"]
    discrete = manifest["agents"][1]
    assert discrete["action_space"] == {"type": "Discrete", "n": 4}
    assert [(t["name"], t["shape"]) for t in discrete["inputs"]] == [
        ("obs", ["batch", 5]), ("avail", ["batch", 4]), ("hidden", ["batch", 16])]
    assert [(t["name"], t["dtype"]) for t in discrete["outputs"]] == [
        ("action", "int64"), ("hidden_out", "float32"), ("logits", "float32")]
    assert len(team_actors(load_team(Path(manifest["checkpoint"]).parents[1]).policy)) == 3


@pytest.mark.parametrize("source", ["export", "run"])
def test_a_value_team_carries_its_gru_state_and_last_action(source: str, tmp_path: Path) -> None:
    """A VDN team of GRU agent Q networks that take their previous action: four steps of a batch
    through load_policy equal the team's own greedy steps (the state carries both)."""
    from tests.export.test_export import VALUE_GRU, value_run

    run = value_run(tmp_path, VALUE_GRU + ["critic.kind=vdn"])
    out = tmp_path / "ts"
    assert main(["export", str(run), "--format", "torchscript", "--out", str(out)]) == 0
    team, policy = harl.load_policy(out if source == "export" else run), load_team(run).policy
    rng = np.random.default_rng(1)
    obs = [rng.random((32, 4)).astype(np.float32) for _ in range(2)]
    avail = [np.ones((32, 3), np.float32), np.tile(np.array([1, 1, 0], np.float32), (32, 1))]
    state, hidden = team.initial_hidden(32), policy.initial_hidden(32, "cpu")
    for t in range(4):
        starts = (np.arange(32) < 16) & (t == 2) | (t == 0)  # half the rows restart at step 2
        actions, state = team.act(obs, avail, True, hidden=state, starts=starts.astype(np.float32))
        with torch.no_grad():
            want, hidden = policy.act([torch.as_tensor(o) for o in obs], [torch.as_tensor(a) for a in avail], True,
                                      hidden, torch.as_tensor(starts, dtype=torch.float32))
        for got, w in zip(actions, want):
            np.testing.assert_array_equal(got, w[:, 0].numpy().astype(np.int64))
        assert state is not None and len(state) == 2 and state[0][1].dtype == torch.int64
    with pytest.warns(HarlDeprecationWarning, match=r"act\(obs, avail, state\)"):
        older, _ = team.act(obs, avail, state)  # the older signature: the state third
    with pytest.warns(HarlDeprecationWarning, match=r"act\(state=\)"):
        keyword, _ = team.act(obs, avail, state=state)
    newer, _ = team.act(obs, avail, hidden=state)
    for a, b, c in zip(older, keyword, newer):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, c)
