"""The shipped self-play pipelines (air combat 1v1, SMAX 3m), tiny budgets: a few iterations, then
``harl eval --against pool`` and ``--against scripted`` and a crossplay, which crashed on both
(their ``[evaluator]`` plays the learner alone against the env's own opponent, and the match kept it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harl import api
from harl.cli import main

ROOT = Path(__file__).parents[2]


def sets(values: list[str]) -> list[str]:
    return [arg for value in values for arg in ("--set", value)]


def check_shipped_self_play(pipeline: Path, learner: str, seat: str, tiny: list[str], tmp_path: Path,
                            capsys: pytest.CaptureFixture[str], printed: bool = True) -> None:
    """Train a few iterations, then eval --against pool and --against scripted in the training world
    (the pipeline's [evaluator] plays the learner alone against the env's opponent), and crossplay.
    ``printed``: also read what harl eval prints (jaxmarl's import leaves pytest's capsys empty)."""
    run = tmp_path / "run"
    assert main(["train", str(pipeline), *sets(tiny), "--run-dir", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["eval", str(run), "--against", "pool", "--episodes", "2"]) == 0
    if printed:
        out = capsys.readouterr().out
        assert f"({learner}) against pool: 2 episodes; win" in out
        assert f"return of {learner}:" in out and f"return of {seat}:" in out
    match = api.play(run, "scripted", episodes=2)
    assert (match.team, match.opponent, match.episodes) == (learner, "scripted", 2)
    assert set(match.returns) == {learner, seat}
    assert match.win.mean + match.loss.mean + match.draw.mean == pytest.approx(1.0)
    table = api.crossplay([run], episodes=2)
    assert table[0][0].team == learner and set(table[0][0].returns) == {learner, seat}


@pytest.mark.extra("lag")
def test_the_shipped_air_combat_self_play_evaluates_against_pool_and_script(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("jsbsim", reason='air combat needs jsbsim (pip install "harl[lag]")')
    pytest.importorskip("openskill", reason='ratings need openskill (pip install "harl[teams]")')
    tiny = ["collector.n_envs=2", "collector.rollout_length=20", "run.total_env_steps=80", "env.max_episode_steps=30",
            "evaluator.episodes=2", "evaluator.n_envs=2", "policy.hidden_sizes=[16]", "critic.hidden_sizes=[16]",
            "updater.objective.epochs=1", "critic.epochs=1", "checkpoint.every_iterations=1", "run.device=cpu"]
    check_shipped_self_play(ROOT / "pipelines" / "happo_air_combat_1v1_selfplay.toml", "red", "blue", tiny,
                            tmp_path, capsys)


@pytest.mark.slow  # jax compiles SMAX's step for every env built: about 4 minutes on two cores
@pytest.mark.extra("smax")
def test_the_shipped_smax_self_play_evaluates_against_pool_and_script(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("jaxmarl", reason='SMAX needs jax and jaxmarl (pip install "harl[smax]")')
    pytest.importorskip("openskill", reason='ratings need openskill (pip install "harl[teams]")')
    tiny = ["collector.n_envs=2", "collector.rollout_length=10", "run.total_env_steps=40", "env.max_episode_steps=20",
            "evaluator.episodes=2", "evaluator.n_envs=2", "policy.hidden_sizes=[16]", "critic.hidden_sizes=[16]",
            "updater.objective.epochs=1", "critic.epochs=1", "checkpoint.every_iterations=1", "run.device=cpu"]
    check_shipped_self_play(ROOT / "pipelines" / "mappo_smax_3m_selfplay.toml", "allies", "enemies", tiny,
                            tmp_path, capsys, printed=False)
