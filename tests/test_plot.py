"""harl plot's numbers: trailing-mean smoothing and the seeds' band, computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from harl.errors import HarlError
from harl.plot import band, plot, smooth


def test_smooth_is_a_trailing_mean():
    y = np.array([0.0, 2.0, 4.0, 6.0, 8.0])
    np.testing.assert_allclose(smooth(y, 3), [0.0, 1.0, 2.0, 4.0, 6.0])
    np.testing.assert_allclose(smooth(y, 1), y)
    np.testing.assert_allclose(smooth(y, 10), [0.0, 1.0, 2.0, 3.0, 4.0])


def test_band_of_two_seeds_on_shared_steps():
    x = np.array([1.0, 2.0])
    steps, mean, std = band([(x, np.array([1.0, 3.0])), (x, np.array([3.0, 7.0]))])
    np.testing.assert_allclose(steps, x)
    np.testing.assert_allclose(mean, [2.0, 5.0])
    np.testing.assert_allclose(std, [1.0, 2.0])


def test_smooth_below_one_is_refused(tmp_path):
    (tmp_path / "pipeline.toml").write_text('[run]\nname = "r"\nseed = 1\n')
    (tmp_path / "metrics.csv").write_text("env_steps,train_return\n10,1.0\n")
    with pytest.raises(HarlError, match=r"--smooth 0: expected a number of points, 1 or more"):
        plot([tmp_path], "train_return", tmp_path / "x.png", window=0)


def test_a_metrics_file_that_is_not_utf8_is_named(tmp_path, capsys):
    """``harl plot`` of a run whose metrics.csv was saved as latin-1 (a spreadsheet's "é") exits 2 naming
    the file, not with a bare UnicodeDecodeError."""
    from harl.cli import main
    (tmp_path / "pipeline.toml").write_text('[run]\nname = "r"\nseed = 1\n', encoding="utf-8")
    (tmp_path / "metrics.csv").write_bytes("env_steps,train_return,note\n10,1.0,café\n".encode("latin-1"))
    assert main(["plot", str(tmp_path), "--out", str(tmp_path / "x.png")]) == 2
    captured = capsys.readouterr()
    assert str(tmp_path / "metrics.csv") in captured.err + captured.out
    assert "not UTF-8" in captured.err + captured.out
