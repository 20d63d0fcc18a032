"""The stamped folder name every sweep and study directory takes (``harl.rundir.naming``)."""

from __future__ import annotations

import re
from pathlib import Path

from harl.rundir.naming import stamped


def test_a_name_taken_in_the_same_second_gets_a_counter(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("harl.rundir.naming.time.strftime", lambda _: "20260101-120000")
    first = stamped(tmp_path, "happo-sweep")
    assert first == tmp_path / "happo-sweep-20260101-120000" and not first.exists()
    first.mkdir()
    second = stamped(tmp_path, "happo-sweep")
    assert second.name == "happo-sweep-20260101-120000-2"
    second.mkdir()
    assert stamped(tmp_path, "happo-sweep").name == "happo-sweep-20260101-120000-3"


def test_the_stamp_is_date_then_time(tmp_path: Path) -> None:
    assert re.fullmatch(r"run-\d{8}-\d{6}", stamped(tmp_path, "run").name)
