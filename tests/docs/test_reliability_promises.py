"""docs/reliability.md's promises on bad inputs each name the test that holds them: every test named
there exists (a renamed or deleted test would leave a promise unheld)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_every_promise_names_a_test_that_exists() -> None:
    text = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    section = text[text.index("## Promises on bad inputs"):]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| promise")]
    assert len(rows) >= 16
    for row in rows:
        cell = row.rstrip(" |").rsplit(" | ", 1)[1]
        names = re.findall(r"`([^`]+)`", cell)
        assert names, row
        source = ""
        for name in names:
            if name.startswith("tests/"):
                path, _, rest = name.partition("::")
                assert (ROOT / path).is_file(), name
                source = (ROOT / path).read_text(encoding="utf-8")
                parts = rest.split("::") if rest else []
            else:
                parts = [name]
            for part in parts:
                kind = "class" if part.startswith("Test") else "def"
                assert re.search(rf"^\s*{kind} {re.escape(part)}\b", source, re.M), f"{name} in: {row}"
