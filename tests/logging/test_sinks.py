"""Sinks: their [logging.*] tables, the old prefixed keys, a user's own sink kind, a failing tracker."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

import harl
from harl.config.dump import dump_pipeline
from harl.config.loading import load_spec_and_notes, structure_pipeline
from harl.config.run import LoggingConfig, sink_configs
from harl.logging.mlflow_log import MLflowConfig
from harl.logging.sink import Guarded
from harl.logging.tensorboard import TensorBoardConfig
from harl.logging.wandb_log import WandbConfig
from tests.logging.test_trackers import PIPELINE, pipeline

OLD_DUMP = {  # [logging] as an older harl wrote it into every run's pipeline.toml
    "dir": "runs", "progress": True, "log_every": 10, "tensorboard": False, "mlflow": False,
    "mlflow_tracking_uri": "", "mlflow_experiment": "harl", "wandb": False, "wandb_project": "harl",
    "wandb_entity": "", "wandb_mode": "", "tracker_checkpoint": False,
}


def logging_of(table: dict[str, object]) -> LoggingConfig:
    return structure_pipeline({"logging": table}, "p.toml").logging


class TestTables:
    def test_each_sink_has_its_table(self) -> None:
        """[logging.mlflow] and [logging.wandb] hold their keys; an empty [logging.tensorboard] switches it on."""
        config = logging_of({"tensorboard": {}, "mlflow": {"experiment": "e", "checkpoint": True},
                             "wandb": {"project": "p", "mode": "offline"}})
        assert config.tensorboard == TensorBoardConfig()
        assert config.mlflow == MLflowConfig(experiment="e", checkpoint=True)
        assert config.wandb == WandbConfig(project="p", mode="offline")
        assert list(sink_configs(config)) == ["csv", "tensorboard", "mlflow", "wandb"]

    def test_dumped_tables_load_back_equal(self, tmp_path: Path) -> None:
        """pipeline.toml writes each switched-on sink as its own table, and reads back the same spec."""
        spec, _ = load_spec_and_notes(pipeline(tmp_path), ["logging.mlflow.experiment=e", "logging.tensorboard=true"])
        text = dump_pipeline(spec)
        assert '[logging.mlflow]\ntracking_uri = ""\nexperiment = "e"\ncheckpoint = false\n' in text
        assert "[logging.tensorboard]\n" in text and "wandb" not in text
        (tmp_path / "dumped.toml").write_text(text)
        assert load_spec_and_notes(tmp_path / "dumped.toml")[0] == spec

    def test_a_bad_key_in_a_sink_table_names_its_path(self, tmp_path: Path) -> None:
        """A typo in [logging.mlflow] is one located line with the valid keys."""
        with pytest.raises(harl.ConfigError) as error:
            load_spec_and_notes(pipeline(tmp_path), ["logging.mlflow.experimnt=e"])
        assert str(error.value) == (
            f"{tmp_path / 'p.toml'}: logging.mlflow.experimnt: unknown key "
            '(did you mean "experiment"?); valid keys: checkpoint, experiment, tracking_uri')


class TestOldKeys:
    def test_an_older_pipeline_toml_still_loads(self) -> None:
        """The prefixed keys an older harl wrote with their defaults mean no tracker: the default [logging]."""
        assert logging_of(OLD_DUMP) == LoggingConfig()

    def test_old_keys_keep_working(self) -> None:
        """mlflow = true with mlflow_* keys (and wandb's, tracker_checkpoint) become the new tables."""
        config = logging_of({**OLD_DUMP, "mlflow": True, "mlflow_experiment": "e", "mlflow_tracking_uri": "file:/x",
                             "wandb": True, "wandb_project": "p", "wandb_mode": "offline",
                             "tracker_checkpoint": True, "tensorboard": True})
        assert config == logging_of({"tensorboard": {},
                                     "mlflow": {"experiment": "e", "tracking_uri": "file:/x", "checkpoint": True},
                                     "wandb": {"project": "p", "mode": "offline", "checkpoint": True}})
        assert config.mlflow_experiment is None  # folded: pipeline.toml writes the new spelling only

    def test_an_old_key_that_contradicts_its_table_says_what_to_write(self, tmp_path: Path) -> None:
        """mlflow_experiment beside a [logging.mlflow] experiment that differs: keep the table's, remove the old key."""
        path = tmp_path / "p.toml"
        path.write_text(PIPELINE.replace('[logging]\n', '[logging]\nmlflow_experiment = "old"\n')
                        + '\n[logging.mlflow]\nexperiment = "new"\n')
        with pytest.raises(harl.ConfigError) as error:
            load_spec_and_notes(path)
        assert str(error.value) == (
            f'{path}: logging.mlflow_experiment: the old spelling of [logging.mlflow] experiment, which says "new": '
            'write only [logging.mlflow] experiment = "new" and remove mlflow_experiment')


USER_SINK = '''
    from pathlib import Path

    import attrs

    import harl

    SEEN = []


    @attrs.frozen
    class PrintConfig:
        """[logging.sinks.NAME] of a test sink."""

        prefix: str = "row"


    class PrintSink:
        def __init__(self, config, context):
            self.config, self.context = config, context

        def write(self, row):
            SEEN.append((self.config.prefix, row["iteration"]))

        def close(self, checkpoint):
            SEEN.append(("closed", Path(checkpoint).name))


    harl.register("sink", PrintConfig, PrintSink)
'''


class TestUserSink:
    @pytest.fixture
    def module(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
        (tmp_path / "my_sinks.py").write_text(textwrap.dedent(USER_SINK))
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.delitem(sys.modules, "my_sinks", raising=False)
        import my_sinks  # type: ignore[import-not-found]

        return my_sinks

    def test_a_users_sink_by_module_and_name(self, tmp_path: Path, module: object) -> None:
        """[logging.sinks.echo] kind = "my_sinks:PrintConfig" gets every row, then the close with the checkpoint."""
        harl.train(pipeline(tmp_path), ['logging.sinks.echo.kind="my_sinks:PrintConfig"',
                                        'logging.sinks.echo.prefix="it"', "run.total_env_steps=24"],
                   run_dir=tmp_path / "run")
        assert module.SEEN == [("it", 1), ("it", 2), ("closed", "iter_0000002.pt")]  # type: ignore[attr-defined]
        assert '[logging.sinks.echo]\nkind = "my_sinks:PrintConfig"\nprefix = "it"' in (
            tmp_path / "run" / "pipeline.toml").read_text()

    def test_its_keys_are_checked_when_the_pipeline_loads(self, tmp_path: Path, module: object) -> None:
        """A key the sink's config lacks is a located ConfigError, before any run."""
        with pytest.raises(harl.ConfigError, match=r"logging\.sinks\.echo\.prefx: unknown key \(did you mean \"prefix\"\?\)"):
            harl.load_pipeline(pipeline(tmp_path), ['logging.sinks.echo.kind="my_sinks:PrintConfig"',
                                                    'logging.sinks.echo.prefx="x"'])

    def test_an_unknown_sink_kind(self, tmp_path: Path) -> None:
        """A kind that is neither a built-in sink nor module:Name lists the built-in ones."""
        with pytest.raises(harl.ConfigError) as error:
            harl.load_pipeline(pipeline(tmp_path), ["logging.sinks.x.kind=csvv"])
        # harl's own kinds, and any a test before this one registered by name (a docs example's "print")
        assert re.search(r'logging\.sinks\.x\.kind: unknown sink kind "csvv" \(expected one of: csv, mlflow, '
                         r'(print, )?tensorboard, wandb, or "module:Name" of your own\)$', str(error.value))


def test_a_guarded_sink_warns_once_and_is_switched_off() -> None:
    """A tracker whose write raises warns once; later rows and its close are skipped, nothing is raised."""
    calls = []

    class Failing:
        def write(self, row: object) -> None:
            calls.append("write")
            raise ConnectionError("server gone")

        def close(self, checkpoint: object) -> None:
            calls.append("close")

    sink = Guarded("mlflow", Failing)
    with pytest.warns(RuntimeWarning, match="mlflow: ConnectionError: server gone; training goes on"):
        sink.write({"iteration": 1})
    sink.write({"iteration": 2})
    sink.close(None)
    assert calls == ["write"]
