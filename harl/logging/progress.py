"""The terminal view of a run: a rich progress bar, or plain lines when not a terminal."""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.live import Live

from harl.logging import headline
from harl.logging.progress_layout import ProgressLayout, ReflowingLiveRender


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


_OPEN: list[ProgressView] = []
"""The progress views on screen now (``show_activity`` reaches them)."""


def show_activity(text: str | None) -> None:
    """A long step under way, such as ``"compiling the collection step"``: the open views show it
    with its seconds so far (a plain log: a line when it starts and one when it ends); None: over."""
    for view in _OPEN:
        view.activity(text)


class ProgressView:
    """Shows env steps / total, env-steps/s, ETA, iteration, last train and eval returns,
    and where the time goes (collect / update / evaluate shares).

    On a terminal: a live rich display, whole at any width from 40 columns up (see
    ``harl.logging.progress_layout``).  Otherwise (output redirected to a file, a batch job):
    a plain line every ``log_every`` iterations and after each evaluation, one line however
    long (never wrapped at the console's width).  ``enabled=False``
    (``harl train --quiet`` or ``[logging] progress = false``) shows neither.
    """

    def __init__(self, total_steps: int, done_steps: int, enabled: bool, log_every: int,
                 console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.live = enabled and self.console.is_terminal
        self.plain = enabled and not self.live
        self.log_every = log_every
        self.layout = ProgressLayout(total_steps, done_steps)
        self.live_display: Live | None = None
        self._team_eval = ""
        """A teams run's last evaluation, each team's return (``harl.logging.headline``)."""
        self._activity: tuple[str, float] | None = None
        if enabled:
            _OPEN.append(self)
        if self.live:
            self.live_display = Live(self.layout, console=self.console, refresh_per_second=4)
            self.live_display._live_render = ReflowingLiveRender(self.layout, self.console)  # see its docstring
            self.live_display.start()

    def update(self, row: dict[str, Any], eval_return: float | None, shares: str = "") -> None:
        """Show one metrics row; ``shares`` is ``StageTimes.shares()``."""
        train, eval_ = _fmt(row.get("train_return")), _fmt(eval_return)
        teams = headline.train_returns(row)
        if teams:  # a teams run: each team's return, not the mean over sides that score against each other
            train = headline.show(teams)
            self._team_eval = headline.show(headline.eval_returns(row, "eval_")) or self._team_eval
            eval_ = self._team_eval if eval_return is not None and self._team_eval else eval_
        if self.live_display is not None:
            self.layout.update(row["iteration"], row["env_steps"], row["steps_per_s"], train, eval_, shares)
        elif self.plain and (row["iteration"] % self.log_every == 0 or row.get("eval_return") is not None):
            self.console.print(
                f"it {row['iteration']}  env steps {row['env_steps']:,}  {row['steps_per_s']:.0f} steps/s  "
                f"train {train}  eval {eval_}" + (f"  ({shares})" if shares else ""),
                highlight=False, markup=False, soft_wrap=True,  # one line in a log, however long
            )

    def message(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def activity(self, text: str | None) -> None:
        """``show_activity`` for this view: the live display's line, or a plain line at each end."""
        now = self.layout.clock()
        if self.live_display is not None:
            self.layout.activity = None if text is None else (text, now)
        elif self.plain and text is not None:
            self.message(f"{text}...")
        elif self.plain and self._activity is not None:
            self.message(f"{self._activity[0]}: done in {now - self._activity[1]:.1f} s")
        self._activity = None if text is None else (text, now)

    def close(self) -> None:
        if self in _OPEN:
            _OPEN.remove(self)
        if self.live_display is not None:
            self.live_display.stop()


def pack_clauses(clauses: Sequence[str], width: int, indent: str = "", continuation: str = "") -> list[str]:
    """``clauses`` joined by spaces into lines no wider than ``width``, breaking only between two
    clauses (so a clause, a path, is never cut; one wider than ``width`` stands alone).  Every
    line starts with ``indent``; every line but the last ends with ``continuation``."""
    lines: list[str] = []
    for clause in clauses:
        if lines and len(lines[-1]) + 1 + len(clause) + len(continuation) <= width:
            lines[-1] += " " + clause
        else:
            lines.append(indent + clause)
    return [line + continuation for line in lines[:-1]] + lines[-1:]


def _command(label: str, command: Sequence[str], width: int) -> list[str]:
    """``label command`` on one line if it fits; else the label alone and the command below it,
    indented, broken between its words with shell continuations (`` \\``) so it still pastes."""
    line = " ".join([label, *command])
    if len(line) <= width:
        return [line]
    return [label, *pack_clauses(command, width, indent="  ", continuation=" \\")]


def summary_lines(result: Any, width: int, resumable: bool = True) -> list[str]:
    """What ``harl train`` prints at the end of ``result`` (a ``harl.TrainResult``), in lines no wider than ``width`` (a path wider
    than that stands whole on its own line)::

        finished: 1,000 iterations, 1,000,000 env steps in 838 s;
        last evaluation return -64.08
        to train longer:
          harl train --resume runs/happo_mpe_spread/seed1 --set run.total_env_steps=N

    A stopped run (Ctrl-C, a signal, a callback) says ``stopped`` and, when ``resumable`` (it
    left a checkpoint), ``resume with: harl train --resume RUN``; a finished one says how to
    train it longer.  The first lines break after a ``;`` or, narrower, a ``,``."""
    c = result.counters
    clauses = [f"{'stopped' if result.interrupted else 'finished'}: {c.iteration} iterations,",
               f"{c.env_steps:,} env steps in {c.wall_time:.0f} s"]
    if result.last_eval is not None:
        clauses[-1] += ";"
        teams = headline.eval_returns(result.last_eval.metrics)
        clauses.append(f"last evaluation return {headline.show(teams) if teams else f'{result.last_eval.mean_return:.2f}'}")
    lines = pack_clauses(clauses, width)
    run = ["harl train --resume", shlex.quote(str(result.run_dir))]
    if result.interrupted and resumable:
        lines += _command("resume with:", run, width)
    elif not result.interrupted:
        lines += _command("to train longer:", [*run, "--set run.total_env_steps=N"], width)
    return lines
