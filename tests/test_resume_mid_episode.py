"""Exact resume at any rollout length (issue 47 item 6): a checkpoint taken while episodes are under
way holds the envs' whole state and the next rollout's first slot, and a resume continues them.

Rollouts of 10 steps against episodes of 25: the checkpoint of iteration 3 is at step 5 of every
env's second episode.  Resuming from it writes the rows the uninterrupted run wrote (wall-clock
columns aside) and ends with the same networks, optimisers and generators.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from harl.cli import main
from harl.envs.mpe_torch.config import MPETorchConfig
from harl.envs.mpe_torch.vector import MPETorchVectorEnv
from harl.logging.csv_log import read_metrics
from harl.rundir.checkpoint import load_checkpoint

ROOT = Path(__file__).parents[1]
TORCH_MPE = ROOT / "pipelines" / "happo_mpe_torch_spread.toml"
MPE = ROOT / "pipelines" / "happo_mpe_spread.toml"
WALL_CLOCK = ("wall_time", "steps_per_s")
CHECKPOINT = "iter_0000003.pt"


def settings(**extra: object) -> list[str]:
    """Six iterations of 2 envs x 10 steps (episodes of 25 run across rollouts), small networks,
    a checkpoint after every iteration, an evaluation every other."""
    values: dict[str, object] = {
        "collector.n_envs": 2, "collector.rollout_length": 10, "run.total_env_steps": 120,
        "env.max_episode_steps": 25, "evaluator.episodes": 2, "evaluator.n_envs": 2, "evaluator.every_iterations": 2,
        "policy.hidden_sizes": "[16,16]", "critic.hidden_sizes": "[16,16]", "updater.objective.epochs": 2,
        "checkpoint.every_iterations": 1, "checkpoint.keep": 100, "logging.progress": "false",
        "run.torch_threads": 1, **extra,
    }
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def rows(run_dir: Path) -> list[dict[str, object]]:
    return [{k: v for k, v in row.items() if k not in WALL_CLOCK} for row in read_metrics(run_dir / "metrics.csv")]


def equal(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if hasattr(a, "dtype") and hasattr(a, "shape"):  # numpy
        return bool(hasattr(b, "shape") and a.shape == b.shape and (a == b).all())  # type: ignore[attr-defined, operator]
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    return a == b


def final_state(run_dir: Path) -> dict[str, object]:
    newest = max((run_dir / "checkpoints").glob("iter_*.pt"))
    state = load_checkpoint(newest)
    state["counters"].pop("wall_time")
    for key in ("pipeline", "metrics"):
        state.pop(key, None)
    return state


def resumed_matches(pipeline: Path, tmp_path: Path, *extra: str) -> tuple[Path, Path]:
    whole = tmp_path / "whole"
    assert main(["train", str(pipeline), *settings(), *extra, "--run-dir", str(whole)]) == 0
    saved = load_checkpoint(whole / "checkpoints" / CHECKPOINT)["collector"]
    assert [s["steps"] for s in saved["episode_starts"]] == [5, 5]  # mid-episode
    assert "env_state" in saved and "next" in saved
    resumed = tmp_path / "resumed"
    shutil.copytree(whole, resumed)
    checkpoint = resumed / "checkpoints" / CHECKPOINT
    assert main(["train", "--resume", str(resumed), "--checkpoint", str(checkpoint)]) == 0
    assert [r["iteration"] for r in rows(resumed)] == ["1", "2", "3", "4", "5", "6"]
    assert rows(resumed) == rows(whole)
    assert equal(final_state(resumed), final_state(whole))
    return whole, resumed


def test_torch_mpe_resumes_exactly_mid_episode(tmp_path: Path) -> None:
    resumed_matches(TORCH_MPE, tmp_path, "--set", "run.device=cpu")


@pytest.mark.parametrize("backend", ["subprocess", "inline"])
def test_mpe2_resumes_exactly_mid_episode(tmp_path: Path, backend: str) -> None:
    """mpe2's MPE (``MPEEnv.get_state``: its episode's reset replayed, then positions, velocities,
    utterances, step count and generator put back), in worker processes (the shipped pipeline's
    backend) and in this one."""
    pytest.importorskip("mpe2", reason="MPE (pip install harl[mpe])")
    resumed_matches(MPE, tmp_path, "--set", f'collector.backend="{backend}"', "--set", "collector.workers=2")


def test_without_the_env_state_the_episodes_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The fallback: an env that cannot take the saved state (no ``set_state``) restarts the episodes
    under way, says so in a note, and the resumed run then differs from the uninterrupted one."""
    whole = tmp_path / "whole"
    assert main(["train", str(TORCH_MPE), *settings(), "--set", "run.device=cpu", "--run-dir", str(whole)]) == 0
    monkeypatch.setattr(MPETorchVectorEnv, "set_state", property(lambda self: None))  # the env does not take it
    restarts = []
    restart = MPETorchVectorEnv.restart
    monkeypatch.setattr(MPETorchVectorEnv, "restart", lambda self, starts: restarts.append(1) or restart(self, starts))
    resumed = tmp_path / "resumed"
    shutil.copytree(whole, resumed)
    assert main(["train", "--resume", str(resumed), "--checkpoint", str(resumed / "checkpoints" / CHECKPOINT)]) == 0
    assert restarts == [1]
    assert "written with episodes under way" in capsys.readouterr().out
    assert rows(resumed)[:3] == rows(whole)[:3]
    assert rows(resumed)[3:] != rows(whole)[3:]


def test_vector_env_state_round_trip() -> None:
    """``get_state`` / ``set_state`` of the torch MPE: another env, given the state, steps on as the
    first does (observations, rewards, the episodes' returns)."""
    config = MPETorchConfig(max_episode_steps=25)
    first = MPETorchVectorEnv(config, 3, seed=4)
    first.reset()
    actions = torch.rand(40, first.n_agents, 3, 5, generator=torch.Generator().manual_seed(0))
    for t in range(7):
        first.step(list(actions[t]))
    other = MPETorchVectorEnv(config, 3, seed=99)
    other.reset()
    other.set_state(first.get_state())
    for t in range(7, 40):
        a, b = first.step(list(actions[t])), other.step(list(actions[t]))
        assert torch.equal(a.state, b.state) and torch.equal(a.rewards, b.rewards)
        assert a.episode_infos == b.episode_infos
