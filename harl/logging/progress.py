"""The terminal view of a run: a rich progress bar, or plain lines when not a terminal."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def _fmt(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


class ProgressView:
    """Shows env steps / total, env-steps/s, ETA, iteration, last train and eval returns."""

    def __init__(self, total_steps: int, done_steps: int, enabled: bool, log_every: int,
                 console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.live = enabled and self.console.is_terminal
        self.plain = enabled and not self.live
        self.log_every = log_every
        self.progress: Progress | None = None
        if self.live:
            self.progress = Progress(
                TextColumn("[bold]it {task.fields[iteration]}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("env steps"),
                TaskProgressColumn(),
                TextColumn("{task.fields[sps]:>7} steps/s"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("train {task.fields[train]}  eval {task.fields[eval]}"),
                console=self.console,
                refresh_per_second=4,
            )
            self.task = self.progress.add_task("train", total=total_steps, completed=done_steps,
                                               iteration=0, sps="-", train="-", eval="-")
            self.progress.start()

    def update(self, row: dict[str, Any], eval_return: float | None) -> None:
        fields = dict(iteration=row["iteration"], sps=f"{row['steps_per_s']:.0f}",
                      train=_fmt(row.get("train_return")), eval=_fmt(eval_return))
        if self.progress is not None:
            self.progress.update(self.task, completed=row["env_steps"], **fields)
        elif self.plain and (row["iteration"] % self.log_every == 0 or row.get("eval_return") is not None):
            self.console.print(
                f"it {fields['iteration']}  env steps {row['env_steps']:,}  {fields['sps']} steps/s  "
                f"train {fields['train']}  eval {fields['eval']}", highlight=False
            )

    def message(self, text: str) -> None:
        self.console.print(text, highlight=False)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
