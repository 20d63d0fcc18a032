"""Two learning teams resume exactly mid-episode (issue 56 item 18): the teams' collector saves the
world's env state, its running team returns and each team's next rollout start, as the one-team
collector does (tests/test_resume_mid_episode.py).

Rollouts of 30 steps against MPE simple_tag's episodes of 25: the checkpoint of iteration 2 is at
step 10 of every env's third episode.  Resuming from it writes the rows the uninterrupted run wrote
(wall-clock columns aside) and ends with the same networks, optimisers and generators.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harl.cli import main
from harl.rundir.checkpoint import load_checkpoint
from tests.test_resume_mid_episode import equal, final_state, rows

pytest.importorskip("mpe2", reason="these runs use MPE (pip install harl[mpe])")

ROOT = Path(__file__).parents[2]
TAG = ROOT / "pipelines" / "happo-vs-mappo_mpe_tag.toml"
CHECKPOINT = "iter_0000002.pt"
SMALL = {"collector.n_envs": 2, "collector.rollout_length": 30, "run.total_env_steps": 240,
         "evaluator.episodes": 2, "evaluator.n_envs": 2, "evaluator.every_iterations": 2,
         "policy.hidden_sizes": "[16]", "critic.hidden_sizes": "[16]", "updater.objective.epochs": 1,
         "critic.epochs": 1, "checkpoint.every_iterations": 1, "checkpoint.keep": 100,
         "logging.progress": "false", "run.torch_threads": 1}


def settings() -> list[str]:
    return [arg for key, value in SMALL.items() for arg in ("--set", f"{key}={value}")]


def test_two_learning_teams_resume_exactly_mid_episode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whole = tmp_path / "whole"
    assert main(["train", str(TAG), *settings(), "--run-dir", str(whole), "--quiet"]) == 0
    saved = load_checkpoint(whole / "checkpoints" / CHECKPOINT)["collector"]
    assert [s["steps"] for s in saved["episode_starts"]] == [10, 10]  # mid-episode
    assert {"env_state", "next"} <= saved.keys() and "team_returns" in saved["next"]
    assert set(saved["next"]["members"]) == {"predators", "prey"}
    resumed = tmp_path / "resumed"
    shutil.copytree(whole, resumed)
    capsys.readouterr()
    assert main(["train", "--resume", str(resumed), "--checkpoint", str(resumed / "checkpoints" / CHECKPOINT)]) == 0
    assert "holds no env state" not in capsys.readouterr().out
    assert [r["iteration"] for r in rows(resumed)] == ["1", "2", "3", "4"]
    assert rows(resumed) == rows(whole)
    assert equal(final_state(resumed), final_state(whole))


def test_self_play_resumes_exactly_mid_episode(tmp_path: Path) -> None:
    """A self-play pool (MPE spread, 2 agents a side): the snapshot playing each env's episode under
    way, the players' last observations and the pool's games carry over the stop."""
    pytest.importorskip("openskill", reason="ratings need openskill (pip install harl[teams])")
    path = tmp_path / "selfplay.toml"
    path.write_text((ROOT / "pipelines" / "happo_mpe_spread.toml").read_text(encoding="utf-8")
                    + '\n[teams.red]\nagents = ["agent_0", "agent_1"]\n[teams.blue]\nagents = ["agent_2", "agent_3"]\n'
                    'role = "self_play"\nof = "red"\nsnapshot_every_iterations = 1\npool_size = 2\nsample = "pfsp"\n',
                    encoding="utf-8")
    extra = ["--set", "env.n_agents=4", "--set", "env.team_reward=false", "--set", "env.max_episode_steps=25",
             "--set", "collector.backend=inline"]
    whole = tmp_path / "whole"
    assert main(["train", str(path), *settings(), *extra, "--run-dir", str(whole), "--quiet"]) == 0
    saved = load_checkpoint(whole / "checkpoints" / CHECKPOINT)["collector"]
    assert [s["steps"] for s in saved["episode_starts"]] == [10, 10]  # mid-episode
    assert saved["next"]["played"]["blue"]["snapshots"] is not None
    resumed = tmp_path / "resumed"
    shutil.copytree(whole, resumed)
    assert main(["train", "--resume", str(resumed), "--checkpoint", str(resumed / "checkpoints" / CHECKPOINT)]) == 0
    assert rows(resumed) == rows(whole) and len(rows(whole)) == 4
    assert "red_score" in rows(whole)[0]
    assert equal(final_state(resumed), final_state(whole))
