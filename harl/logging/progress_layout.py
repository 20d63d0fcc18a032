"""The live progress display's layout: every figure whole, at any terminal width from 40 up.

The first field is the bar line, ``it 12 ━━━━━━╸────────   24%   48,000/200,000 env steps``
(the bar stretches between 10 and 40 columns).  The figures follow: steps/s, elapsed time,
ETA, the last train and eval returns, the time shares.  Where all of it fits, it is one line
(200 columns); otherwise the bar line stands alone and the figures are packed onto the lines
below, wrapped *between* fields, never inside one (120 columns: one line of figures; 80: two).
Where the env steps do not fit beside a 10-column bar (under ~55 columns with a 10M budget),
they become the first figure.

It is laid out again at every refresh, for the console's width then, so a resized terminal
gets the layout of its new width; ``ReflowingLiveRender`` erases the previous frame as a
narrowed terminal shows it (its long lines re-wrapped onto more rows), so none of it stays.  Styles are bold, dim and the terminal's own green: no
fixed colour and no background, so light and dark themes both read it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

from rich.console import Console, ConsoleOptions, RenderResult
from rich.control import Control
from rich.live_render import LiveRender
from rich.segment import ControlType
from rich.text import Text

GAP = "  "
"""Between two fields on a line."""
BAR_WIDTH = (10, 40)
"""The bar's narrowest and widest."""


def clock_time(seconds: float | None) -> str:
    """``1:02:03`` (hours unpadded), or ``-`` when unknown."""
    if seconds is None:
        return "-"
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def bar(fraction: float, width: int) -> Text:
    """``━━━━━╸─────``: heavy (green) for the part done, thin (dim) for the rest, so the bar
    reads in colour and without (``NO_COLOR``, a dumb terminal)."""
    halves = round(2 * width * min(1.0, max(0.0, fraction)))
    done, half = divmod(halves, 2)
    text = Text("━" * done + "╸" * half, style="green")
    text.append("─" * (width - done - half), style="dim")
    return text


def pack(fields: Iterable[Text], width: int) -> list[Text]:
    """Fields into lines no wider than ``width``, breaking only between fields."""
    lines: list[Text] = []
    for field in fields:
        if lines and lines[-1].cell_len + len(GAP) + field.cell_len <= width:
            lines[-1].append(GAP)
            lines[-1].append_text(field)
        else:
            lines.append(field.copy())
    return lines


class ProgressLayout:
    """What the live view shows; ``update`` it, and rich renders it at the console's width."""

    def __init__(self, total_steps: int, done_steps: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = max(1, total_steps)
        self.done = self.start_done = done_steps
        self.clock = clock
        self.start = clock()
        self.iteration = 0
        self.steps_per_s = "-"
        self.train = self.eval = "-"
        self.shares = ""
        self.activity: tuple[str, float] | None = None
        """A long step under way and when it began (``ProgressView.activity``): shown with its seconds."""
        self.last_widths: list[int] = []
        """The width of each line of the last frame."""

    def update(self, iteration: int, env_steps: int, steps_per_s: float, train: str, eval_: str,
               shares: str) -> None:
        self.iteration, self.done = iteration, env_steps
        self.steps_per_s = f"{steps_per_s:,.0f}"
        self.train, self.eval, self.shares = train, eval_, shares

    def eta(self) -> float | None:
        """Seconds left at the average rate since this view (the run or its resume) started."""
        elapsed, done = self.clock() - self.start, self.done - self.start_done
        if done <= 0 or elapsed <= 0:
            return None
        return max(0, self.total - self.done) * elapsed / done

    def _steps(self, pad: bool) -> Text:
        total = f"{self.total:,}"
        done = f"{self.done:,}".rjust(len(total) if pad else 0)  # padded beside the bar: it keeps its width
        return Text.assemble((done, "bold"), f"/{total} env steps")

    def _bar(self, width: int) -> tuple[Text, Text]:
        """The bar field (``it N ━━╸── P%``, with the env steps where they fit) and the steps field."""
        head = Text.assemble(("it ", "dim"), (str(self.iteration), "bold"), " ")
        percent = Text(f" {min(100, 100 * self.done // self.total):>3d}%", style="bold")
        steps = self._steps(pad=True)
        room = width - head.cell_len - percent.cell_len - len(GAP) - steps.cell_len
        with_steps = room >= BAR_WIDTH[0]
        if not with_steps:
            room = width - head.cell_len - percent.cell_len
        field = head.copy()
        field.append_text(bar(self.done / self.total, max(1, min(BAR_WIDTH[1], room))))
        field.append_text(percent)
        if with_steps:
            field.append(GAP)
            field.append_text(steps)
        return field, (Text() if with_steps else self._steps(pad=False))

    def fields(self, width: int) -> list[Text]:
        """The fields in display order (the bar first); empty ones are left out."""
        first, steps = self._bar(width)
        figures = [
            steps,
            Text.assemble((self.steps_per_s, "bold"), " steps/s"),
            Text.assemble(("elapsed ", "dim"), clock_time(self.clock() - self.start)),
            Text.assemble(("ETA ", "dim"), (clock_time(self.eta()), "bold")),
            Text.assemble(("train ", "dim"), (self.train, "bold")),
            Text.assemble(("eval ", "dim"), (self.eval, "bold")),
            Text(self.shares, style="dim"),
        ]
        if self.activity is not None:
            text, began = self.activity
            figures.insert(0, Text.assemble((f"{text}... {self.clock() - began:.0f} s", "bold yellow")))
        return [first, *(f for f in figures if f.plain)]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        first, *figures = self.fields(width)
        one_line = first.cell_len + sum(len(GAP) + f.cell_len for f in figures) <= width
        lines = pack([first, *figures], width) if one_line else [first, *pack(figures, width)]
        self.last_widths = [line.cell_len for line in lines]
        yield from lines

    def rows_at(self, width: int) -> int:
        """How many terminal rows the last frame takes once the terminal is ``width`` wide."""
        return sum(max(1, math.ceil(w / max(1, width))) for w in self.last_widths)


class ReflowingLiveRender(LiveRender):
    """rich's live region, but moving up over the rows the last frame takes *now*: after the
    terminal narrows, its lines are re-wrapped onto more rows than were printed."""

    def __init__(self, layout: ProgressLayout, console: Console) -> None:
        super().__init__(layout)
        self.layout, self.console = layout, console

    def position_cursor(self) -> Control:
        if self._shape is None:
            return Control()
        rows = max(self._shape[1], self.layout.rows_at(self.console.width))
        return Control(ControlType.CARRIAGE_RETURN, (ControlType.ERASE_IN_LINE, 2),
                       *(((ControlType.CURSOR_UP, 1), (ControlType.ERASE_IN_LINE, 2)) * (rows - 1)))
