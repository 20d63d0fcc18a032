"""Experiment trackers (MLflow, Weights & Biases) beside metrics.csv, never in training's way.

::

    trackers = open_trackers(spec.logging, run_dir, pipeline_text)   # [logging] mlflow / wandb
    for row in iterations: trackers.write(row)                        # numeric columns at env_steps
    trackers.close(final_checkpoint)                                  # artifacts, end the tracker's run

A tracker gets the resolved pipeline flattened to ``slot.key`` params, every numeric
metrics.csv column of every iteration, and ``pipeline.toml`` (plus, with ``[logging]
tracker_checkpoint``, the final checkpoint) as artifacts.  Its run id is kept in the run
directory's ``trackers.json``, so a resumed harl run continues the same tracker run.  A
tracker that fails (a server gone, a full disk) warns once and is switched off: training,
metrics.csv and checkpoints carry on without it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from harl.errors import MissingExtraError


class Tracker(Protocol):
    def write(self, row: dict[str, Any]) -> None: ...

    def close(self, checkpoint: Path | None) -> None: ...


class Guarded:
    """A tracker whose first failure (opening included) warns once and switches it off."""

    def __init__(self, name: str, open_tracker: Callable[[], Tracker]) -> None:
        self.name = name
        self.tracker: Tracker | None = None
        self._call(lambda: setattr(self, "tracker", open_tracker()))

    def _call(self, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - any tracker failure: warn, never stop training
            self.tracker = None
            warnings.warn(f"{self.name}: {type(exc).__name__}: {exc}; training goes on without {self.name} "
                          "(metrics.csv and checkpoints are unaffected)", RuntimeWarning, stacklevel=3)

    def write(self, row: dict[str, Any]) -> None:
        if self.tracker is not None:
            self._call(lambda: self.tracker.write(row))  # type: ignore[union-attr]

    def close(self, checkpoint: Path | None) -> None:
        if self.tracker is not None:
            self._call(lambda: self.tracker.close(checkpoint))  # type: ignore[union-attr]
            self.tracker = None


class Trackers:
    """The run's trackers, written and closed together."""

    def __init__(self, trackers: list[Guarded]) -> None:
        self.trackers = trackers

    def write(self, row: dict[str, Any]) -> None:
        for tracker in self.trackers:
            tracker.write(row)

    def close(self, checkpoint: Path | None) -> None:
        for tracker in self.trackers:
            tracker.close(checkpoint)


def require_trackers(config: Any) -> None:
    """``MissingExtraError`` for a tracker switched on in ``[logging]`` whose package is absent."""
    for key, module in (("mlflow", "mlflow"), ("wandb", "wandb")):
        if getattr(config, key):
            try:
                __import__(module)
            except ImportError as exc:
                raise MissingExtraError(f"[logging] {key} = true", key, module) from exc


def open_trackers(config: Any, run_dir: Path, pipeline_text: str) -> Trackers:
    """The trackers ``[logging]`` asks for (none: an empty ``Trackers``)."""
    found = []
    if config.mlflow:
        from harl.logging.mlflow_log import MLflowTracker

        found.append(Guarded("mlflow", lambda: MLflowTracker(config, run_dir, pipeline_text)))
    if config.wandb:
        from harl.logging.wandb_log import WandbTracker

        found.append(Guarded("wandb", lambda: WandbTracker(config, run_dir, pipeline_text)))
    return Trackers(found)
