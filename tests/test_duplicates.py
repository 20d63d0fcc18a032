"""The duplicate-code gate (``tests/duplicate_check.py``): harl/ passes it, and a function body
pasted into a second module fails it, so the gate would catch the next copy."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.duplicate_check import MIN_LINES, command

pytest.importorskip("pylint", reason="the duplicate-code gate needs pylint (the dev extra)")
pytestmark = pytest.mark.extra("dev")  # CI's step 2 (-m extra) installs pylint and runs these

ROOT = Path(__file__).parents[1]
SOURCE = "harl/tune/study.py"
"""Where the pasted function comes from: ``open_study``, a body of a dozen lines of logic."""
TARGET = "harl/sweep/report.py"


def _check(cwd: Path, paths: tuple[str, ...] = ("harl",)) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(list(paths)), cwd=cwd, capture_output=True, text=True, timeout=600)


def test_harl_has_no_copied_logic() -> None:
    result = _check(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_pasted_function_body_fails(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "harl", tmp_path / "harl", ignore=shutil.ignore_patterns("__pycache__"))
    text = (ROOT / SOURCE).read_text(encoding="utf-8")
    function = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "open_study")
    body = function.body[1:]  # past its docstring
    assert body[-1].end_lineno - body[0].lineno + 1 >= max(8, MIN_LINES)
    pasted = ast.get_source_segment(text, function).replace("def open_study(", "def another_study(")
    target = tmp_path / TARGET
    target.write_text(target.read_text(encoding="utf-8") + "\n\n" + pasted + "\n", encoding="utf-8")
    result = _check(tmp_path, ("harl/tune", "harl/sweep"))  # the two folders: a second, not fifteen
    assert result.returncode != 0
    assert "harl.tune.study" in result.stdout and "harl.sweep.report" in result.stdout, result.stdout
