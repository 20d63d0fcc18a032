"""Weights & Biases: a harl run as a wandb run (``[logging.wandb]``; ``pip install "harl[wandb]"``).

``project``, ``entity`` and ``mode`` (online, offline, disabled; empty: ``WANDB_MODE`` or
wandb's default) come from ``[logging.wandb]``.  The wandb files go under the run
directory (``RUN_DIR/wandb/``); ``wandb sync RUN_DIR/wandb/offline-run-*`` uploads an offline
run later.  Every metric is charted against ``env_steps`` (logged as a metric, not as
wandb's own step, which may not repeat after a resume).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import attrs

from harl.errors import import_extra
from harl.logging.sink import SinkContext, register_sink
from harl.logging.tracker_data import numeric, pipeline_tables, save_id, saved_id
from harl.settings import one_of, setting


@attrs.frozen
class WandbConfig:
    """``[logging.wandb]``: the run as a Weights & Biases run, the same content as MLflow
    (pip install "harl[wandb]"); a failure warns once, training goes on."""

    project: str = setting("harl", "wandb project")
    entity: str = setting("", "wandb entity (empty: your default)")
    mode: str = setting("", "wandb mode (empty: WANDB_MODE or wandb's default)", one_of(("", "online", "offline", "disabled")))
    checkpoint: bool = setting(False, "also store the final checkpoint in the wandb run")


class WandbSink:
    def __init__(self, config: WandbConfig, run_dir: Path, pipeline_text: str) -> None:
        import wandb

        run_id = saved_id(run_dir, "wandb") or uuid.uuid4().hex[:8]
        save_id(run_dir, "wandb", run_id)
        self.run_dir = run_dir
        self.log_checkpoint = config.checkpoint
        self.run = wandb.init(project=config.project, entity=config.entity or None,
                              mode=cast(Any, config.mode or None),  # validated: online | offline | disabled
                              dir=str(run_dir), id=run_id, resume="allow",
                              name=run_dir.name, config=pipeline_tables(pipeline_text),
                              settings=wandb.Settings(console="off", silent=True))
        self.run.define_metric("env_steps")
        self.run.define_metric("*", step_metric="env_steps")
        self.run.save(str(run_dir / "pipeline.toml"), base_path=str(run_dir), policy="now")

    @classmethod
    def open(cls, config: WandbConfig, context: SinkContext) -> WandbSink:
        return cls(config, context.run_dir, context.pipeline_text)

    def write(self, row: Mapping[str, Any]) -> None:
        self.run.log(numeric(row))

    def close(self, checkpoint: Path | None) -> None:
        if self.log_checkpoint and checkpoint is not None:
            self.run.save(str(checkpoint), base_path=str(self.run_dir), policy="now")
        self.run.finish()


register_sink(WandbConfig, WandbSink.open, kind="wandb", guarded=True,
              require=lambda: import_extra("wandb", "[logging.wandb]", "wandb"))
