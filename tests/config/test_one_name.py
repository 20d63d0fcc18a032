"""One name per concept (issue 55): every renamed key of an older harl still loads, with exactly one
``HarlDeprecationWarning`` naming the new key; the shipped pipelines, the suites' overrides and
``harl convert`` speak only the new names."""

from __future__ import annotations

import re
import warnings
from functools import reduce
from pathlib import Path
from typing import Any

import pytest
import tomllib

from harl.config import renames
from harl.config.dump import dump_pipeline
from harl.config.loading import load_spec_and_notes, read_toml, structure_pipeline
from harl.errors import REMOVED_IN, ConfigError, HarlDeprecationWarning

ROOT = Path(__file__).parents[2]

RENAMES = [  # pipeline, old table, old key, a value, new table, new key
    ("qmix_smax_3m.toml", "updater.objective", "grad_norm_clip", 5.0, "updater.objective", "max_grad_norm"),
    ("hatrpo_mpe_spread.toml", "updater.objective", "backtrack_coeff", 0.7, "updater.objective", "backtrack_coef"),
    ("qmix_mpe_spread_discrete.toml", "updater", "timing", "per_iteration", "updater", "update_timing"),
    ("qmix_smax_3m.toml", "updater.objective", "standardise_rewards", False, "returns", "reward_norm"),
    ("ippo_lbf.toml", "returns", "standardise_rewards", False, "returns", "reward_norm"),
    ("qmix_smax_3m.toml", "env", "normalise_state", False, "env", "state_norm"),
    ("happo_mpe_spread.toml", "env", "max_cycles", 30, "env", "max_episode_steps"),
    ("happo_mpe_torch_spread.toml", "env", "max_cycles", 30, "env", "max_episode_steps"),
    ("happo_smax_3m.toml", "env", "max_steps", 30, "env", "max_episode_steps"),
    ("happo_vmas_transport.toml", "env", "max_steps", 30, "env", "max_episode_steps"),
    ("happo_air_combat_2v2.toml", "env", "max_steps", 30, "env", "max_episode_steps"),
    ("hasac_mpe_spread.toml", "collector", "train_interval", 30, "collector", "rollout_length"),
    ("had3qn_mpe_spread_discrete.toml", "updater.objective", "epsilon_start", 0.2, "collector", "epsilon_start"),
    ("had3qn_mpe_spread_discrete.toml", "updater.objective", "epsilon_finish", 0.01, "collector", "epsilon_finish"),
    ("had3qn_mpe_spread_discrete.toml", "updater.objective", "epsilon_anneal_steps", 700, "collector",
     "epsilon_anneal_steps"),
    ("had3qn_mpe_spread_discrete.toml", "updater.objective", "epsilon_coin", "per_step", "collector", "epsilon_coin"),
    ("happo_mpe_spread.toml", "policy", "compile", "auto", "updater", "compile"),
]
OLD = {(table, old) for _, table, old, *_ in RENAMES} | {("teams.NAME", "snapshot_every")}


def _at(data: Any, path: str) -> Any:
    return reduce(lambda d, k: d[k] if isinstance(d, dict) else getattr(d, k), path.split("."), data)


@pytest.mark.parametrize(("pipeline", "table", "old", "value", "new_table", "new"), RENAMES,
                         ids=[f"{r[0]}:{r[1]}.{r[2]}" for r in RENAMES])
def test_an_old_key_loads_with_one_warning(monkeypatch: pytest.MonkeyPatch, pipeline: str, table: str, old: str,
                                           value: object, new_table: str, new: str) -> None:
    monkeypatch.setattr(renames, "_WARNED", set())
    data = read_toml(ROOT / "pipelines" / pipeline)
    _at(data, new_table).pop(new, None)  # an older harl's file has only the old key
    _at(data, table)[old] = value
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        spec = structure_pipeline(data, pipeline)
    harl = [w for w in got if issubclass(w.category, HarlDeprecationWarning)]
    assert len(harl) == 1, [str(w.message) for w in harl]
    assert re.fullmatch(rf"\[{re.escape(table)}\] {old} is deprecated: use \[{re.escape(new_table)}\] {new} "
                        rf"\(.* removed in {REMOVED_IN}\)", str(harl[0].message))
    assert getattr(_at(spec, new_table), new) == value
    assert not hasattr(_at(spec, table), old)  # the old table has the key no more
    assert old == new or f"\n{old} = " not in dump_pipeline(spec)  # a resolved pipeline speaks the new name


def test_an_old_key_by_set_overrides_the_files_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(renames, "_WARNED", set())
    with pytest.warns(HarlDeprecationWarning, match=r"\[env\] max_cycles is deprecated: use \[env\] max_episode_steps"):
        spec, _ = load_spec_and_notes(ROOT / "pipelines" / "happo_mpe_spread.toml", ["env.max_cycles=40"])
    assert spec.env.max_episode_steps == 40


def test_the_packages_own_keyword_is_left_alone() -> None:
    """``[env.kwargs]`` is handed to the env package as it is: PettingZoo's ``max_cycles`` stays its own."""
    data = read_toml(ROOT / "pipelines" / "happo_mpe_spread.toml")
    data["env"] = {"kind": "pettingzoo", "env": "pettingzoo.mpe.simple_spread_v3", "kwargs": {"max_cycles": 30}}
    assert renames.renamed(data, None, "x.toml")["env"]["kwargs"] == {"max_cycles": 30}


def _shipped() -> list[Path]:
    return sorted((ROOT / "pipelines").glob("*.toml"))


def _keys(table: Any, path: tuple[str, ...] = ()) -> set[tuple[str, str]]:
    found = set()
    for key, value in table.items():
        if isinstance(value, dict):
            found |= _keys(value, (*path, key))
        else:
            found.add((".".join(path), key))
    return found


def _general(table: str) -> str:
    """``teams.blue`` -> ``teams.NAME``; a team's own ``teams.blue.collector`` -> ``collector``."""
    return re.sub(r"^teams\.[^.]+$", "teams.NAME", re.sub(r"^teams\.[^.]+\.", "", table))


def test_shipped_pipelines_use_only_the_new_names() -> None:
    """Top-level tables, a team's table (its role's keys) and a team's own stage tables
    (``[teams.NAME.updater.objective]`` is ``[updater.objective]``)."""
    old = {f"{path.name}: [{t}] {k}" for path in _shipped()
           for t, k in _keys(tomllib.loads(path.read_text(encoding="utf-8")))
           if (_general(t), k) in OLD}
    assert old == set()


def test_suite_overrides_use_only_the_new_names() -> None:
    found = []
    for path in sorted((ROOT / "benchmarks" / "suites").glob("*.toml")):
        for entry in re.findall(r'"([a-z_.]+)=', path.read_text(encoding="utf-8")):
            table, _, key = entry.rpartition(".")
            if (table, key) in OLD:
                found.append(f"{path.name}: {entry}")
    assert found == []


def test_harl_convert_writes_the_new_names() -> None:
    from harl.compat import convert

    data = Path(__file__).parents[1] / "compat" / "data"
    with warnings.catch_warnings():
        warnings.simplefilter("error", HarlDeprecationWarning)
        trpo = convert(data / "mamujoco_Ant-v2-4x2_hatrpo.json")
        mpe = convert(data / "pettingzoo_mpe_simple_spread_v2-continuous_happo.json")
        trpo.spec(), mpe.spec()
    assert "backtrack_coef" in trpo.pipeline["updater"]["objective"]
    assert "max_episode_steps" in mpe.pipeline["env"] and "max_cycles" not in mpe.pipeline["env"]
    assert "backtrack_coeff" not in trpo.to_toml() and "max_cycles" not in mpe.to_toml()


def test_harl_convert_writes_the_off_policy_names() -> None:
    """HARL's ``train_interval`` is the collector's ``rollout_length``; HAD3QN's epsilon is the collector's."""
    from harl.compat import convert

    data = Path(__file__).parents[1] / "compat" / "data"
    with warnings.catch_warnings():
        warnings.simplefilter("error", HarlDeprecationWarning)
        d3qn = convert(data / "pettingzoo_mpe_simple_spread_v2-discrete_had3qn.json")
        d3qn.spec()
    collector = d3qn.pipeline["collector"]
    assert (collector["rollout_length"], collector["epsilon_start"], collector["epsilon_coin"]) == (50, 0.05, "per_step")
    assert "train_interval" not in d3qn.to_toml() and "epsilon" not in str(d3qn.pipeline["updater"])


class TestTheTeamsTables:
    """The renames look inside every ``[teams.NAME]`` table: its role's keys by its role, and its own stages."""

    def test_a_self_play_teams_old_key_loads_with_one_warning(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(renames, "_WARNED", set())
        data = read_toml(ROOT / "pipelines" / "hasac_mpe_spread_selfplay.toml")
        del data["teams"]["blue"]["snapshot_every_iterations"]
        data["teams"]["blue"]["snapshot_every"] = 3
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            spec = structure_pipeline(data, "selfplay.toml")
        assert [str(w.message) for w in got if issubclass(w.category, HarlDeprecationWarning)] == [
            "[teams.NAME] snapshot_every is deprecated: use [teams.NAME] snapshot_every_iterations "
            f"([teams.NAME] snapshot_every is removed in {REMOVED_IN})"]
        blue = next(team for team in spec.teams if team.name == "blue")
        assert blue.config.role.snapshot_every_iterations == 3
        dumped = dump_pipeline(spec)
        assert "\nsnapshot_every_iterations = 3\n" in dumped and "\nsnapshot_every = " not in dumped

    def test_a_set_of_the_old_key_overrides_the_files_new_one(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(renames, "_WARNED", set())
        with pytest.warns(HarlDeprecationWarning, match=r"\[teams\.NAME\] snapshot_every is deprecated"):
            spec, _ = load_spec_and_notes(ROOT / "pipelines" / "hasac_mpe_spread_selfplay.toml",
                                          ["teams.blue.snapshot_every=2"])
        assert next(t for t in spec.teams if t.name == "blue").config.role.snapshot_every_iterations == 2

    def test_only_the_self_play_role_is_renamed(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A learning team's ``snapshot_every`` is no key of its role: reported as unknown, not moved."""
        monkeypatch.setattr(renames, "_WARNED", set())
        data = read_toml(ROOT / "pipelines" / "hasac_mpe_spread_selfplay.toml")
        data["teams"]["red"]["snapshot_every"] = 3
        with pytest.raises(ConfigError, match=r"teams\.red\.snapshot_every: unknown key"):
            structure_pipeline(data, "selfplay.toml")

    def test_a_teams_own_collector_speaks_the_new_name(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``[teams.prey.collector] train_interval``: renamed in the team's own table, so its dump says rollout_length."""
        monkeypatch.setattr(renames, "_WARNED", set())
        data = read_toml(ROOT / "pipelines" / "hasac-vs-maddpg_mpe_tag.toml")
        data["collector"]["train_interval"] = data["collector"].pop("rollout_length")
        data["teams"]["prey"]["collector"] = {"kind": "off_policy", "n_envs": 10, "train_interval": 50,
                                              "warmup_steps": 5_000}
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            spec = structure_pipeline(data, "tag.toml")
        assert len([w for w in got if issubclass(w.category, HarlDeprecationWarning)]) == 1
        prey = next(team for team in spec.teams if team.name == "prey")
        assert spec.collector.rollout_length == prey.spec.collector.rollout_length == 50
        assert prey.tables["collector"]["rollout_length"] == 50 and "train_interval" not in dump_pipeline(spec)


class TestOneCompileKey:
    """``[policy] compile`` (issue 49) is ``[updater] compile`` (issue 58): one key, one code path."""

    def _load(self, monkeypatch: pytest.MonkeyPatch, pipeline: str = "happo_mpe_spread.toml",
              **tables: dict[str, Any]) -> Any:
        monkeypatch.setattr(renames, "_WARNED", set())
        data = read_toml(ROOT / "pipelines" / pipeline)
        for table, keys in tables.items():
            data.setdefault(table, {}).update(keys)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HarlDeprecationWarning)
            return structure_pipeline(data, pipeline)

    def test_the_old_booleans_are_on_and_off(self, monkeypatch: pytest.MonkeyPatch) -> None:
        assert self._load(monkeypatch, policy={"compile": True}).updater.compile == "on"
        assert self._load(monkeypatch, policy={"compile": False}).updater.compile == "off"

    @pytest.mark.parametrize(("old", "new", "kept"), [("auto", "off", "auto"), ("off", "on", "on"),
                                                      ("on", "on", "on")])
    def test_beside_off_the_one_that_compiles_is_kept(self, monkeypatch: pytest.MonkeyPatch, old: str, new: str,
                                                      kept: str) -> None:
        """A resolved pipeline.toml of an older harl has both keys, one at its default "off"."""
        spec = self._load(monkeypatch, policy={"compile": old}, updater={"compile": new})
        assert spec.updater.compile == kept

    def test_on_against_auto_is_refused(self, monkeypatch: pytest.MonkeyPatch) -> None:
        with pytest.raises(ConfigError) as info:
            self._load(monkeypatch, policy={"compile": "on"}, updater={"compile": "auto"})
        assert str(info.value) == (
            'happo_mpe_spread.toml: policy.compile: the old spelling of updater.compile, which says "auto": write '
            'only updater.compile = "auto" and remove policy.compile (it says "on")')

    def test_under_an_updater_without_the_key_it_is_dropped(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """MAT's ``joint`` updater: an older harl's [policy] compile compiled nothing there."""
        monkeypatch.setattr(renames, "_WARNED", set())
        data = read_toml(ROOT / "pipelines" / "mat_mpe_spread.toml")
        data.setdefault("policy", {})["compile"] = "off"
        with pytest.warns(HarlDeprecationWarning, match=r'\[policy\] compile is deprecated: use \[updater\] compile '
                                                        r'\(under \[updater\] kind = "joint" it did nothing, and is '
                                                        r"dropped\)"):
            spec = structure_pipeline(data, "mat.toml")
        assert not hasattr(spec.updater, "compile") and not hasattr(spec.policy, "compile")


class TestD3QNExploresOnTheCollectorsEpsilon:
    def test_the_collectors_schedule_reaches_the_actors(self) -> None:
        """start, finish, anneal steps and coin from [collector]; the anneal begins after its warm-up."""
        from harl.compose import build_stages

        spec, _ = load_spec_and_notes(ROOT / "pipelines" / "had3qn_mpe_spread_discrete.toml", [
            "collector.n_envs=2", "collector.epsilon_start=0.5", "collector.epsilon_finish=0.1",
            "collector.epsilon_anneal_steps=100", "collector.epsilon_coin=per_step", "collector.warmup_steps=40",
            "buffer.capacity=100", "evaluator.n_envs=1"])
        stages = build_stages(spec)
        try:
            actor = stages.policy.actors[0]
            assert (actor.epsilon_start, actor.epsilon_finish, actor.anneal_steps, actor.warmup_steps,
                    actor.per_step_coin) == (0.5, 0.1, 100, 40, True)
            assert [actor.epsilon(steps) for steps in (0, 40, 90, 140, 500)] == pytest.approx([0.5, 0.5, 0.3, 0.1, 0.1])
        finally:
            stages.close()

    def test_an_objective_that_explores_otherwise_refuses_it(self) -> None:
        with pytest.raises(ConfigError) as info:
            load_spec_and_notes(ROOT / "pipelines" / "hasac_mpe_spread.toml", ["collector.epsilon_start=0.2"])
        assert str(info.value) == (
            f"{ROOT / 'pipelines' / 'hasac_mpe_spread.toml'}: collector.epsilon_start (from --set "
            "collector.epsilon_start=0.2): only an epsilon-greedy objective (d3qn) reads it, and "
            'updater.objective.kind = "sac" explores its own way; remove collector.epsilon_start')


class TestAnOlderRunResumes:
    """A run made before the renames (its pipeline.toml and its checkpoint's pipeline say ``train_interval``)
    resumes: both are compared in today's names."""

    TEXT = "\n".join([
        '[run]\ntotal_env_steps = 40', '[env]\nkind = "counting"',
        '[collector]\nkind = "off_policy"\nn_envs = 2\nrollout_length = 5\nwarmup_steps = 10\nupdates_per_round = 2',
        '[buffer]\nkind = "replay"\ncapacity = 40\nbatch_size = 8', '[returns]\nkind = "n_step"\nn_step = 2',
        '[critic]\nkind = "q"\ntwin = true\nhidden_sizes = [8]', '[updater.objective]\nkind = "sac"',
        '[policy]\nhidden_sizes = [8]', '[evaluator]\nepisodes = 2\nn_envs = 2', '[logging]\nprogress = false',
    ])

    def test_the_comparison_reads_the_old_name(self, tmp_path: Path) -> None:
        from harl.errors import CheckpointError
        from harl.run.resume_check import check_resumable

        old = self.TEXT.replace("rollout_length", "train_interval")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HarlDeprecationWarning)
            check_resumable({"pipeline": old}, self.TEXT, tmp_path / "pipeline.toml", tmp_path / "iter.pt")
            check_resumable({"pipeline": self.TEXT}, old, tmp_path / "pipeline.toml", tmp_path / "iter.pt")
            with pytest.raises(CheckpointError, match=r"collector\.rollout_length is 6 now but was 5"):
                check_resumable({"pipeline": old}, self.TEXT.replace("rollout_length = 5", "rollout_length = 6"),
                                tmp_path / "pipeline.toml", tmp_path / "iter.pt")

    def test_a_run_of_an_older_harl_resumes(self, tmp_path: Path) -> None:
        import torch

        from harl.run.lifecycle import resume_run, start_run
        from harl.rundir.checkpoint import latest_checkpoint
        from tests.fakes import counting

        assert counting.CountingConfig
        path = tmp_path / "p.toml"
        path.write_text(self.TEXT)
        trainer, _ = start_run(path, [], run_dir=tmp_path / "run")
        try:
            trainer.train()
        finally:
            trainer.stages.close()
        run_file, checkpoint = tmp_path / "run" / "pipeline.toml", latest_checkpoint(tmp_path / "run")
        run_file.write_text(run_file.read_text().replace("rollout_length", "train_interval"))  # as an older harl
        state = torch.load(checkpoint, weights_only=False)
        assert "rollout_length" in state["pipeline"]
        torch.save({**state, "pipeline": state["pipeline"].replace("rollout_length", "train_interval")}, checkpoint)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HarlDeprecationWarning)
            resumed = resume_run(tmp_path / "run", overrides=["run.total_env_steps=50"])
        try:
            assert resumed.counters.iteration == 4 and resumed.stages.collector.config.rollout_length == 5
            resumed.train()
            assert resumed.counters.iteration == 5
        finally:
            resumed.stages.close()
