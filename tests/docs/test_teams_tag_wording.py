"""benchmarks/teams_tag.py speaks to its reader: its docstring (its --help) and what it prints name
the capture test and its bar, not a tracker's issue."""

from __future__ import annotations

import re
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "teams_tag.py"


def test_no_tracker_language() -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    assert re.findall(r"(?i)\bissues?\b", text) == []
    assert "at least twice as often" in text
