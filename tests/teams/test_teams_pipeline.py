"""Teams in a pipeline: loading, refusals, the one loop over two learning teams, players, exact resume.

The world is MPE simple_tag (3 predators ``adversary_*`` against 1 prey ``agent_0``), small.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harl.cli import main
from harl.compose import build_stages
from harl.config.loading import load_spec_and_notes
from harl.errors import ConfigError, HarlError
from harl.logging.csv_log import read_metrics
from harl.teams.players import outcome_of
from harl.teams.world import TeamAgents, TeamWorld, resolve_teams

pytest.importorskip("mpe2", reason="these runs use MPE (pip install harl[mpe])")

ROOT = Path(__file__).parents[2]
TAG = ROOT / "pipelines" / "happo-vs-mappo_mpe_tag.toml"
WALL_CLOCK = ("wall_time", "steps_per_s")
SMALL = ["collector.n_envs=2", "collector.rollout_length=25", "run.total_env_steps=150", "evaluator.episodes=2",
         "evaluator.n_envs=2", "evaluator.every_iterations=2", "policy.hidden_sizes=[16]", "critic.hidden_sizes=[16]",
         "updater.objective.epochs=1", "critic.epochs=1", "checkpoint.every_iterations=1", "checkpoint.keep=100",
         "logging.progress=false"]


def sets(values: list[str]) -> list[str]:
    return [arg for value in values for arg in ("--set", value)]


def write(tmp_path: Path, teams: str) -> Path:
    """The tag pipeline with its [teams] tables replaced by ``teams``."""
    text = TAG.read_text(encoding="utf-8")
    head = text[:text.index("[teams.predators]")]
    tail = text[text.index("[evaluator]"):]
    path = tmp_path / "pipeline.toml"
    path.write_text(head + teams + "\n" + tail, encoding="utf-8")
    return path


def test_the_shipped_pipeline_loads_its_teams() -> None:
    spec, _ = load_spec_and_notes(TAG)
    assert [t.name for t in spec.teams] == ["predators", "prey"]
    predators, prey = spec.teams
    assert predators.spec.updater.kind == "sequential"
    assert prey.spec.updater.kind == "simultaneous"  # its own [teams.prey.updater] in the pipeline's place
    assert prey.spec.critic == spec.critic  # the pipeline's table where the team has none


def test_one_team_pipelines_have_no_teams() -> None:
    spec, _ = load_spec_and_notes(ROOT / "pipelines" / "happo_mpe_spread.toml")
    assert spec.teams == ()


@pytest.mark.parametrize(("teams", "message"), [
    ('[teams.a]\nagents = ["agent_*"]\nrole = "frozen"\n', r"teams: no team learns"),
    ('[teams.a]\nagents = ["adversary"]\n[teams.b]\nagents = ["agent_*"]\nrole = "self_play"\nof = "c"\n',
     r"teams\.b\.of: 'c' is not a learning team of this pipeline; write one of: a"),
    ('[teams.a]\nagents = ["adversary"]\n[teams.b]\nagents = ["agent_*"]\nrole = "scripted"\n',
     r"teams\.b\.script: a scripted team needs its script"),
    ('[teams.a]\nagents = ["adversary"]\n[teams.b]\nagents = ["agent_*"]\nrole = "frozen"\n',
     r"teams\.b\.checkpoint: a frozen team plays a trained run"),
    ('[teams.a]\nagents = ["adversary"]\n[teams.b]\nagents = ["agent_*"]\nrole = "self_play"\nof = "a"\npool_size = 0\n',
     r"teams\.b\.pool_size"),
    ('[teams.a]\nagents = ["adversary"]\n[teams.a.critic]\nlr = -1.0\n[teams.b]\nagents = ["agent_*"]\n',
     r"teams\.a\.critic\.lr"),
    ('[teams.a]\nagents = ["adversary"]\n[teams.b]\nagents = ["agent_*"]\nrole = "scripted"\n'
     '[teams.b.script]\nkind = "random"\n[teams.b.critic]\nlr = 1e-3\n',
     r"teams\.b\.critic: a scripted team has no stages of its own"),
])
def test_bad_teams_are_refused_with_the_key(tmp_path: Path, teams: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_spec_and_notes(write(tmp_path, teams))


def test_agents_claimed_twice_or_by_none() -> None:
    names = ["adversary_0", "adversary_1", "agent_0"]
    groups = {"adversary": ["adversary_0", "adversary_1"], "agent": ["agent_0"]}
    with pytest.raises(ConfigError, match=r"teams\.b\.agents: adversary_1 is already in team 'a'"):
        resolve_teams([("a", ["adversary"], "sum"), ("b", ["*_1", "agent_0"], "sum")], names, groups)
    with pytest.raises(ConfigError, match=r"teams: agent_0 in no team"):
        resolve_teams([("a", ["adversary_*"], "sum")], names, groups)
    with pytest.raises(ConfigError, match=r"teams\.a\.agents: 'predator\*' names no agent"):
        resolve_teams([("a", ["predator*"], "sum"), ("b", ["*"], "sum")], names, groups)
    teams = resolve_teams([("a", ["adversary"], "sum"), ("b", ["agent_0"], "own")], names, groups)
    assert teams == [TeamAgents("a", (0, 1), "sum"), TeamAgents("b", (2,), "own")]


def test_off_policy_teams_load_and_a_team_s_collector_must_step_the_world_s_steps(tmp_path: Path) -> None:
    """Learning teams of the off-policy family load (they were refused before issue 55); a team's own
    [collector] must take the other learning teams' n_envs and steps per iteration: one world."""
    path = tmp_path / "hasac.toml"
    path.write_text((ROOT / "pipelines" / "hasac_mpe_spread.toml").read_text()
                    + '\n[teams.a]\nagents = ["agent_0"]\n[teams.b]\nagents = ["agent_1", "agent_2"]\n')
    spec = load_spec_and_notes(path)[0]
    assert [t.name for t in spec.learning_teams] == ["a", "b"]
    path.write_text(path.read_text() + '[teams.b.collector]\nkind = "off_policy"\nrollout_length = 7\n')
    with pytest.raises(ConfigError, match=r"teams\.b\.collector\.rollout_length: 7 where team a's collector has 50"):
        load_spec_and_notes(path)


def test_the_compiled_collection_step_is_refused_for_teams(tmp_path: Path) -> None:
    """The torch MPE pipeline ships collector.compile = "auto"; with [teams] it must be "off"."""
    path = tmp_path / "torch.toml"
    path.write_text((ROOT / "pipelines" / "happo_mpe_torch_spread.toml").read_text()
                    + '\n[teams.a]\nagents = ["agent_0"]\n[teams.b]\nagents = ["agent_1", "agent_2"]\n')
    with pytest.raises(ConfigError, match=r"teams\.a\.collector\.compile: the compiled collection step"):
        load_spec_and_notes(path)
    assert load_spec_and_notes(path, ["collector.compile=off"])[0].teams


def test_each_team_gets_its_team_reward_and_its_own_return() -> None:
    spec, _ = load_spec_and_notes(TAG, [s for s in SMALL])
    with build_stages(spec) as stages:
        collected = stages.collector.collect(stages.buffer)
        buffers = stages.buffer.members
        predators, prey = buffers["predators"], buffers["prey"]
        assert predators.n_agents == 3 and prey.n_agents == 1
        teams = stages.teams  # the Python API: each team's own stages by name
        assert set(teams) == {"predators", "prey"} and teams["prey"].buffer is prey
        assert teams["predators"].agents == (0, 1, 2) and teams["predators"].updater is not None
        r = predators.rewards  # (T, E, 3): every predator gets the team's sum
        assert torch.equal(r[..., 0], r[..., 1]) and torch.equal(r[..., 0], r[..., 2])
        row = collected.row()
        assert set(row) == {"predators_train_return", "prey_train_return"}
        ended = collected.episodes
        assert ended and all({"return_predators", "return_prey"} <= set(e) for e in ended)
        # predators score +10 per capture each (mpe2), the team's sum; the prey loses 10 per capture at least
        for e in ended:
            assert e["return_predators"] == pytest.approx(30.0 * e["captures"])
            assert e["return_prey"] <= -10.0 * e["captures"] + 1e-4


def test_two_learning_teams_train_and_resume_exactly(tmp_path: Path) -> None:
    """A stop after 3 of 6 iterations and a resume write what one run of 6 writes."""
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(["train", str(TAG), *sets(SMALL), "--run-dir", str(whole), "--quiet"]) == 0
    assert main(["train", str(TAG), *sets([*SMALL, "run.total_env_steps=75"]), "--run-dir", str(part), "--quiet"]) == 0
    assert main(["train", "--resume", str(part), "--set", "run.total_env_steps=150", "--quiet"]) == 0
    a = [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in read_metrics(whole / "metrics.csv")]
    b = [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in read_metrics(part / "metrics.csv")]
    assert len(a) == 3 and a == b
    assert {"predators_train_return", "prey_train_return", "eval_return_predators", "eval_return_prey",
            "predators_value_loss", "prey_agent0_policy_loss"} <= set(a[0])


def test_self_play_pool_is_in_the_checkpoint_and_resumes_exactly(tmp_path: Path) -> None:
    """Predators learn against snapshots of themselves playing ... the prey side cannot: spaces differ."""
    path = write(tmp_path, '[teams.a]\nagents = ["adversary"]\n[teams.b]\nagents = ["agent_*"]\n'
                 'role = "self_play"\nof = "a"\n')
    with pytest.raises(ConfigError, match=r"teams\.b\.of: self-play needs both sides alike"):
        spec, _ = load_spec_and_notes(path, SMALL)
        build_stages(spec).close()


def test_a_scripted_and_a_frozen_opponent(tmp_path: Path) -> None:
    """Predators learn against a random prey; then a new run's prey learns against those frozen predators."""
    first = tmp_path / "first"
    scripted = write(tmp_path, '[teams.predators]\nagents = ["adversary"]\n[teams.prey]\nagents = ["agent_*"]\n'
                     'role = "scripted"\n[teams.prey.script]\nkind = "random"\n')
    assert main(["train", str(scripted), *sets(SMALL), "--run-dir", str(first), "--quiet"]) == 0
    rows = read_metrics(first / "metrics.csv")
    assert "predators_value_loss" in rows[0] and not any(k.startswith("prey_value") for k in rows[0])
    frozen_path = tmp_path / "frozen.toml"
    frozen_path.write_text(scripted.read_text().replace(
        '[teams.predators]\nagents = ["adversary"]\n[teams.prey]\nagents = ["agent_*"]\nrole = "scripted"\n'
        '[teams.prey.script]\nkind = "random"\n',
        f'[teams.predators]\nagents = ["adversary"]\nrole = "frozen"\ncheckpoint = "{first}"\n'
        '[teams.prey]\nagents = ["agent_*"]\n'))
    second = tmp_path / "second"
    assert main(["train", str(frozen_path), *sets(SMALL), "--run-dir", str(second), "--quiet"]) == 0
    spec, _ = load_spec_and_notes(frozen_path, SMALL)
    with build_stages(spec) as stages:  # the frozen predators are the first run's, weight for weight
        from harl.rundir.checkpoint import latest_checkpoint, load_checkpoint
        saved = load_checkpoint(latest_checkpoint(first))["policy"]
        mine = stages.policy.members["predators"].policy.state_dict()
        assert all(torch.equal(v, saved[f"members.predators.{k}"]) for k, v in mine.items())


def test_a_frozen_run_that_does_not_exist_or_does_not_fit(tmp_path: Path) -> None:
    path = write(tmp_path, '[teams.predators]\nagents = ["adversary"]\nrole = "frozen"\n'
                 f'checkpoint = "{tmp_path / "nope"}"\n[teams.prey]\nagents = ["agent_*"]\n')
    spec, _ = load_spec_and_notes(path, SMALL)
    with pytest.raises(ConfigError, match=r"teams\.predators\.checkpoint: '.*nope' does not exist"):
        build_stages(spec).close()
    (tmp_path / "empty").mkdir()
    spec, _ = load_spec_and_notes(path, [*SMALL, f"teams.predators.checkpoint={tmp_path / 'empty'}"])
    with pytest.raises(ConfigError, match=r"teams\.predators\.checkpoint: .*empty' is not a run directory"):
        build_stages(spec).close()
    spread = tmp_path / "spread"  # a run whose agents' spaces are not the predators'
    assert main(["train", str(ROOT / "pipelines" / "mappo_mpe_spread.toml"), *sets([
        "collector.n_envs=2", "collector.rollout_length=25", "run.total_env_steps=50", "evaluator.episodes=1",
        "evaluator.n_envs=1", "logging.progress=false", "collector.backend=inline"]), "--run-dir", str(spread),
        "--quiet"]) == 0
    spec, _ = load_spec_and_notes(path, [*SMALL, f"teams.predators.checkpoint={spread}"])
    with pytest.raises(ConfigError, match=r"teams\.predators\.checkpoint: the policy of .* does not fit predators"):
        build_stages(spec).close()


def test_outcome_rules() -> None:
    """The env's winner (a team or a group) first, else the highest return; a tie is a draw."""
    class World:
        n_envs, n_agents = 1, 3
        agent_names = ["ally_0", "ally_1", "enemy_0"]
        agent_groups = {"ally": ["ally_0", "ally_1"], "enemy": ["enemy_0"]}

    world = TeamWorld(World(), [TeamAgents("a", (0, 1)), TeamAgents("b", (2,))])  # type: ignore[arg-type]
    tie = {"a": 1.0, "b": 1.0}
    assert world.outcome({"winner": "ally"}, tie) == {"win_a": 1.0, "win_b": 0.0, "draw": 0.0}
    assert world.outcome({"winner": "b"}, tie) == {"win_a": 0.0, "win_b": 1.0, "draw": 0.0}
    assert world.outcome({"winner": ""}, {"a": 5.0, "b": 1.0}) == {"win_a": 0.0, "win_b": 0.0, "draw": 1.0}
    assert world.outcome({}, {"a": 2.0, "b": 1.0}) == {"win_a": 1.0, "win_b": 0.0, "draw": 0.0}
    assert world.outcome({}, tie) == {"win_a": 0.0, "win_b": 0.0, "draw": 1.0}
    # predator-prey (MPE's captures): the predators win with a capture, the prey without; never by the returns
    class Tag:
        n_envs, n_agents = 1, 3
        agent_names = ["adversary_0", "adversary_1", "agent_0"]
        agent_groups = {"adversary": ["adversary_0", "adversary_1"], "agent": ["agent_0"]}

    tag = TeamWorld(Tag(), [TeamAgents("predators", (0, 1)), TeamAgents("prey", (2,))])  # type: ignore[arg-type]
    scores = {"predators": 0.0, "prey": -3.0}  # the prey never out-scores them: it wins on no capture
    assert tag.outcome({"captures": 0.0}, scores) == {"win_predators": 0.0, "win_prey": 1.0, "draw": 0.0}
    assert tag.outcome({"captures": 2.0}, {"predators": 40.0, "prey": -20.0}) == \
        {"win_predators": 1.0, "win_prey": 0.0, "draw": 0.0}
    split = TeamWorld(Tag(), [TeamAgents("a", (0, 2)), TeamAgents("b", (1,))])  # type: ignore[arg-type]
    assert split.outcome({"captures": 0.0}, {"a": 1.0, "b": 2.0})["win_b"] == 1.0  # no team is the prey: returns
    assert outcome_of({"win_a": 1.0, "win_b": 0.0, "draw": 0.0}, "a") == 1.0
    assert outcome_of({"win_a": 0.0, "win_b": 0.0, "draw": 1.0}, "a") == 0.5
    assert outcome_of({"win_a": 0.0, "win_b": 1.0, "draw": 0.0}, "a") == 0.0


def test_self_play_pool_and_ratings_resume_exactly(tmp_path: Path) -> None:
    """Two sides alike (MPE spread with 4 agents, 2 a side): snapshots of ``red`` play ``blue``; the
    pool (snapshot every iteration, 2 kept, pfsp) and the ratings are in the checkpoint, so a
    stopped and resumed run writes what one uninterrupted run writes."""
    pytest.importorskip("openskill", reason="ratings need openskill (pip install harl[teams])")
    path = tmp_path / "selfplay.toml"
    path.write_text((ROOT / "pipelines" / "happo_mpe_spread.toml").read_text()
                    + '\n[teams.red]\nagents = ["agent_0", "agent_1"]\n[teams.blue]\nagents = ["agent_2", "agent_3"]\n'
                    'role = "self_play"\nof = "red"\nsnapshot_every_iterations = 1\npool_size = 2\nsample = "pfsp"\n')
    small = [*SMALL, "env.n_agents=4", "env.team_reward=false", "collector.backend=inline"]
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(["train", str(path), *sets(small), "--run-dir", str(whole), "--quiet"]) == 0
    assert main(["train", str(path), *sets([*small, "run.total_env_steps=75"]), "--run-dir", str(part), "--quiet"]) == 0
    assert main(["train", "--resume", str(part), "--set", "run.total_env_steps=150", "--quiet"]) == 0
    a = [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in read_metrics(whole / "metrics.csv")]
    b = [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in read_metrics(part / "metrics.csv")]
    assert len(a) == 3 and a == b
    assert [r["red_pool_size"] for r in a] == ["2", "2", "2"]  # the first snapshot at build, one per iteration
    assert "rating_red" in a[0] and float(a[-1]["rating_red_sigma"]) < float(a[0]["rating_red_sigma"])
    assert "red_score" in a[0] and not {"blue_pool_size", "blue_score"} & set(a[0])  # the learner's columns
    from harl.rundir.checkpoint import latest_checkpoint, load_checkpoint
    players = load_checkpoint(latest_checkpoint(whole))["updater"]["ratings"]["blue"]["players"]
    newest = players["red@3"]  # taken after the last update: no game against it yet
    assert newest["games"] == 0  # and it starts where the learner stood when it was taken
    assert (newest["mu"], newest["sigma"]) == (players["red"]["mu"], players["red"]["sigma"])
    assert newest["mu"] == pytest.approx(float(a[-1]["rating_red"]), rel=1e-5)  # metrics.csv: 6 digits


def test_a_pools_games_leave_with_collection_and_its_snapshots_with_the_updater(tmp_path: Path) -> None:
    """Collection reports what it found out (the learner's games and rating: ``TeamsCollected.row``);
    the updater writes the snapshots and reports the pool's size; the teams' buffer takes one record
    of every learning team's per step, as any buffer takes its records."""
    pytest.importorskip("openskill", reason="ratings need openskill (pip install harl[teams])")
    from harl.teams.stages import TeamsBuffer, TeamsRecord

    path = tmp_path / "selfplay.toml"
    path.write_text((ROOT / "pipelines" / "happo_mpe_spread.toml").read_text()
                    + '\n[teams.red]\nagents = ["agent_0", "agent_1"]\n[teams.blue]\nagents = ["agent_2", "agent_3"]\n'
                    'role = "self_play"\nof = "red"\nsnapshot_every_iterations = 1\npool_size = 2\n')
    spec, _ = load_spec_and_notes(path, [*SMALL, "env.n_agents=4", "env.team_reward=false", "collector.backend=inline"])
    with build_stages(spec) as stages:
        pool = stages.updater.self_play[0].player.pool  # type: ignore[attr-defined]
        assert len(pool) == 1  # the updater's first snapshot: the learner as it starts
        collected = stages.collector.collect(stages.buffer)
        assert {"red_score", "rating_red", "rating_red_sigma"} <= set(collected.row())
        assert "red_pool_size" not in collected.row() and len(pool) == 1
        stages.returns.compute(stages.buffer)
        update = stages.updater.update(stages.buffer, 0.0)
        assert update.row()["red_pool_size"] == 2 == len(pool)
        assert not {"red_score", "rating_red"} & set(update.row())

    class Fake:
        def __init__(self) -> None:
            self.got: list[object] = []

        def insert(self, record: object) -> None:
            self.got.append(record)

    a, b = Fake(), Fake()
    TeamsBuffer({"a": a, "b": b}).insert(TeamsRecord({"a": 1, "b": 2}))
    assert (a.got, b.got) == ([1], [2])


def test_a_users_role_is_one_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A role is a registered kind: a user's, named "module:Name", reads its keys from the team's table,
    is checked when the pipeline loads, plays through its player and shows in harl check."""
    role = 'role = "tests.teams.user_role:StubbornRole"'
    path = write(tmp_path, f'[teams.predators]\nagents = ["adversary"]\n[teams.prey]\nagents = ["agent_*"]\n{role}\n'
                           "action = 2\n")
    spec, _ = load_spec_and_notes(path, SMALL)
    assert [t.name for t in spec.learning_teams] == ["predators"] and spec.teams[1].config.role.action == 2
    with build_stages(spec) as stages:
        stages.collector.collect(stages.buffer)
        assert stages.teams["prey"].role == "tests.teams.user_role:StubbornRole"
        rows = {row[0]: row for row in stages.describe()}
        assert rows["team prey"][2] == "agent_0; always action 2; reward sum"
        assert rows["team predators"][1] == "learning" and "HAPPO (sequential, ppo)" in rows["team predators"][2]
    bad = write(tmp_path, f'[teams.predators]\nagents = ["adversary"]\n[teams.prey]\nagents = ["agent_*"]\n{role}\n'
                          "action = -1\nof = \"predators\"\n")
    with pytest.raises(ConfigError) as err:
        load_spec_and_notes(bad)
    assert 'teams.prey.of: unknown key for role = "tests.teams.user_role:StubbornRole"' in str(err.value)
    with pytest.raises(ConfigError, match=r"teams\.prey\.action: a category index is >= 0"):
        load_spec_and_notes(write(tmp_path, f'[teams.predators]\nagents = ["adversary"]\n[teams.prey]\n'
                                            f'agents = ["agent_*"]\n{role}\naction = -1\n'))


def test_wilson_and_normal_intervals_by_hand() -> None:
    from harl.run.against import normal, wilson

    five_of_ten = wilson(5, 10)  # the textbook Wilson 95% interval of 5/10: [0.2366, 0.7634]
    assert (five_of_ten.low, five_of_ten.high) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    none = wilson(0, 20)  # never 0 wide at the edge: [0, 0.1611]
    assert none.low == 0.0 and none.high == pytest.approx(0.1611, abs=1e-4)
    x = normal([1.0, 2.0, 3.0, 4.0])  # mean 2.5, sd 1.2910, half-width 1.96 * 1.2910 / 2 = 1.2652
    assert (x.mean, x.low, x.high) == (2.5, pytest.approx(1.2348, abs=1e-4), pytest.approx(3.7652, abs=1e-4))


def test_eval_against_a_script_a_run_and_crossplay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harl import api

    runs = [tmp_path / "s1", tmp_path / "s2"]
    for seed, run in enumerate(runs, 1):
        assert main(["train", str(TAG), *sets([*SMALL, f"run.seed={seed}", "run.total_env_steps=50"]),
                     "--run-dir", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["eval", str(runs[0]), "--against", "scripted:noop", "--team", "predators", "--episodes", "4"]) == 0
    out = capsys.readouterr().out
    assert "(predators) against scripted:noop: 4 episodes; win" in out and "return of prey" in out
    assert "captures" in out
    match = api.play(runs[0], str(runs[1]), episodes=4, team="prey")
    assert match.episodes == 4 and match.team == "prey"
    assert 0.0 <= match.win.low <= match.win.mean <= match.win.high <= 1.0
    assert match.win.mean + match.loss.mean + match.draw.mean == pytest.approx(1.0)
    table = api.crossplay(runs, episodes=2, team="predators")
    assert [[m.opponent for m in row] for row in table] == [[str(r) for r in runs]] * 2
    with pytest.raises(HarlError, match=r"--against pool: team 'prey' plays no pool"):
        api.play(runs[0], "pool", episodes=2, team="predators")
    spread = ROOT / "pipelines" / "mappo_mpe_spread.toml"
    assert main(["eval", str(runs[0]), "--against", "scripted:nope"]) == 2
    del spread


@pytest.mark.parametrize(("sets_", "message"), [
    (["evaluator.team=nobody"], r"evaluator\.team: 'nobody' is not a learning team of \[teams\]; write one of: "
                                r"predators, prey"),
    (["evaluator.team=prey", 'evaluator.env={nope = 1}'], r"evaluator\.env\.nope: not a key of \[env\] kind = \"mpe\""),
    (["evaluator.team=prey"], r"evaluator\.team: the evaluation envs' agents \(adversary_0, adversary_1, "
                              r"adversary_2, agent_0\) are not team prey's \(agent_0\)"),
])
def test_evaluating_one_team_alone_is_checked(sets_: list[str], message: str) -> None:
    spec, _ = load_spec_and_notes(TAG, [*SMALL, *sets_])
    with pytest.raises(ConfigError, match=message):
        build_stages(spec).close()


def test_export_one_team_and_load_it(tmp_path: Path) -> None:
    """harl export --team: the team's actors only, which harl.load_policy runs."""
    import harl

    run = tmp_path / "run"
    assert main(["train", str(TAG), *sets([*SMALL, "run.total_env_steps=50"]), "--run-dir", str(run), "--quiet"]) == 0
    assert main(["export", str(run), "--format", "torchscript", "--out", str(tmp_path / "prey"), "--team", "prey"]) == 0
    policy = harl.load_policy(tmp_path / "prey")
    hidden = policy.initial_hidden(2)
    actions, _ = policy.act([torch.zeros(2, 14).numpy()], None, True, hidden, None)
    assert len(actions) == 1  # the prey's one agent
    assert main(["export", str(run), "--format", "torchscript", "--out", str(tmp_path / "x"), "--team", "nope"]) == 2


def test_vectorize_refuses_teams_and_seeds_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", str(TAG), *sets(SMALL), "--seeds", "1,2", "--vectorize", "--run-dir",
                 str(tmp_path / "pop")]) == 2
    assert "[teams] (predators, prey: a population batches one team's networks" in capsys.readouterr().err
    assert not (tmp_path / "pop").exists()
    assert main(["train", str(TAG), *sets([*SMALL, "run.total_env_steps=50"]), "--seeds", "1,2", "--run-dir",
                 str(tmp_path / "sweep"), "--quiet"]) == 0
    assert len(list((tmp_path / "sweep").glob("*/metrics.csv"))) == 2


def test_a_snapshot_evicted_mid_episode_plays_its_episode_out(tmp_path: Path) -> None:
    """Pool of 1, a snapshot every iteration, rollouts of 10 steps in episodes of 25: the snapshot an
    episode began with leaves the pool while the episode runs, and still plays it to its end."""
    pytest.importorskip("openskill", reason="ratings need openskill (pip install harl[teams])")
    path = tmp_path / "selfplay.toml"
    path.write_text((ROOT / "pipelines" / "happo_mpe_spread.toml").read_text()
                    + '\n[teams.red]\nagents = ["agent_0", "agent_1"]\n[teams.blue]\nagents = ["agent_2", "agent_3"]\n'
                    'role = "self_play"\nof = "red"\nsnapshot_every_iterations = 1\npool_size = 1\n')
    small = [*SMALL, "env.n_agents=4", "env.team_reward=false", "collector.backend=inline",
             "collector.rollout_length=10", "run.total_env_steps=100"]
    assert main(["train", str(path), *sets(small), "--run-dir", str(tmp_path / "run"), "--quiet"]) == 0
    assert len(read_metrics(tmp_path / "run" / "metrics.csv")) == 5


def test_a_pettingzoo_parallel_game_in_teams(tmp_path: Path) -> None:
    """Any PettingZoo parallel env whose agents fall into teams (its names' prefixes are its groups):
    mpe2's simple_adversary through the generic adapter, the adversary against the good agents."""
    pytest.importorskip("pettingzoo", reason="the PettingZoo adapter (pip install harl[pettingzoo])")
    text = TAG.read_text(encoding="utf-8")
    head, tail = text[:text.index("[env]")], text[text.index("[collector]"):text.index("[teams.predators]")]
    path = tmp_path / "pz.toml"
    path.write_text(head + '[env]\nkind = "pettingzoo"\nenv = "mpe2.simple_adversary_v3"\n'
                    '[env.kwargs]\nmax_cycles = 25\n\n' + tail
                    + '[teams.adversary]\nagents = ["adversary"]\n[teams.good]\nagents = ["agent"]\n'
                    + text[text.index("[evaluator]"):], encoding="utf-8")
    assert main(["train", str(path), *sets([*SMALL, "run.total_env_steps=50"]), "--run-dir", str(tmp_path / "run"),
                 "--quiet"]) == 0
    row = read_metrics(tmp_path / "run" / "metrics.csv")[0]
    assert {"adversary_train_return", "good_train_return", "adversary_value_loss", "good_value_loss"} <= set(row)
