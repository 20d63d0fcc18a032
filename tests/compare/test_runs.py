"""harl.compare.runs: algorithm and task from each run's pipeline.toml, labels, mixed groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from harl.compare.runs import algorithm_of, load_runs, task_of
from harl.errors import HarlError
from tests.compare.synthetic import make_run, two_algorithms


class TestNames:
    @pytest.mark.parametrize(("updater", "objective", "name"), [
        ("sequential", "ppo", "HAPPO"), ("simultaneous", "ppo", "MAPPO"), ("sequential", "sac", "HASAC"),
        ("simultaneous", "td3", "MATD3"), ("simultaneous", "sac", "MASAC"), ("simultaneous", "a2c", "MAA2C"),
        ("sequential", "joint_td", "joint_td/sequential")])
    def test_algorithm(self, updater: str, objective: str, name: str) -> None:
        """The README's table names the (updater, objective) pair; an unnamed pair reads objective/updater."""
        assert algorithm_of({"updater": {"kind": updater, "objective": {"kind": objective}}}) == name

    @pytest.mark.parametrize(("critic", "objective", "name"), [
        ("independent_v", "ppo", "IPPO"), ("independent_v", "a2c", "IA2C"), ("independent_q", "sac", "ISAC"),
        ("independent_q", "ddpg", "IDDPG"), ("independent_q", "td3", "ITD3"), ("v", "ppo", "MAPPO")])
    def test_independent_critics(self, critic: str, objective: str, name: str) -> None:
        """A simultaneous update over independent critics is the I- algorithm, not its MA- twin."""
        pipeline = {"critic": {"kind": critic}, "updater": {"kind": "simultaneous", "objective": {"kind": objective}}}
        assert algorithm_of(pipeline) == name

    @pytest.mark.parametrize(("env", "expected"), [
        ({"kind": "mpe", "scenario": "simple_spread"}, ("mpe", "simple_spread")),
        ({"kind": "mpe", "scenario": "simple_spread", "continuous_actions": False},
         ("mpe", "simple_spread-discrete")),
        ({"kind": "mamujoco", "scenario": "HalfCheetah", "agent_conf": "2x3"}, ("mamujoco", "HalfCheetah-2x3")),
        ({"kind": "pettingzoo", "env": "pettingzoo.sisl.multiwalker_v9"}, ("pettingzoo", "multiwalker_v9")),
        ({"kind": "air_combat", "task": "heading"}, ("air_combat", "heading")),
        ({"kind": "counting"}, ("counting", "counting"))])
    def test_task(self, env: dict, expected: tuple[str, str]) -> None:
        """The task joins the [env] keys that name one; discrete actions make another task."""
        assert task_of({"env": env}) == expected


class TestLoad:
    def test_grouping_from_pipeline(self, tmp_path: Path) -> None:
        """Runs of a sweep are sorted by algorithm and seed, named from their pipelines, not their folders."""
        records, notes = load_runs([two_algorithms(tmp_path, seeds=2)])
        assert [(r.algorithm, r.env, r.task, r.seed) for r in records] == [
            ("HAPPO", "mpe", "simple_spread", 1), ("HAPPO", "mpe", "simple_spread", 2),
            ("MAPPO", "mpe", "simple_spread", 1), ("MAPPO", "mpe", "simple_spread", 2)]
        assert notes == []

    def test_final_is_the_last_evaluation(self, tmp_path: Path) -> None:
        """The final score is the last eval_return row, not the last row."""
        run = make_run(tmp_path, "sequential", "ppo", 1, [1.0, 2.0, 3.0, 4.5])
        (record,), _ = load_runs([run])
        assert record.final == 4.5
        assert record.evaluations[-1].env_steps == 4000
        assert record.score("absolute") is None

    def test_label_and_split_by(self, tmp_path: Path) -> None:
        """--label renames the runs under a folder; --split-by adds a key's value to the name."""
        a = make_run(tmp_path / "a", "sequential", "ppo", 1, [1.0])
        make_run(tmp_path / "b", "sequential", "ppo", 1, [1.0], extra={"updater": {"order": "fixed"}})
        records, _ = load_runs([tmp_path], labels={str(a.parent): "ablation"}, split_by=["updater.order"])
        assert sorted(r.algorithm for r in records) == ["HAPPO (updater.order=fixed)", "ablation"]

    def test_mixed_group_is_noted(self, tmp_path: Path) -> None:
        """Runs of one algorithm and task whose pipelines differ in a setting get a note naming it."""
        make_run(tmp_path, "sequential", "ppo", 1, [1.0])
        make_run(tmp_path, "sequential", "ppo", 2, [1.0], extra={"run": {"total_env_steps": 5}})
        _, notes = load_runs([tmp_path])
        assert notes == ["HAPPO on mpe/simple_spread: its 2 runs differ in run.total_env_steps; pass "
                         "--split-by run.total_env_steps to compare them as separate algorithms"]

    def test_unevaluated_run_left_out(self, tmp_path: Path) -> None:
        """A run without an evaluation row is left out with a note; none at all is an error."""
        make_run(tmp_path, "sequential", "ppo", 1, [1.0])
        empty = make_run(tmp_path, "sequential", "ppo", 2, [])
        records, notes = load_runs([tmp_path])
        assert len(records) == 1
        assert notes == [f"{empty}: no evaluation row in metrics.csv yet, left out"]
        with pytest.raises(HarlError, match="no run has an evaluation"):
            load_runs([empty])
