"""A family of a user's own, from tests/fakes/tiny_family.py (which touches nothing of harl),
composes, learns, resumes exactly, is checked like harl's own and shows in ``harl stages``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import harl
from harl import registry
from harl.errors import ConfigError

FAMILY = "tests.fakes.tiny_family"


def pipeline(**collector: Any) -> dict[str, Any]:
    return {
        "run": {"name": "bandit", "seed": 3, "total_env_steps": 1600, "torch_threads": 1, "device": "cpu"},
        "env": {"kind": "team_bandit"},
        "collector": {"kind": f"{FAMILY}:BanditCollectorConfig", "n_envs": 8, "steps": 4, **collector},
        "evaluator": {"episodes": 4, "n_envs": 2, "every_iterations": 10},
        "logging": {"progress": False},
        "checkpoint": {"every_iterations": 5},
    }


def rows(run_dir: Path) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k not in ("wall_time", "steps_per_s")} for row in harl.read_metrics(run_dir)]


def test_a_users_family_takes_its_own_defaults_and_learns(tmp_path: Path) -> None:
    """Only the collector names the family; every other table gets the family's kind; the greedy
    joint action reaches the game's best payoff (10) from uniform play (about 1.9)."""
    spec = harl.load_pipeline(pipeline())
    assert registry.family_of(spec.collector).name == "tests.fakes.tiny_family:bandit"
    assert type(spec.updater.objective).__name__ == "ReinforceConfig" and type(spec.critic).__name__ == "BaselineConfig"
    result = harl.train(pipeline(), run_dir=tmp_path / "run")
    metrics = harl.read_metrics(tmp_path / "run")
    assert result.counters.iteration == 50 and metrics[-1]["eval_return"] == pytest.approx(10.0)
    assert metrics[0]["train_return"] < 4.0 < 9.5 < metrics[-1]["train_return"]  # sampled play: uniform -> best


def test_a_users_family_resumes_exactly(tmp_path: Path) -> None:
    """Stopped after 10 iterations and resumed, its rows equal an uninterrupted run's."""
    harl.train(pipeline(), run_dir=tmp_path / "straight")
    harl.train(pipeline(), run_dir=tmp_path / "split", max_iterations=10)
    harl.resume(tmp_path / "split")
    assert rows(tmp_path / "split") == rows(tmp_path / "straight")


def test_a_users_family_is_checked_like_harls(tmp_path: Path) -> None:
    """Its own checks, its kinds refused in another family, and another family's kinds in it."""
    with pytest.raises(ConfigError, match="policy.share_parameters: the bandit family keeps one row"):
        harl.load_pipeline({**pipeline(), "policy": {"share_parameters": True}})
    with pytest.raises(ConfigError, match=r'buffer.kind: "rollout" belongs to the on-policy family, but '
                                          r'collector.kind = "tests.fakes.tiny_family:BanditCollectorConfig"'):
        harl.load_pipeline({**pipeline(), "buffer": {"kind": "rollout"}})


def test_a_users_family_shows_in_harl_stages(capsys: pytest.CaptureFixture[str]) -> None:
    """``harl stages families`` lists it beside harl's; ``harl stages KIND`` its kinds' keys, like harl's own."""
    import tests.fakes.tiny_family  # noqa: F401 - registers the family
    from harl import api
    from harl.cli import main

    assert ("tests.fakes.tiny_family:bandit", "independent REINFORCE on action logits (a test's family)") in api.families()
    assert [f for f, _ in api.families()][:2] == ["on_policy", "off_policy"]
    [(slot, _, _, keys)] = api.stage_kinds(f"{FAMILY}:BanditCollectorConfig")
    assert slot == "collector" and [k[0] for k in keys] == ["n_envs", "steps"]
    assert main(["stages", "families"]) == 0
    assert "tests.fakes.tiny_family:bandit" in capsys.readouterr().out
