"""Weights & Biases: a harl run as a wandb run (``[logging] wandb = true``; ``pip install "harl[wandb]"``).

``wandb_project``, ``wandb_entity`` and ``wandb_mode`` (online, offline, disabled; empty:
``WANDB_MODE`` or wandb's default) come from ``[logging]``.  The wandb files go under the run
directory (``RUN_DIR/wandb/``); ``wandb sync RUN_DIR/wandb/offline-run-*`` uploads an offline
run later.  Every metric is charted against ``env_steps`` (logged as a metric, not as
wandb's own step, which may not repeat after a resume).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from harl.logging.tracker_data import numeric, save_id, saved_id

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


class WandbTracker:
    def __init__(self, config: Any, run_dir: Path, pipeline_text: str) -> None:
        import wandb

        run_id = saved_id(run_dir, "wandb") or uuid.uuid4().hex[:8]
        save_id(run_dir, "wandb", run_id)
        self.run_dir = run_dir
        self.log_checkpoint = config.tracker_checkpoint
        self.run = wandb.init(project=config.wandb_project, entity=config.wandb_entity or None,
                              mode=config.wandb_mode or None, dir=str(run_dir), id=run_id, resume="allow",
                              name=run_dir.name, config=tomllib.loads(pipeline_text),
                              settings=wandb.Settings(console="off", silent=True))
        self.run.define_metric("env_steps")
        self.run.define_metric("*", step_metric="env_steps")
        self.run.save(str(run_dir / "pipeline.toml"), base_path=str(run_dir), policy="now")

    def write(self, row: dict[str, Any]) -> None:
        self.run.log(numeric(row))

    def close(self, checkpoint: Path | None) -> None:
        if self.log_checkpoint and checkpoint is not None:
            self.run.save(str(checkpoint), base_path=str(self.run_dir), policy="now")
        self.run.finish()
