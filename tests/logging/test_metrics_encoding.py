"""A metrics.csv that is not UTF-8 (saved from a spreadsheet in Latin-1, damaged) is one paragraph
naming the file, from harl.read_metrics and from harl compare / export-results (exit 2), never a
``UnicodeDecodeError``."""

from __future__ import annotations

from pathlib import Path

import pytest

import harl
from harl.cli import main
from harl.errors import CheckpointError
from harl.logging.csv_log import read_metrics
from tests.compare.synthetic import make_run


def latin1_run(root: Path) -> Path:
    run = make_run(root, "sequential", "ppo", 1, [1.0, 2.0, 3.0, 4.0])
    metrics = run / "metrics.csv"
    metrics.write_bytes(metrics.read_bytes().replace(b"train_return", b"train_return \xb0C"))
    return run


def test_read_metrics_names_the_file(tmp_path: Path) -> None:
    run = latin1_run(tmp_path)
    with pytest.raises(CheckpointError) as info:
        read_metrics(run / "metrics.csv")
    assert str(info.value).startswith(f"{run / 'metrics.csv'}: not a metrics file harl can read (byte ")
    assert "save it again as UTF-8 CSV" in str(info.value)
    with pytest.raises(harl.HarlError):
        harl.read_metrics(run)


def test_export_results_and_compare_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = latin1_run(tmp_path / "runs")
    assert main(["export-results", str(tmp_path / "runs"), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"harl: {run / 'metrics.csv'}: not a metrics file harl can read") and "Traceback" not in err
    pytest.importorskip("rliable")
    assert main(["compare", str(tmp_path / "runs"), "--out", str(tmp_path / "c"), "--no-figures"]) == 2
    assert capsys.readouterr().err.startswith(f"harl: {run / 'metrics.csv'}: not a metrics file harl can read")
