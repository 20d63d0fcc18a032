"""TensorBoard: every numeric ``metrics.csv`` column as a scalar against env steps.

``[logging.tensorboard]`` (or the shorthand ``[logging] tensorboard = true``) writes event files into the run directory, so
``tensorboard --logdir runs`` shows every run under its directory name.  Tags group the
columns: ``agent<i>_<name>`` becomes ``agent<i>/<name>``, ``train_*`` and ``eval_*``
become ``train/*`` and ``eval/*``, the run's counters and clocks go under ``run/`` and
everything else the updater reports under ``update/``.  Text columns (``agent_order``)
and the step axis itself (``env_steps``) are not scalars.

TensorBoard is an optional extra (``pip install "harl[tensorboard]"``).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from harl.errors import MissingExtraError
from harl.logging.sink import SinkContext, register_sink

_AGENT = re.compile(r"^(agent\d+)_(.+)$")
_RUN_COLUMNS = {"iteration", "episodes", "wall_time", "steps_per_s"}
_GROUPS = ("train", "eval")


def require_tensorboard() -> None:
    """Raise ``MissingExtraError`` unless the tensorboard package can be imported."""
    try:
        import tensorboard  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("[logging.tensorboard]", "tensorboard", "tensorboard") from exc


def tag_of(column: str) -> str:
    """The TensorBoard tag of a metrics.csv column (see the module docstring)."""
    found = _AGENT.match(column)
    if found:
        return f"{found.group(1)}/{found.group(2)}"
    if column in _RUN_COLUMNS:
        return f"run/{column}"
    group, sep, rest = column.partition("_")
    if sep and group in _GROUPS:
        return f"{group}/{rest}"
    return f"update/{column}"


@attrs.frozen
class TensorBoardConfig:
    """``[logging.tensorboard]``: every numeric metric as a TensorBoard scalar in the run directory
    (pip install "harl[tensorboard]"); the table has no keys yet."""


class TensorBoardSink:
    """Writes each metrics row as scalars at ``global_step = env_steps``.

    ``purge_step`` (a resumed run: the checkpoint's env steps + 1) hides events that the
    interrupted run wrote past its checkpoint, as ``metrics.csv`` drops those rows.
    """

    def __init__(self, run_dir: Path, purge_step: int | None = None) -> None:
        require_tensorboard()
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir), purge_step=purge_step)

    @classmethod
    def open(cls, config: TensorBoardConfig, context: SinkContext) -> TensorBoardSink:
        return cls(context.run_dir, purge_step=context.env_steps + 1 if context.iteration else None)

    def write(self, row: Mapping[str, Any]) -> None:
        step = int(row["env_steps"])
        for column, value in row.items():
            if column == "env_steps" or isinstance(value, (bool, str)) or value is None:
                continue
            if isinstance(value, numbers.Real) and math.isfinite(value):
                self.writer.add_scalar(tag_of(column), float(value), step)
        self.writer.flush()

    def close(self, checkpoint: Path | None = None) -> None:
        self.writer.close()


register_sink(TensorBoardConfig, TensorBoardSink.open, kind="tensorboard", require=require_tensorboard)
