"""MLflow: a harl run as an MLflow run (``[logging.mlflow]``; ``pip install "harl[mlflow]"``).

The tracking URI is ``[logging.mlflow] tracking_uri``, else ``MLFLOW_TRACKING_URI``, else a
file store ``mlruns/`` beside the run directory (``runs/mlruns`` by default: ``mlflow ui
--backend-store-uri runs/mlruns`` shows it).  MLflow 3 keeps its file store in maintenance
mode behind ``MLFLOW_ALLOW_FILE_STORE``; harl sets that for file stores it opens (the
light ``mlflow-skinny`` package has no database backend).  Metrics are logged against env
steps; params are the flattened resolved pipeline.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from harl.errors import import_extra
from harl.logging.sink import SinkContext, register_sink
from harl.logging.tracker_data import numeric, pipeline_params, save_id, saved_id
from harl.settings import setting

BATCH = 100
"""MLflow's limit on params per ``log_batch`` call."""


@attrs.frozen
class MLflowConfig:
    """``[logging.mlflow]``: the run as an MLflow run: pipeline params, every metric per iteration,
    pipeline.toml (pip install "harl[mlflow]"); a failing server warns once, training goes on."""

    tracking_uri: str = setting("", "MLflow tracking URI (empty: MLFLOW_TRACKING_URI, else a file store mlruns/ beside the run directory)")
    experiment: str = setting("harl", "MLflow experiment name")
    checkpoint: bool = setting(False, "also store the final checkpoint as an artifact")


def tracking_uri(config: MLflowConfig, run_dir: Path) -> str:
    uri = config.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI", "")
    return uri or (run_dir.resolve().parent / "mlruns").as_uri()


def experiment_id(client: Any, name: str) -> str:
    """The experiment's id, created if new (a sweep's seeds may race to create it: one wins)."""
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is None:
        try:
            return client.create_experiment(name)
        except MlflowException:
            found = client.get_experiment_by_name(name)
            if found is None:
                raise
    return found.experiment_id


class MLflowSink:
    def __init__(self, config: MLflowConfig, run_dir: Path, pipeline_text: str) -> None:
        from mlflow.entities import Metric, Param, RunStatus
        from mlflow.tracking import MlflowClient

        self._metric = Metric
        uri = tracking_uri(config, run_dir)
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(uri)
        self.run_dir = run_dir
        self.log_checkpoint = config.checkpoint
        run_id = saved_id(run_dir, "mlflow")
        if run_id is None:
            experiment = experiment_id(self.client, config.experiment)
            run_id = self.client.create_run(experiment, run_name=run_dir.name).info.run_id
            save_id(run_dir, "mlflow", run_id)
            params = [Param(k, v) for k, v in pipeline_params(pipeline_text).items()]
            for begin in range(0, len(params), BATCH):
                self.client.log_batch(run_id, params=params[begin:begin + BATCH])
            self.client.log_artifact(run_id, str(run_dir / "pipeline.toml"))
        else:  # a resumed harl run continues its MLflow run
            self.client.update_run(run_id, RunStatus.to_string(RunStatus.RUNNING))
        self.run_id = run_id

    @classmethod
    def open(cls, config: MLflowConfig, context: SinkContext) -> MLflowSink:
        return cls(config, context.run_dir, context.pipeline_text)

    def write(self, row: Mapping[str, Any]) -> None:
        step, stamp = int(row["env_steps"]), int(time.time() * 1000)
        metrics = [self._metric(k, v, stamp, step) for k, v in numeric(row).items() if k != "env_steps"]
        self.client.log_batch(self.run_id, metrics=metrics)

    def close(self, checkpoint: Path | None) -> None:
        if self.log_checkpoint and checkpoint is not None:
            self.client.log_artifact(self.run_id, str(checkpoint), artifact_path="checkpoints")
        self.client.set_terminated(self.run_id)


register_sink(MLflowConfig, MLflowSink.open, kind="mlflow", guarded=True,
              require=lambda: import_extra("mlflow", "[logging.mlflow]", "mlflow"))
