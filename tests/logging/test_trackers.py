"""MLflow and wandb trackers: what a run puts in them, resume, missing packages and failures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harl.cli import main
from harl.logging.csv_log import read_metrics
from harl.logging.tracker_data import IDS, flatten, numeric
from harl.run.lifecycle import resume_run
from tests.fakes import counting
from tests.logging import wandb_records
from tests.train_briefly import train_briefly

PIPELINE = "\n".join([
    '[run]\nname = "counting"', '[env]\nkind = "counting"', '[collector]\nrollout_length = 6\nn_envs = 2',
    '[policy]\nhidden_sizes = [8]', '[critic]\nhidden_sizes = [8]', '[evaluator]\nepisodes = 1\nn_envs = 1',
    '[checkpoint]\nevery_iterations = 1', '[logging]\nprogress = false'])


def pipeline(tmp_path: Path) -> Path:
    assert counting.CountingConfig  # registers the "counting" env kind
    path = tmp_path / "p.toml"
    path.write_text(PIPELINE)
    return path


def test_flatten_and_numeric() -> None:
    """Nested tables become dotted keys; only finite, non-boolean numbers are metrics."""
    assert flatten({"run": {"seed": 1}, "updater": {"objective": {"clip": 0.2}}, "x": [1, 2]}) == {
        "run.seed": "1", "updater.objective.clip": "0.2", "x": "[1, 2]"}
    assert numeric({"a": 1, "b": None, "c": "text", "d": True, "e": float("nan"), "f": 2.5}) == {"a": 1.0, "f": 2.5}


class TestMLflow:
    @pytest.fixture(autouse=True)
    def _mlflow(self) -> None:
        pytest.importorskip("mlflow", reason="pip install harl[mlflow]")

    def test_params_metrics_artifacts_and_resume(self, tmp_path: Path) -> None:
        """Params, one metric point per iteration at its env steps, pipeline.toml; resume continues the run."""
        from mlflow.tracking import MlflowClient

        run = tmp_path / "runs" / "run"
        train_briefly(pipeline(tmp_path), ["logging.mlflow.checkpoint=true"], run)
        run_id = json.loads((run / IDS).read_text())["mlflow"]
        client = MlflowClient((tmp_path / "runs" / "mlruns").as_uri())
        logged = client.get_run(run_id)
        assert logged.data.params["env.kind"] == "counting"
        assert logged.data.params["collector.rollout_length"] == "6"
        assert logged.info.status == "FINISHED"
        rows = read_metrics(run / "metrics.csv")
        history = client.get_metric_history(run_id, "iteration")
        assert [(m.step, m.value) for m in history] == [(int(r["env_steps"]), float(r["iteration"])) for r in rows]
        names = {a.path for a in client.list_artifacts(run_id)}
        assert names == {"pipeline.toml", "checkpoints"}
        assert [a.path for a in client.list_artifacts(run_id, "checkpoints")] == ["checkpoints/iter_0000002.pt"]

        with resume_run(run) as trainer:
            trainer.train(max_iterations=1)
        assert json.loads((run / IDS).read_text())["mlflow"] == run_id
        assert [m.value for m in client.get_metric_history(run_id, "iteration")] == [1.0, 2.0, 3.0]
        assert client.get_run(run_id).info.status == "FINISHED"

    def test_a_failing_tracker_warns_once_and_training_goes_on(self, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
        """A tracker that raises on every write: one warning, all iterations, metrics.csv and checkpoints."""
        from harl.logging import mlflow_log

        def fail(self: object, row: object) -> None:
            raise ConnectionError("tracking server gone")

        monkeypatch.setattr(mlflow_log.MLflowSink, "write", fail)
        run = tmp_path / "run"
        with pytest.warns(RuntimeWarning) as caught:
            _, rows = train_briefly(pipeline(tmp_path), ["logging.mlflow=true"], run, iterations=3)
        messages = [str(w.message) for w in caught if "mlflow" in str(w.message)]
        assert messages == ["mlflow: ConnectionError: tracking server gone; training goes on without mlflow "
                            "(metrics.csv and checkpoints are unaffected)"]
        assert [r["iteration"] for r in rows] == ["1", "2", "3"]
        assert (run / "checkpoints" / "iter_0000003.pt").is_file()


@pytest.mark.parametrize("extra", ["mlflow", "wandb"])
def test_missing_package_is_a_clear_error(extra: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Without the package, harl train exits 2 naming the extra, before making a run directory."""
    monkeypatch.setitem(sys.modules, extra, None)
    run = tmp_path / "run"
    code = main(["train", str(pipeline(tmp_path)), "--set", f"logging.{extra}=true", "--run-dir", str(run)])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        f'harl: [logging.{extra}] needs: pip install "harl[{extra}]" (the optional package "{extra}" is not installed)')
    assert not run.exists()


def test_wandb_offline_run_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """WANDB_MODE=offline: an offline run under RUN_DIR/wandb with the pipeline as config and file."""
    pytest.importorskip("wandb", reason="pip install harl[wandb]")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    train_briefly(pipeline(tmp_path), ["logging.wandb=true"], run)
    run_id = json.loads((run / IDS).read_text())["wandb"]
    (offline,) = (run / "wandb").glob(f"offline-run-*-{run_id}")
    assert (offline / "files" / "pipeline.toml").read_text() == (run / "pipeline.toml").read_text()
    log = offline / f"run-{run_id}.wandb"
    wandb_records.wait_for_exit(log)
    config = wandb_records.config(log)
    assert config["env"]["kind"] == "counting" and config["collector"]["rollout_length"] == 6
    rows = read_metrics(run / "metrics.csv")
    logged = wandb_records.history(log)
    assert [(h["env_steps"], h["iteration"]) for h in logged] == [(int(r["env_steps"]), int(r["iteration"])) for r in rows]
    assert logged[-1]["value_loss"] == pytest.approx(float(rows[-1]["value_loss"]), rel=1e-5)  # csv keeps 6 digits


def test_mlflow_experiment_created_by_another_process_is_reused(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """When a sweep's other seed creates the experiment first, this run joins it instead of failing."""
    pytest.importorskip("mlflow", reason="pip install harl[mlflow]")
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from harl.logging.mlflow_log import experiment_id

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient((tmp_path / "mlruns").as_uri())
    first = client.create_experiment("harl")

    class Racing:
        """Sees no experiment on the first look, as if another process had not yet created it."""

        looks = 0

        def get_experiment_by_name(self, name: str) -> object:
            self.looks += 1
            return None if self.looks == 1 else client.get_experiment_by_name(name)

        def create_experiment(self, name: str) -> str:
            raise MlflowException(f"Experiment '{name}' already exists.")

    assert experiment_id(Racing(), "harl") == first
