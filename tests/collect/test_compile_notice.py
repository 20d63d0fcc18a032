"""The compile time in the progress display: "compiling the collection step... 12 s"."""

from __future__ import annotations

import io

from rich.console import Console

from harl.logging.progress import ProgressView, show_activity
from harl.logging.progress_layout import ProgressLayout


def test_live_layout_shows_the_activity_and_its_seconds() -> None:
    """The live display's first figure is the step under way with its seconds so far; gone when over."""
    now = [100.0]
    layout = ProgressLayout(1000, 0, clock=lambda: now[0])
    layout.activity = ("compiling the collection step", 88.0)
    assert layout.fields(200)[1].plain == "compiling the collection step... 12 s"
    layout.activity = None
    assert all("compiling" not in f.plain for f in layout.fields(200))


def test_plain_view_prints_start_and_end() -> None:
    """A plain log (not a terminal) gets a line when the compile starts and one with its time when it ends."""
    out = io.StringIO()
    view = ProgressView(1000, 0, enabled=True, log_every=1, console=Console(file=out, width=200))
    try:
        show_activity("compiling the collection step")
        show_activity(None)
    finally:
        view.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "compiling the collection step..."
    assert lines[1].startswith("compiling the collection step: done in ") and lines[1].endswith(" s")
    show_activity("after close")  # a closed view hears nothing
    assert len(out.getvalue().splitlines()) == 2


def test_disabled_view_shows_nothing() -> None:
    out = io.StringIO()
    view = ProgressView(1000, 0, enabled=False, log_every=1, console=Console(file=out, width=200))
    show_activity("compiling the collection step")
    show_activity(None)
    view.close()
    assert out.getvalue() == ""
