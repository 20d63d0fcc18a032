"""Sable's shipped pipelines: they pass ``harl check``, are named Sable, hold Mava's defaults; bad
input gets one paragraph and exit 2; ``--vectorize`` is refused naming Sable's stages."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import tomllib

from harl.algorithms import kinds_of, name_of
from harl.api import load_pipeline
from harl.cli import main

PIPELINES = Path(__file__).parents[2] / "pipelines"
REC, FF, SMAX = (PIPELINES / f"{name}.toml" for name in ("sable_mpe_torch_spread", "sable-ff_mpe_torch_spread", "sable_smax_3m"))
needs_smax = pytest.mark.skipif(importlib.util.find_spec("jaxmarl") is None,
                                reason='SMAX needs jaxmarl (pip install "harl[smax]")')


@pytest.mark.parametrize("path", [REC, FF, pytest.param(SMAX, marks=needs_smax)], ids=lambda p: p.stem)
def test_shipped_pipelines_pass_check_and_are_sable(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(path)]) == 0
    assert name_of(kinds_of(tomllib.loads(path.read_text()))) == "Sable"


@pytest.mark.parametrize("path", [REC, FF], ids=lambda p: p.stem)
def test_pipelines_hold_mavas_defaults(path: Path) -> None:
    """mava/configs/system/sable/{rec,ff}_sable.yaml and configs/network/{rec,ff}_retention.yaml at 73c4611."""
    spec = load_pipeline(path)
    o, c = spec.updater.objective, spec.critic
    assert (o.lr, o.epochs, o.minibatches, o.clip, o.entropy_coef, o.max_grad_norm, o.adam_eps) == (
        2.5e-4, 4, 2, 0.2, 0.01, 0.5, 1e-5)
    assert (o.n_block, o.embed_dim, o.n_head, o.decay_scaling_factor, o.chunk_timesteps, o.agent_id) == (
        1, 64, 1, 0.8, 0, True)
    assert (c.value_loss_coef, c.clip_value_loss, c.value_clip) == (0.5, True, 0.2)
    assert (spec.returns.gamma, spec.returns.lam, spec.returns.proper_time_limits) == (0.99, 0.95, False)
    assert (spec.collector.rollout_length, spec.collector.n_envs) == (128, 32)
    assert o.memory == (path == REC)
    assert (o.agents_chunk_size, o.timestep_positional_encoding) == (0, False)  # use_chunkwise False; :11


@pytest.mark.parametrize(("setting", "said"), [
    ("updater.objective.n_head=3", "expected a divisor of embed_dim (64), got 3"),
    ("updater.objective.chunk_timesteps=5", "expected a divisor of collector.rollout_length (128), got 5"),
    ("updater.objective.minibatches=3", "expected a divisor of collector.n_envs (32), got 3"),
    ("collector.compile=\"on\"", "Sable's collection step is not compiled"),
])
def test_bad_settings_exit_2_saying_why(setting: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(REC), "--set", setting]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def test_the_feed_forward_variant_has_no_timesteps_to_chunk(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(FF), "--set", "updater.objective.chunk_timesteps=32"]) == 2
    assert "trains single steps" in capsys.readouterr().err


def test_chunked_training_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(REC), "--set", "updater.objective.chunk_timesteps=32"]) == 0


def test_vectorize_is_refused_naming_sable_stages(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", str(REC), "--seeds", "1,2", "--vectorize"]) == 2
    err = capsys.readouterr().err
    assert 'updater.objective.kind = "sable"' in err and 'critic.kind = "sable_v"' in err
    assert "Drop --vectorize" in err
