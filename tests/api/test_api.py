"""harl's public API: one return type per function, typed rows, notebook mistakes as harl's errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import harl
from tests.logging.test_trackers import pipeline

ROOT = Path(__file__).resolve().parents[2]
TABLES = {  # PIPELINE as a dict of tables
    "run": {"name": "counting", "total_env_steps": 36}, "env": {"kind": "counting"},
    "collector": {"rollout_length": 6, "n_envs": 2}, "policy": {"hidden_sizes": [8]},
    "critic": {"hidden_sizes": [8]}, "evaluator": {"episodes": 1, "n_envs": 1},
    "checkpoint": {"every_iterations": 1}, "logging": {"progress": False},
}


def test_import_harl_stays_light() -> None:
    """`import harl` pulls in neither torch nor harl's training modules (env workers import harl.envs)."""
    code = "import harl, sys; assert 'torch' not in sys.modules, 'torch'; assert 'harl.api' not in sys.modules"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)


def test_every_public_name_resolves_and_has_a_docstring() -> None:
    """Each name of harl.__all__ is importable and documented; dir(harl) lists them."""
    for name in harl.__all__:
        assert getattr(harl, name).__doc__, name
    assert set(harl.__all__) <= set(dir(harl))
    from harl.evaluator import EvalStats

    assert callable(harl.evaluate) and harl.EvalStats is EvalStats
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        harl.nope  # noqa: B018


class TestLoadPipeline:
    def test_a_file_a_dict_and_a_spec_give_one_type(self, tmp_path: Path) -> None:
        """The same pipeline from a file, from its tables and from a spec (with an override) is one spec."""
        from_file = harl.load_pipeline(pipeline(tmp_path), ["run.total_env_steps=36"])
        assert isinstance(from_file, harl.PipelineSpec)
        assert harl.load_pipeline(TABLES) == from_file
        assert harl.load_pipeline(harl.load_pipeline(pipeline(tmp_path)), ["run.total_env_steps=36"]) == from_file
        assert TABLES["run"]["total_env_steps"] == 36  # the caller's dict is not written into

    def test_notes_sit_beside_the_spec(self) -> None:
        """A kind changed by an override drops the old kind's keys; pipeline_notes(spec) says so."""
        spec = harl.load_pipeline(ROOT / "pipelines" / "happo_mpe_spread.toml", ["updater.kind=simultaneous"])
        assert harl.pipeline_notes(spec) and all("dropped" in n for n in harl.pipeline_notes(spec))
        assert harl.pipeline_notes(harl.load_pipeline(ROOT / "pipelines" / "happo_mpe_spread.toml")) == []

    def test_a_wrong_override_key_is_a_config_error(self, tmp_path: Path) -> None:
        """The CLI's one paragraph, as harl.ConfigError (a HarlError)."""
        with pytest.raises(harl.ConfigError) as error:
            harl.load_pipeline(pipeline(tmp_path), ["run.sed=3"])
        assert str(error.value) == (f'{tmp_path / "p.toml"}: run.sed (from --set run.sed=3): unknown key '
                                    '(did you mean "seed"?); valid keys: device, name, population_update, precision, seed, '
                                    'torch_threads, total_env_steps')
        assert isinstance(error.value, harl.HarlError)

    def test_an_unknown_table_in_a_dict(self) -> None:
        """A spec dict with a misspelt table names it and the valid ones."""
        with pytest.raises(harl.ConfigError, match=r'^pipeline \(a dict\): critc: unknown table \(did you mean '
                                                   r'"critic"\?\); valid tables: run, env'):
            harl.load_pipeline({**TABLES, "critc": {}})


class TestTrain:
    def test_train_returns_typed_rows_and_read_metrics_agrees(self, tmp_path: Path) -> None:
        """Three iterations: the result's rows are numbers, read_metrics(str) reads the file as numbers."""
        result = harl.train(TABLES, run_dir=tmp_path / "run")
        assert isinstance(result, harl.TrainResult) and result.run_dir == tmp_path / "run"
        assert (result.counters.iteration, result.stopped_by, result.interrupted) == (3, "budget", False)
        assert [r["iteration"] for r in result.metrics] == [1, 2, 3]
        rows = harl.read_metrics(str(result.run_dir))
        assert [r["iteration"] for r in rows] == [1, 2, 3] and isinstance(rows[0]["env_steps"], int)
        assert isinstance(rows[0]["value_loss"], float) and rows[1]["eval_return"] is None
        assert rows[-1]["eval_return"] == pytest.approx(result.last_eval.mean_return, rel=1e-5)

    def test_max_iterations_then_resume_to_the_end(self, tmp_path: Path) -> None:
        """max_iterations=1 stops at 1 with a checkpoint; resume trains 2 and 3; evaluate reads the newest."""
        first = harl.train(TABLES, run_dir=tmp_path / "run", max_iterations=1)
        assert (first.counters.iteration, first.stopped_by) == (1, "max_iterations")
        seen: list[int] = []
        rest = harl.resume(tmp_path / "run", callbacks=[lambda row: seen.append(row["iteration"])])
        assert seen == [2, 3] and rest.counters.iteration == 3
        assert [r["iteration"] for r in harl.read_metrics(tmp_path / "run")] == [1, 2, 3]
        stats = harl.evaluate(tmp_path / "run", episodes=2)
        assert isinstance(stats, harl.EvalStats) and stats.episodes == 2

    def test_a_callback_stops_the_run_like_one_ctrl_c(self, tmp_path: Path) -> None:
        """True from on_evaluation at iteration 1 stops there with the checkpoint of iteration 1."""

        class StopOnEval:
            def on_evaluation(self, stats: harl.EvalStats) -> bool:
                return True

        result = harl.train(TABLES, run_dir=tmp_path / "run", callbacks=[StopOnEval()])
        assert (result.counters.iteration, result.interrupted, result.stopped_by) == (1, True, "callback")
        assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == ["iter_0000001.pt"]

    def test_resume_overrides_extend_a_finished_run(self, tmp_path: Path) -> None:
        """A finished run resumed with a larger run.total_env_steps trains the extra iteration."""
        harl.train(TABLES, run_dir=tmp_path / "run")
        result = harl.resume(tmp_path / "run", overrides=["run.total_env_steps=48"])
        assert [r["iteration"] for r in result.metrics] == [4]
        assert "total_env_steps = 48" in (tmp_path / "run" / "pipeline.toml").read_text()

    def test_a_run_directory_that_holds_a_run_is_refused(self, tmp_path: Path) -> None:
        """harl.train into a directory with a pipeline.toml says to resume it instead."""
        harl.train(TABLES, run_dir=tmp_path / "run", max_iterations=1)
        with pytest.raises(harl.HarlError, match="already holds a run"):
            harl.train(TABLES, run_dir=tmp_path / "run")

    def test_read_metrics_of_no_run(self, tmp_path: Path) -> None:
        """A directory without metrics.csv is a CheckpointError that says so."""
        with pytest.raises(harl.CheckpointError, match="no metrics.csv"):
            harl.read_metrics(tmp_path)


def test_build_and_check(tmp_path: Path) -> None:
    """build() gives the stages (closed here); check() gives the rows harl check prints."""
    stages = harl.build(pipeline(tmp_path))
    try:
        assert stages.collector.steps_per_iteration == 12
    finally:
        stages.close()
    rows = harl.check(pipeline(tmp_path))
    assert [r[0] for r in rows] == ["env", "collector", "buffer", "returns", "critic", "updater", "policy", "evaluator"]
    assert rows[1] == ("collector", "on_policy", "12 env steps per iteration")
