"""The size check counts the networks before they are built (each parameter with its gradient and Adam's
two moments) and names them as the cause: MAT's ``n_block = 10**6`` once took 3 GB in 25 s silently, and
``n_embd = 10**5`` was blamed on "the environments and buffers"."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from gymnasium import spaces

from harl import sizes
from harl.cli import main
from harl.policy.mat import MultiAgentTransformer

ROOT = Path(__file__).parents[1]
MAT = ROOT / "pipelines" / "mat_mpe_spread.toml"
HAPPO = ROOT / "pipelines" / "happo_mpe_spread.toml"
GIB = 1 << 30


@pytest.fixture
def eight_gib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sizes, "available_bytes", lambda device="cpu": 8 * GIB)
    monkeypatch.setattr("harl.envs.footprint.available_bytes", lambda device="cpu": 8 * GIB)


@pytest.mark.parametrize(("discrete", "decentralised", "share", "n_block", "n_embd"),
                         list(itertools.product([True, False], [False, True], [False, True], [1, 3], [8, 32])))
def test_the_transformer_is_counted_exactly(discrete: bool, decentralised: bool, share: bool, n_block: int,
                                            n_embd: int) -> None:
    obs = [spaces.Box(-1, 1, (5,)), spaces.Box(-1, 1, (9,)), spaces.Box(-1, 1, (6,))]
    act = [spaces.Discrete(4) if discrete else spaces.Box(-1, 1, (3,))] * 3
    built = MultiAgentTransformer(obs, act, n_block, n_embd, 2, decentralised=decentralised, share_actor=share)
    assert sizes.transformer_parameters(9, 4 if discrete else 3, discrete, 3, n_block, n_embd, decentralised,
                                        share) == sum(p.numel() for p in built.parameters())


def test_an_mlp_is_counted_exactly() -> None:
    import torch

    net = torch.nn.Sequential(torch.nn.Linear(10, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32), torch.nn.ReLU(),
                              torch.nn.Linear(32, 5))
    assert sizes.mlp_parameters(10, (64, 32), 5) == sum(p.numel() for p in net.parameters())


@pytest.mark.usefixtures("eight_gib")
@pytest.mark.parametrize(("key", "value", "named"), [
    ("updater.objective.n_block", "1_000_000", "updater.objective.n_block = 1,000,000 and n_embd = 64: the transformer's "),
    ("updater.objective.n_embd", "100_000", "updater.objective.n_block = 1 and n_embd = 100,000: the transformer's "),
])
def test_mat_too_big_is_refused_naming_the_transformer(key: str, value: str, named: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mpe2")
    assert main(["train", str(MAT), "--set", f"{key}={value}", "--set", f"logging.dir={tmp_path}"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith(f"harl: {MAT}: {named}") and "parameters with their gradients and Adam's two moments" in err
    assert err.endswith("lower updater.objective.n_block or updater.objective.n_embd (nothing was built)")
    assert "environments and buffers" not in err and list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("eight_gib")
def test_wide_actors_are_refused_naming_their_key(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mpe2")
    assert main(["check", str(HAPPO), "--set", "policy.hidden_sizes=[1_000_000,1_000_000]"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "policy.hidden_sizes = [1000000, 1000000]: the actors' " in err
    assert err.endswith("lower policy.hidden_sizes (nothing was built)")


def test_small_networks_leave_the_messages_as_they_were() -> None:
    """Every shipped size is under a million parameters: nothing is added to the check's sum or its words."""
    obs, act = [spaces.Box(-1, 1, (18,))] * 3, [spaces.Discrete(5)] * 3
    from harl.config.loading import load_spec_and_notes

    spec, _ = load_spec_and_notes(HAPPO)
    assert sizes.network_needs(spec, obs, act, spaces.Box(-1, 1, (54,))) == []
    assert [n.keys for n in sizes.network_needs(spec, obs, act, spaces.Box(-1, 1, (54,)), at_least=0)] == [
        "policy.hidden_sizes", "critic.hidden_sizes"]
