"""Every feature is reachable from the README: each command in its command list or beside it, and
every documentation page within two clicks (README -> page -> page)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
GENERATED = {"docs/compare-spread/results.md"}
"""Tables a command wrote (harl compare's), shown by the page that made them."""


def links(page: Path) -> set[Path]:
    found = set()
    for target in re.findall(r"\]\(([^)#\s]+)", page.read_text(encoding="utf-8")):
        path = (page.parent / target).resolve()
        if not target.startswith(("http:", "https:")) and path.suffix == ".md" and path.is_file():
            found.add(path)
    return found


def test_every_page_is_two_clicks_from_the_readme() -> None:
    first = links(README)
    reached = first.union(*(links(page) for page in first))
    pages = {p.resolve() for p in (ROOT / "docs").rglob("*.md")}
    missing = sorted(str(p.relative_to(ROOT.resolve())) for p in pages - reached)
    assert [m for m in missing if m not in GENERATED] == []
    for page in ("docs/benchmarks.md", "docs/mat.md", "docs/teams.md", "docs/tune.md"):
        assert (ROOT / page).resolve() in first, f"{page} is linked from the README itself"


def test_every_command_and_the_opponent_option_are_in_the_readme(capsys: pytest.CaptureFixture[str]) -> None:
    from harl.cli import main

    main([])
    commands = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    text = README.read_text(encoding="utf-8")
    assert {"suite", "crossplay", "tune"} <= set(commands)
    assert [c for c in commands if f"harl {c} " not in text and f"`{c}`" not in text] == []
    assert "--opponent runs/" in text and "harl suite benchmarks/suites/" in text
