"""harl.compare.command: the options and handlers that harl compare / export-results register."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from rich.console import Console

from harl.compare.command import add_compare_arguments, add_export_arguments, cmd_compare, cmd_export_results
from harl.errors import HarlError
from tests.compare.helpers import needs_rliable
from tests.compare.synthetic import two_algorithms


def parse(add, argv: list[str]) -> argparse.Namespace:  # noqa: ANN001
    parser = argparse.ArgumentParser()
    add(parser)
    return parser.parse_args(argv)


@needs_rliable
def test_compare(tmp_path: Path) -> None:
    """harl compare SWEEP --bounds ... --label ...: the table in the terminal, files in --out."""
    sweep = two_algorithms(tmp_path, seeds=3)
    args = parse(add_compare_arguments, [str(sweep), "--out", str(tmp_path / "c"), "--reps", "200",
                                         "--bounds", "simple_spread=-100,-50", "--no-figures"])
    console = Console(record=True, width=200)
    assert cmd_compare(args, console) == 0
    text = console.export_text()
    assert "optimality gap" in text and "normalised per task" in text
    assert (tmp_path / "c" / "results.md").is_file() and not list((tmp_path / "c").glob("*.png"))


def test_export(tmp_path: Path) -> None:
    """harl export-results SWEEP --out FILE --label DIR=NAME renames the runs under DIR."""
    sweep = two_algorithms(tmp_path, seeds=1)
    args = parse(add_export_arguments, [str(sweep), "--out", str(tmp_path / "r.json"), "--label",
                                        f"{sweep}=ours"])
    console = Console(record=True, width=200)
    assert cmd_export_results(args, console) == 0
    assert f"wrote {tmp_path / 'r.json'}: 2 runs in marl-eval's JSON" in console.export_text()


def test_bad_label(tmp_path: Path) -> None:
    """--label without = says what it expects."""
    args = parse(add_export_arguments, [str(tmp_path), "--out", "x.json", "--label", "ours"])
    with pytest.raises(HarlError) as info:
        cmd_export_results(args, Console())
    assert str(info.value) == "--label ours: expected DIR=NAME, e.g. --label runs/ablation=HAPPO-no-clip"
