"""docs/hooks/stage_reference.py: the generated stage reference shows what `harl stages` shows."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from harl.cli import main
from harl.config.dump import describe_stages, title

ROOT = Path(__file__).parent.parent
spec = importlib.util.spec_from_file_location("stage_reference", ROOT / "docs" / "hooks" / "stage_reference.py")
assert spec is not None and spec.loader is not None
stage_reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stage_reference)


def test_one_page_per_table_and_an_index() -> None:
    """One page per pipeline table, named after it, plus the index that links them all."""
    pages = stage_reference.pages()
    slots = list(dict.fromkeys(slot for slot, *_ in describe_stages()))
    assert list(pages) == ["reference/index.md", *(f"reference/{s.replace('.', '-')}.md" for s in slots)]
    for slot in slots:
        assert f"(`[{slot}]`)" not in pages["reference/index.md"]
        assert f"[`[{slot}]`]({slot.replace('.', '-')}.md)" in pages["reference/index.md"]


def test_every_key_on_its_page() -> None:
    """Each kind has a section, and each of its keys a row with type, default and meaning as `harl stages` lists them."""
    pages = stage_reference.pages()
    for slot, kind, _, keys in describe_stages():
        page = pages[stage_reference.page_name(slot)]
        if kind:
            assert f"## {kind}\n\n`{title(slot, kind)}`" in page
        for key, type_, default, doc in keys:
            row = f"| `{key}` | {stage_reference.cell(type_)} | `{stage_reference.cell(default)}` | {stage_reference.cell(doc)} |"
            assert row in page, row


def test_pages_agree_with_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    """Every key `harl stages ppo` prints in the terminal is a row of the ppo section, in the same order."""
    assert main(["stages", "ppo"]) == 0
    printed = [line.split("│")[1].strip() for line in capsys.readouterr().out.splitlines()
               if line.startswith("│") and line.split("│")[1].strip()]
    page = stage_reference.pages()["reference/updater-objective.md"]
    start = page.index("## ppo")
    end = page.find("\n## ", start + 1)
    ppo = page[start:end if end != -1 else len(page)]
    assert printed == re.findall(r"^\| `(\w+)` \|", ppo, flags=re.M)


def test_cell_escapes_pipes() -> None:
    """A `|` inside a docstring would split the Markdown table row: it is escaped; line breaks fold."""
    assert stage_reference.cell("KL(old || new)\n  bound") == "KL(old \\|\\| new) bound"
