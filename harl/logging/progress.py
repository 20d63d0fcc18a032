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


class StageTimes:
    """Seconds spent in each part of the iteration since the run (or its resume) started."""

    PARTS = ("collect", "update", "evaluate")

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(self.PARTS, 0.0)

    def add(self, collect: float, update: float, evaluate: float) -> None:
        for part, seconds in zip(self.PARTS, (collect, update, evaluate)):
            self.seconds[part] += seconds

    def shares(self) -> str:
        """``collect 61% · update 37% · eval 2%`` (empty before any time was measured)."""
        total = sum(self.seconds.values())
        if total <= 0:
            return ""
        names = {"evaluate": "eval"}
        return " · ".join(f"{names.get(part, part)} {100 * seconds / total:.0f}%"
                          for part, seconds in self.seconds.items())


class ProgressView:
    """Shows env steps / total, env-steps/s, ETA, iteration, last train and eval returns,
    and where the time goes (collect / update / evaluate shares).

    On a terminal: a live rich bar.  Otherwise (output redirected to a file, a batch job):
    a plain line every ``log_every`` iterations and after each evaluation.  ``enabled=False``
    (``harl train --quiet`` or ``[logging] progress = false``) shows neither.
    """

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
                TextColumn("[dim]{task.fields[shares]}"),
                console=self.console,
                refresh_per_second=4,
            )
            self.task = self.progress.add_task("train", total=total_steps, completed=done_steps,
                                               iteration=0, sps="-", train="-", eval="-", shares="")
            self.progress.start()

    def update(self, row: dict[str, Any], eval_return: float | None, shares: str = "") -> None:
        """Show one metrics row; ``shares`` is ``StageTimes.shares()``."""
        fields = dict(iteration=row["iteration"], sps=f"{row['steps_per_s']:.0f}",
                      train=_fmt(row.get("train_return")), eval=_fmt(eval_return), shares=shares)
        if self.progress is not None:
            self.progress.update(self.task, completed=row["env_steps"], **fields)
        elif self.plain and (row["iteration"] % self.log_every == 0 or row.get("eval_return") is not None):
            self.console.print(
                f"it {fields['iteration']}  env steps {row['env_steps']:,}  {fields['sps']} steps/s  "
                f"train {fields['train']}  eval {fields['eval']}" + (f"  ({shares})" if shares else ""),
                highlight=False, markup=False,
            )

    def message(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
