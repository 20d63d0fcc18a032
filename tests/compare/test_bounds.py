"""harl.compare.bounds: per-task (random, best) bounds from the command line and from files."""

from __future__ import annotations

from pathlib import Path

import pytest

from harl.compare.bounds import Bound, bound_for, load_bounds, parse_bounds
from harl.errors import HarlError


def test_parse() -> None:
    """TASK=RANDOM,BEST, with env/task allowed, normalises random to 0 and best to 1."""
    bounds = parse_bounds(["simple_spread=-180,-60", "mpe/simple_reference=-50,-10"])
    assert bounds["simple_spread"] == Bound(-180.0, -60.0)
    assert bounds["simple_spread"].normalise(-120) == pytest.approx(0.5)
    assert bound_for(bounds, "mpe", "simple_reference") == Bound(-50.0, -10.0)
    assert bound_for(bounds, "mpe", "other") is None


@pytest.mark.parametrize(("spec", "message"), [
    ("spread", "--bounds spread: expected TASK=RANDOM,BEST, e.g. --bounds simple_spread=-180,-60"),
    ("spread=1", "--bounds spread=1: expected TASK=RANDOM,BEST, e.g. --bounds simple_spread=-180,-60"),
    ("spread=a,1", "--bounds spread=a,1: expected two numbers, random and best, got 'a' and '1'"),
    ("spread=1,1", "--bounds spread=1,1: random (1) and best (1) must be finite and different")])
def test_parse_errors(spec: str, message: str) -> None:
    """A malformed --bounds says what was expected."""
    with pytest.raises(HarlError) as info:
        parse_bounds([spec])
    assert str(info.value) == message


def test_files(tmp_path: Path) -> None:
    """TOML tables and JSON pairs give the same bounds."""
    toml = tmp_path / "b.toml"
    toml.write_text('simple_spread = {random = -180, best = -60}\n"mpe/x" = [0, 1]\n', encoding="utf-8")
    json_file = tmp_path / "b.json"
    json_file.write_text('{"simple_spread": [-180, -60], "mpe/x": {"random": 0, "best": 1}}', encoding="utf-8")
    assert load_bounds(toml) == load_bounds(json_file) == {"simple_spread": Bound(-180, -60), "mpe/x": Bound(0, 1)}


def test_file_errors(tmp_path: Path) -> None:
    """A bad entry names the file and the task."""
    path = tmp_path / "b.toml"
    path.write_text("spread = 3\n", encoding="utf-8")
    with pytest.raises(HarlError) as info:
        load_bounds(path)
    assert str(info.value) == f"{path}: spread: expected {{random = R, best = B}} or [R, B], got 3"
