"""docs/python-api.md's Python examples run, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_python_api_page_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ```python block of the page executes without error (a tiny budget; MPE needed)."""
    pytest.importorskip("mpe2", reason="the examples train on MPE (pip install harl[mpe])")
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "python-api.md").read_text(), re.S)
    assert len(blocks) >= 5
    (tmp_path / "pipelines").symlink_to(ROOT / "pipelines")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "python_api_page"}
    for block in blocks:
        exec(compile(block, "docs/python-api.md", "exec"), namespace)  # noqa: S102 - the page's own examples
