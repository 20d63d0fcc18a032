"""harl.fs: a full disk or a read-only file system ends a run with one clear paragraph, and the
newest complete checkpoint survives.  The real cases mount a small tmpfs (root and mount(2)
needed, else skipped); the others make the write itself fail."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import harl.rundir.checkpoint
from harl.cli import main
from harl.rundir.checkpoint import list_checkpoints, load_checkpoint
from tests.fakes.bad_env import write_pipeline


def mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs at tmp_path/disk, unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    done = mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and mount(2)): {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def train(pipeline: Path, run_dir: Path) -> int:
    return main(["train", str(pipeline), "--run-dir", str(run_dir)])


def fill(disk: Path) -> None:
    """Write until the file system is full."""
    with (disk / "filler").open("wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def longer(run_dir: Path, steps: int) -> None:
    path = run_dir / "pipeline.toml"
    path.write_text(path.read_text().replace("total_env_steps = 40\n", f"total_env_steps = {steps}\n"))


class TestRealDisk:
    def test_disk_full_keeps_the_newest_checkpoint(self, tmpfs: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
        """The disk fills during a run: exit 2, which file, "the disk is full", the checkpoint of iteration 2
        intact; after freeing space the run resumes."""
        run_dir = tmpfs / "run"
        assert train(write_pipeline(tmp_path / "p.toml"), run_dir) == 0
        newest = list_checkpoints(run_dir)[-1]
        longer(run_dir, 400)
        fill(tmpfs)
        assert main(["train", "--resume", str(run_dir)]) == 2
        err = capsys.readouterr().err
        assert "cannot write the" in err and ": the disk is full; the newest complete checkpoint, " \
               f"{newest}, is intact: free some space and continue with harl train --resume {run_dir}" in err
        assert "Traceback" not in err
        assert load_checkpoint(newest)["counters"]["iteration"] == 2
        (tmpfs / "filler").unlink()
        assert main(["train", "--resume", str(run_dir)]) == 0

    def test_read_only_file_system(self, tmpfs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The run's disk is remounted read-only: resume exits 2 naming the file and the reason; a new run
        there cannot make its directory."""
        pipeline = write_pipeline(tmp_path / "p.toml")
        run_dir = tmpfs / "run"
        assert train(pipeline, run_dir) == 0
        longer(run_dir, 400)
        assert mount("-o", "remount,ro", str(tmpfs)).returncode == 0
        assert main(["train", "--resume", str(run_dir)]) == 2
        err = capsys.readouterr().err
        assert f"harl: {run_dir / 'metrics.csv'}: cannot write the metrics: the file system is read-only" in err
        assert train(pipeline, tmpfs / "new") == 2
        assert capsys.readouterr().err == (
            f"harl: {tmpfs / 'new'}: cannot write the run directory: the file system is read-only; set "
            "logging.dir (or --run-dir) to a writable directory\n")


def test_checkpoint_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """A checkpoint write that hits ENOSPC (any machine): exit 2, no temp file left, older checkpoint kept."""
    run_dir = tmp_path / "run"
    assert train(write_pipeline(tmp_path / "p.toml"), run_dir) == 0
    longer(run_dir, 60)

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    assert main(["train", "--resume", str(run_dir)]) == 2
    newest = run_dir / "checkpoints" / "iter_0000002.pt"
    assert capsys.readouterr().err == (
        f"harl: {run_dir / 'checkpoints' / 'iter_0000003.pt'}: cannot write the checkpoint: the disk is full; "
        f"the newest complete checkpoint, {newest}, is intact: free some space and continue with harl train "
        f"--resume {run_dir}\n")
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["iter_0000001.pt", "iter_0000002.pt"]
    assert harl.rundir.checkpoint.list_checkpoints(run_dir)[-1] == newest


def fill_but(disk: Path, free: int) -> None:
    """Fill the file system, then give back ``free`` bytes (a few pages: room for metrics rows, not a checkpoint)."""
    fill(disk)
    filler = disk / "filler"
    os.truncate(filler, filler.stat().st_size - free)


class TestDiskFullInsideTorchSave:
    def test_real_tmpfs(self, tmpfs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                        monkeypatch: pytest.MonkeyPatch) -> None:
        """A tmpfs with room for metrics rows but not for a 52 KB checkpoint: torch's zip writer fails inside
        torch.save ("unexpected pos"); exit 2 with one paragraph, no traceback, one write attempt only, the
        newest checkpoint verified and loadable, no temp file left; after freeing space the run resumes."""
        run_dir = tmpfs / "run"
        assert train(write_pipeline(tmp_path / "p.toml"), run_dir) == 0
        newest = list_checkpoints(run_dir)[-1]
        longer(run_dir, 400)
        fill_but(tmpfs, 16384)
        calls = []
        save = torch.save
        monkeypatch.setattr(torch, "save", lambda *a, **k: (calls.append(1), save(*a, **k))[1])
        assert main(["train", "--resume", str(run_dir)]) == 2
        err = capsys.readouterr().err
        assert err == (f"harl: {run_dir / 'checkpoints' / 'iter_0000003.pt'}: cannot write the checkpoint: the disk "
                       f"is full; the newest complete checkpoint, {newest}, is intact: free some space and continue "
                       f"with harl train --resume {run_dir}\n")
        assert calls == [1]  # no second attempt on the way out
        assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["iter_0000001.pt", "iter_0000002.pt"]
        assert load_checkpoint(newest)["counters"]["iteration"] == 2
        (tmpfs / "filler").unlink()
        assert main(["train", "--resume", str(run_dir)]) == 0


def test_zip_writer_failure_in_a_run_is_written_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """torch.save failing as torch's zip writer does on a full disk (any machine): exit 2, "the disk is full",
    and torch.save is called once: neither the exit-save nor anything else writes again."""
    run_dir = tmp_path / "run"
    assert train(write_pipeline(tmp_path / "p.toml"), run_dir) == 0
    longer(run_dir, 100)
    calls = []

    def full(obj: object, f: object) -> None:
        calls.append(1)
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534") from None

    monkeypatch.setattr(torch, "save", full)
    assert main(["train", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "iter_0000003.pt: cannot write the checkpoint: the disk is full; the newest complete checkpoint, " in err
    assert "Traceback" not in err and calls == [1]
