"""``harl export --out``: a file, or a path under a file, is refused in one paragraph (exit 2)
before the run is opened; MAT's ONNX refusal comes before any missing package."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harl.cli import main
from harl.export import check_out


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
def test_out_that_is_a_file(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    taken = tmp_path / "model.pt"
    taken.write_bytes(b"mine")
    assert main(["export", str(tmp_path / "run"), "--format", fmt, "--out", str(taken)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err == (f"harl: --out {taken}: is a file; the export writes agent<i> files and policy.json into a folder: "
                   "pass a new folder (or an existing one) for --out")
    assert taken.read_bytes() == b"mine"


def test_out_under_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taken = tmp_path / "model.pt"
    taken.write_bytes(b"mine")
    assert main(["export", str(tmp_path / "run"), "--format", "torchscript", "--out", str(taken / "sub" / "x")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith(f"harl: --out {taken / 'sub' / 'x'}: cannot be made: {taken} is a file, not a folder;")


def test_a_folder_new_or_there_is_fine(tmp_path: Path) -> None:
    check_out(tmp_path)
    check_out(tmp_path / "new" / "deeper")


def test_mat_onnx_is_refused_before_asking_for_onnx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Without onnx installed, a MAT run's ONNX export says MAT cannot be ONNX, not "install harl[onnx]"."""
    from tests.mat.test_export import tiny_run

    run = tiny_run(tmp_path, "mat", False)
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert main(["export", str(run), "--format", "onnx", "--out", str(tmp_path / "onnx")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "harl[onnx]" not in err and "use --format torchscript" in err and err.startswith(f"harl: {run}: MAT's")
    assert not (tmp_path / "onnx").exists()
