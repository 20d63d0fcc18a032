"""Competitive runs as a user meets them: self-play ratings, eval --against and crossplay of the
shipped self-play pipelines, the commands the docs and messages name, each team's headline.

The fast runs are MPE (simple_tag, and spread split in two sides for self-play); the shipped
air-combat and SMAX self-play pipelines run with tiny budgets where their extras are installed.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.cli import main
from harl.errors import HarlError
from harl.logging import headline
from harl.logging.csv_log import read_metrics
from harl.policy.on_policy import OnPolicyActors, PolicyConfig
from harl.teams.players import PoolPlayer
from harl.teams.pool import SnapshotPool

ROOT = Path(__file__).parents[2]
TAG = ROOT / "pipelines" / "happo-vs-mappo_mpe_tag.toml"
SMALL = ["collector.n_envs=2", "collector.rollout_length=25", "run.total_env_steps=150", "evaluator.episodes=2",
         "evaluator.n_envs=2", "evaluator.every_iterations=2", "policy.hidden_sizes=[16]", "critic.hidden_sizes=[16]",
         "updater.objective.epochs=1", "critic.epochs=1", "checkpoint.every_iterations=1", "logging.progress=false"]
SELF_PLAY = ('\n[teams.red]\nagents = ["agent_0", "agent_1"]\n[teams.blue]\nagents = ["agent_2", "agent_3"]\n'
             'role = "self_play"\nof = "red"\nsnapshot_every_iterations = 1\npool_size = 2\nsample = "pfsp"\n')
SPREAD_SIDES = [*SMALL, "env.n_agents=4", "env.team_reward=false", "collector.backend=inline",
                "run.total_env_steps=100"]


def sets(values: list[str]) -> list[str]:
    return [arg for value in values for arg in ("--set", value)]


def needs(module: str, why: str) -> None:
    pytest.importorskip(module, reason=why)


# ---------------------------------------------------------------------------------------- ratings


def player(snapshot_rating: str = "learner") -> PoolPlayer:
    from harl.teams.ratings import Ratings

    template = OnPolicyActors([spaces.Box(-1, 1, (4,), np.float32)], [spaces.Discrete(3)],
                              PolicyConfig(hidden_sizes=(8,)))
    return PoolPlayer(template, SnapshotPool(5, "uniform", seed=0), Ratings(), "red", False, snapshot_rating)


def play_games(pool_player: PoolPlayer, outcomes: list[float]) -> None:
    step = pool_player.play([torch.zeros(len(outcomes), 4)], None, True, None, None)
    assert step.snapshots is not None
    pool_player.record(step.snapshots, list(range(len(outcomes))), outcomes)


def test_a_new_snapshot_starts_at_the_learners_rating() -> None:
    """LAG's rule: the snapshot is the learner as it is, so it enters with the learner's mu and sigma."""
    needs("openskill", "ratings need openskill (pip install harl[teams])")
    p = player()
    p.add(p.template[0].state_dict(), 0)
    play_games(p, [1.0, 1.0, 1.0, 0.5])  # the learner wins: its rating moves off the prior
    ratings = p.ratings
    assert ratings is not None
    learner = (ratings.mu("red"), ratings.sigma("red"))
    assert learner[0] > 25.0 and learner[1] < 25.0 / 3
    snapshot = p.add(p.template[0].state_dict(), 1)
    name = p.rating_name(snapshot)
    assert (ratings.mu(name), ratings.sigma(name)) == learner
    assert ratings.games(name) == 0 and name in ratings.names()  # rated, with no game yet (in the checkpoint)
    again = type(ratings)()
    again.load_state_dict(ratings.state_dict())
    assert (again.mu(name), again.sigma(name)) == learner


def test_snapshot_rating_prior_keeps_the_old_rule() -> None:
    needs("openskill", "ratings need openskill (pip install harl[teams])")
    p = player("prior")
    p.add(p.template[0].state_dict(), 0)
    play_games(p, [1.0, 1.0, 1.0])
    snapshot = p.add(p.template[0].state_dict(), 1)
    assert p.ratings is not None
    assert p.ratings.mu(p.rating_name(snapshot)) == pytest.approx(25.0)
    with pytest.raises(ValueError, match="snapshot_rating = 'nope'"):
        player("nope")


def test_the_pool_columns_are_the_learners(tmp_path: Path) -> None:
    """rating_red beside red_pool_size and red_score (not blue_*, which was red's score under blue's name)."""
    needs("openskill", "ratings need openskill (pip install harl[teams])")
    path = tmp_path / "selfplay.toml"
    path.write_text((ROOT / "pipelines" / "happo_mpe_spread.toml").read_text() + SELF_PLAY)
    assert main(["train", str(path), *sets(SPREAD_SIDES), "--run-dir", str(tmp_path / "run"), "--quiet"]) == 0
    row = read_metrics(tmp_path / "run" / "metrics.csv")[0]
    assert {"rating_red", "rating_red_sigma", "red_pool_size", "red_score"} <= set(row)
    assert not {"blue_pool_size", "blue_score"} & set(row)


# ------------------------------------------------------------------------------ who wins, returns


def test_a_teams_world_names_the_envs_per_agent_returns_apart() -> None:
    """simple_tag's predators: the team's return (their summed reward, 30 a capture) and the env's own
    side return (each predator's reward, 10 a capture) are two columns with two names."""
    from harl.compose import build_stages
    from harl.config.loading import load_spec_and_notes

    spec, _ = load_spec_and_notes(TAG, SMALL)
    with build_stages(spec) as stages:
        episodes = stages.collector.collect(stages.buffer).episodes
    assert episodes
    for e in episodes:
        assert "return_adversary" not in e and "return_agent" not in e
        assert e["return_predators"] == pytest.approx(3 * e["return_per_agent_adversary"], abs=1e-4)
        assert e["return_prey"] == pytest.approx(e["return_per_agent_agent"], abs=1e-4)
        assert e["win_prey"] == float(e["captures"] == 0) and e["draw"] == 0.0  # the prey can win


# -------------------------------------------------------------------------------------- headline


def test_the_headline_of_a_two_team_run_names_each_team(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The progress lines and the closing line give each team's return, not their mean over all agents."""
    run = tmp_path / "run"
    assert main(["train", str(TAG), *sets([*SMALL, "logging.progress=true", "logging.log_every=1"]),
                 "--run-dir", str(run)]) == 0
    captured = capsys.readouterr()
    rows = read_metrics(run / "metrics.csv")
    last = rows[-1]
    progress = [line for line in captured.err.splitlines() if line.startswith("it ")]
    assert progress and all(re.search(r"train predators (-|-?\d+\.\d\d), prey (-|-?\d+\.\d\d) ", line)
                            for line in progress)
    want = (f"eval predators {float(last['eval_return_predators']):.2f}, "
            f"prey {float(last['eval_return_prey']):.2f}")
    assert want in progress[-1]
    closing = f"last evaluation return predators {float(last['eval_return_predators']):.2f}, " \
              f"prey {float(last['eval_return_prey']):.2f}"
    assert closing in captured.out.replace("\n", " ")
    assert f"last evaluation return {float(last['eval_return']):.2f}" not in captured.out
    assert main(["eval", str(run), "--episodes", "2"]) == 0
    assert re.search(r"2 episodes, return of predators -?\d+\.\d{3}, prey -?\d+\.\d{3}, length",
                     capsys.readouterr().out)


def test_headline_reads_each_teams_columns() -> None:
    row = {"train_return": 1.0, "predators_train_return": 66.0, "prey_train_return": None,
           "eval_return": 10.96, "eval_return_predators": 66.0, "eval_return_prey": -22.15,
           "eval_win_predators": 1.0, "eval_win_prey": 0.0, "eval_draw": 0.0, "eval_return_per_agent_agent": -22.15}
    assert headline.train_returns(row) == {"predators": 66.0, "prey": None}
    assert headline.eval_returns(row, "eval_") == {"predators": 66.0, "prey": -22.15}
    assert headline.show(headline.train_returns(row)) == "predators 66.00, prey -"
    assert headline.train_returns({"train_return": 1.0, "eval_return": 2.0}) == {}
    assert headline.eval_returns({"return_adversary": 3.0, "captures": 1.0}) == {}  # a one-team run


# ---------------------------------------------------------------------------------------- plot


def test_plot_draws_each_teams_return_by_default(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="harl plot needs matplotlib (pip install harl[plot])")
    from harl import api

    run = tmp_path / "run"
    assert main(["train", str(TAG), *sets(SMALL), "--run-dir", str(run), "--quiet"]) == 0
    out, groups = api.plot_runs([run])
    assert out == run / "eval_return_by_team.png" and out.is_file()
    assert [g.label.rpartition(" · ")[2] for g in groups] == ["predators", "prey"]
    rows = read_metrics(run / "metrics.csv")
    evaluated = [float(r["eval_return_prey"]) for r in rows if r["eval_return_prey"]]
    np.testing.assert_allclose(groups[1].mean, evaluated, rtol=1e-6)
    out, groups = api.plot_runs([run], "eval_return")  # --metric still draws the one column
    assert out.name == "eval_return.png" and len(groups) == 1


def test_plot_reads_a_self_play_runs_old_column_names(tmp_path: Path) -> None:
    """Runs written when the pool's columns were named after its team (blue_score: red's score)."""
    pytest.importorskip("matplotlib", reason="harl plot needs matplotlib (pip install harl[plot])")
    from harl.plot import plot

    (tmp_path / "pipeline.toml").write_text(
        '[run]\nname = "sp"\nseed = 1\n[teams.red]\nagents = ["red"]\n'
        '[teams.blue]\nagents = ["blue"]\nrole = "self_play"\nof = "red"\n')
    (tmp_path / "metrics.csv").write_text(
        "iteration,env_steps,train_return,red_train_return,blue_train_return,blue_pool_size,blue_score,rating_red\n"
        "1,10,0.5,1.0,0.0,1,0.25,25.0\n2,20,0.5,2.0,-1.0,2,0.75,27.0\n")
    _, groups = plot([tmp_path], "red_score", tmp_path / "score.png")
    np.testing.assert_allclose(groups[0].mean, [0.25, 0.75])
    _, groups = plot([tmp_path], "red_pool_size", tmp_path / "pool.png")
    np.testing.assert_allclose(groups[0].mean, [1.0, 2.0])
    out, groups = plot([tmp_path], None, None)  # no evaluation of every team: each team's training return
    assert out.name == "train_return_by_team.png"
    assert [g.label.rpartition(" · ")[2] for g in groups] == ["red", "blue"]


# ------------------------------------------------------------------ refusals: --team, export, --seat


def test_eval_and_export_refuse_what_they_cannot_honour(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "tag"
    assert main(["train", str(TAG), *sets([*SMALL, "run.total_env_steps=50"]), "--run-dir", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["eval", str(run), "--team", "wolves", "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "--team 'wolves' is not a learning team of this run; write one of: predators, prey" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["eval", str(run), "--team", "prey", "--episodes", "1"]) == 0
    assert main(["eval", str(run), "--seat", "prey=prey", "--episodes", "1"]) == 2
    assert "--seat SEAT=TEAM" in capsys.readouterr().err
    # two learning teams: export needs --team (it named neither before, and exported the first)
    assert main(["export", str(run), "--format", "torchscript", "--out", str(tmp_path / "x")]) == 2
    assert "2 learning teams (predators, prey); name the one to export with --team NAME" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    spread = tmp_path / "spread"
    assert main(["train", str(ROOT / "pipelines" / "mappo_mpe_spread.toml"), *sets([
        "collector.n_envs=1", "collector.rollout_length=25", "run.total_env_steps=25", "evaluator.episodes=1",
        "evaluator.n_envs=1", "logging.progress=false", "collector.backend=inline"]), "--run-dir", str(spread),
        "--quiet"]) == 0
    assert main(["eval", str(spread), "--team", "red", "--episodes", "1"]) == 2
    assert "this run has no [teams]; evaluate it without --team" in capsys.readouterr().err


# ------------------------------------------------------------------------------ crossplay self-play


def test_crossplay_of_two_self_play_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each run's learner (red) plays the other run's learner in the pool's seat (blue): no key to set."""
    needs("openskill", "ratings need openskill (pip install harl[teams])")
    from harl import api

    path = tmp_path / "selfplay.toml"
    path.write_text((ROOT / "pipelines" / "happo_mpe_spread.toml").read_text() + SELF_PLAY)
    runs = [tmp_path / "s1", tmp_path / "s2"]
    for seed, run in enumerate(runs, 1):
        assert main(["train", str(path), *sets([*SPREAD_SIDES, f"run.seed={seed}", "run.total_env_steps=50"]),
                     "--run-dir", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["crossplay", *map(str, runs), "--episodes", "2"]) == 0
    assert "win rate of the row's team" in capsys.readouterr().out
    match = api.play(runs[0], str(runs[1]), episodes=2)
    assert match.team == "red" and match.episodes == 2 and set(match.returns) == {"red", "blue"}
    assert main(["crossplay", *map(str, runs), "--episodes", "2", "--seat", "blue=red"]) == 0
    assert main(["eval", str(runs[0]), "--against", str(runs[1]), "--episodes", "2", "--seat", "blue=red"]) == 0
    capsys.readouterr()
    assert main(["eval", str(runs[0]), "--against", str(runs[1]), "--seat", "blue=green"]) == 2
    assert "has no learning team 'green'; write one of: red" in capsys.readouterr().err
    assert main(["eval", str(runs[0]), "--against", str(runs[1]), "--seat", "red=red"]) == 2
    assert "'red' is not a seat the opponent plays" in capsys.readouterr().err
    assert main(["eval", str(runs[0]), "--against", "pool", "--seat", "blue=red"]) == 2
    assert main(["eval", str(runs[0]), "--against", str(runs[1]), "--seat", "blue"]) == 2
    assert "expected SEAT=TEAM" in capsys.readouterr().err


def test_a_seat_with_several_candidates_asks_for_seat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A two-team tag run against a self-play run of other names: nothing to choose by, so --seat decides."""
    from harl.config.loading import load_spec_and_notes
    from harl.run.against import seat_sources

    tag = tmp_path / "tag"
    assert main(["train", str(TAG), *sets([*SMALL, "run.total_env_steps=50"]), "--run-dir", str(tag), "--quiet"]) == 0
    other = tmp_path / "other"
    other.mkdir()
    text = TAG.read_text().replace("[teams.predators]", "[teams.hunters]").replace("[teams.prey]", "[teams.runners]")
    text = text.replace("[teams.prey.", "[teams.runners.")
    (other / "pipeline.toml").write_text(text)
    spec, _ = load_spec_and_notes(tag / "pipeline.toml")
    with pytest.raises(HarlError, match=r"it has no learning team 'prey' to play seat 'prey' and several that "
                                        r"could \(hunters, runners\); choose one with --seat prey=TEAM"):
        seat_sources(spec, "predators", other, {})
    assert seat_sources(spec, "predators", other, {"prey": "runners"}) == {"prey": "runners"}
    assert seat_sources(spec, "predators", tag, {}) == {"prey": "prey"}


# ---------------------------------------------------------------------- the commands the docs name


def named_commands() -> list[str]:
    """Every ``harl stages ...`` the teams docs, config and messages tell the user to run."""
    files = [ROOT / "docs" / "teams.md", ROOT / "harl" / "config" / "teams.py", ROOT / "harl" / "run" / "against.py",
             *sorted((ROOT / "harl" / "teams").rglob("*.py"))]
    found = {m.group(1) for f in files for m in re.finditer(r"harl stages ([A-Za-z_.]+)", f.read_text())}
    return sorted(found)


def test_the_docs_name_the_stage_commands_that_exist() -> None:
    assert {"script", "teams"} <= set(named_commands())


@pytest.mark.parametrize("slot", named_commands())
def test_every_stages_command_the_docs_and_messages_name_runs(slot: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stages", slot]) == 0
    out = capsys.readouterr().out
    assert out.strip()
    assert "Kind = " not in out  # a script's kind was shown twice: Kind = "random": Kind = "random": ...
    for line in out.splitlines():
        assert line.count('kind = "') <= 1, line


def test_a_bad_script_kind_names_a_command_that_lists_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "tag"
    assert main(["train", str(TAG), *sets([*SMALL, "run.total_env_steps=50"]), "--run-dir", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["eval", str(run), "--against", "scripted:greedy"]) == 2
    err = capsys.readouterr().err
    command = re.search(r"(harl stages \w+) lists them", err)
    assert command is not None and '"random"' not in err and "random, noop" in err
    assert main(command.group(1).split()[1:]) == 0
    assert 'kind = "random"' in capsys.readouterr().out
