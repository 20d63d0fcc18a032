"""The driver's record of each trial, and the display that follows them."""

from __future__ import annotations

import csv
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import attrs
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harl.sweep.grid import Trial, point_label
from harl.sweep.trial import checkpoint_iteration


@attrs.define(eq=False)
class TrialState:
    trial: Trial
    run_dir: Path
    spec: Any
    """The trial's validated PipelineSpec (its resources, its budget)."""
    status: str = "not started"
    """not started, waiting, running, finished, stopped or failed."""
    message: str = ""
    retries: int = 0
    started_at: list[int] = attrs.Factory(list)
    """The iteration each attempt started from: [0] ran once from scratch; [0, 3]: its worker
    died and the retry resumed from the checkpoint of iteration 3."""

    @property
    def label(self) -> str:
        point = point_label(self.trial.point)
        return f"seed {self.trial.seed}" + ("" if point == "-" else f" ({point})")

    def left_waiting(self) -> None:
        """The sweep stopped before this trial (re)started."""
        self.status = "stopped" if checkpoint_iteration(self.run_dir) else "not started"

    def died(self, why: str, max_retries: int, say: Callable[[str], Any]) -> bool:
        """Its worker died (killed, out of memory, node lost): True when it runs again, from
        its newest checkpoint; False (and failed) when no retry is left."""
        if self.retries >= max_retries:
            self.status = "failed"
            self.message = f"{why}; no retry left (--max-retries {max_retries})"
            say(f"{self.label}: {self.message}")
            return False
        self.retries += 1
        self.status = "waiting"
        say(f"{self.label}: {why}; retry {self.retries}/{max_retries} resumes at iteration "
            f"{checkpoint_iteration(self.run_dir)}")
        return True


def wrapped(console: Console, text: str, indent: str = "  ", width: int | None = None) -> str:
    """``text`` broken at spaces to the terminal's width (or ``width``), later lines indented by
    ``indent`` (a terminal broke a long line mid-word: "the running trials stop after their it" /
    "eration"); a word longer than a line (a path) stays whole, on its own line, for the reader to
    copy.  Off a terminal (a log, a pipe) the text stays one line, as grep finds it."""
    if not console.is_terminal:
        return text
    width = max(width or console.width, 20)
    return "\n".join(textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False,
                                   break_on_hyphens=False)) or text


def metrics_rows(run_dir: Path) -> list[dict[str, str]]:
    """A run's metrics.csv rows, as far as they are complete (a trial may be writing one as
    it is read, or may have died mid-row); [] when there is no file yet."""
    try:
        with (run_dir / "metrics.csv").open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, csv.Error, UnicodeDecodeError):
        return []
    while rows and (None in rows[-1].values() or not (rows[-1].get("env_steps") or "").isdigit()):
        rows.pop()
    return rows


def env_steps_so_far(run_dir: Path) -> int:
    """The env steps of the last complete row of a run's metrics.csv (0 if none yet)."""
    rows = metrics_rows(run_dir)
    return int(rows[-1]["env_steps"]) if rows else 0


class Display:
    """One progress bar per trial on a terminal; elsewhere a line per change of status."""

    def __init__(self, states: list[TrialState], console: Console, quiet: bool) -> None:
        self.console = console
        self.live = not quiet and console.is_terminal
        self.progress = Progress(TextColumn("{task.fields[label]}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("env steps  {task.fields[status]}"), TimeElapsedColumn(),
                                 console=console, disable=not self.live)
        self.tasks = {s: self.progress.add_task("", total=s.spec.run.total_env_steps, label=s.label,
                                                status=s.status) for s in states}

    def __enter__(self) -> Display:
        self.progress.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.progress.__exit__(exc_type, exc, traceback)

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False)

    def notice(self, text: str) -> None:
        """A sentence for the reader (the Ctrl-C notice): broken at spaces on a terminal (``wrapped``)."""
        self.console.print(wrapped(self.console, text), highlight=False, markup=False, soft_wrap=True)

    def update(self, state: TrialState) -> None:
        """Show its status (printed when it changed and there is no live display) and steps."""
        task = self.progress.tasks[self.tasks[state]]
        if task.fields["status"] != state.status and not self.live:
            self.say(f"{state.label}: {state.status}" + (f": {state.message}" if state.message else ""))
        self.progress.update(self.tasks[state], status=state.status, completed=env_steps_so_far(state.run_dir))
