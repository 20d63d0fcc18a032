"""harl.rundir.checkpoint: atomic writes, pruning, finding the newest, clear load errors."""

from __future__ import annotations

import errno
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

import pytest
import torch

from harl.errors import CheckpointError, ResourceError
from harl.fs import atomic_write_bytes
from harl.rundir.checkpoint import (
    FORMAT_VERSION,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from harl.rundir.files import checkpoint_note, intact


class WriterFailed(Exception):
    pass


def half_writer(f: BinaryIO) -> None:
    f.write(b"half of a checkpoint")
    raise WriterFailed


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


class TestAtomicWrite:
    def test_complete_write(self, tmp_path: Path) -> None:
        """A write that succeeds leaves exactly the final file with all its bytes."""
        path = tmp_path / "ck" / "iter_0000001.pt"
        atomic_write_bytes(path, lambda f: f.write(b"complete"))
        assert path.read_bytes() == b"complete"
        assert names(path.parent) == ["iter_0000001.pt"]

    def test_failed_write_leaves_nothing(self, tmp_path: Path) -> None:
        """A writer that raises mid-way leaves no temp file and no file under the final name."""
        path = tmp_path / "iter_0000001.pt"
        with pytest.raises(WriterFailed):
            atomic_write_bytes(path, half_writer)
        assert names(tmp_path) == []

    def test_failed_write_keeps_the_old_file(self, tmp_path: Path) -> None:
        """A failed rewrite of an existing name keeps the old, complete file."""
        path = tmp_path / "iter_0000001.pt"
        path.write_bytes(b"old and complete")
        with pytest.raises(WriterFailed):
            atomic_write_bytes(path, half_writer)
        assert path.read_bytes() == b"old and complete"
        assert names(tmp_path) == ["iter_0000001.pt"]

    def test_interrupt_leaves_nothing(self, tmp_path: Path) -> None:
        """Ctrl-C during the write (KeyboardInterrupt) is cleaned up too."""
        def interrupted(f: BinaryIO) -> None:
            f.write(b"x")
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            atomic_write_bytes(tmp_path / "iter_0000001.pt", interrupted)
        assert names(tmp_path) == []


class TestSaveAndPrune:
    def test_keep_prunes_the_oldest(self, tmp_path: Path) -> None:
        """With keep=2, five saves leave the two newest checkpoints."""
        for i in range(1, 6):
            save_checkpoint(tmp_path, i, {"i": i}, keep=2)
        assert [p.name for p in list_checkpoints(tmp_path)] == ["iter_0000004.pt", "iter_0000005.pt"]

    def test_saved_state_loads_back(self, tmp_path: Path) -> None:
        """load_checkpoint returns the saved state plus the format tag."""
        path = save_checkpoint(tmp_path, 7, {"counters": {"iteration": 7}}, keep=3)
        assert path == tmp_path / "checkpoints" / "iter_0000007.pt"
        assert load_checkpoint(path) == {"format": FORMAT_VERSION, "counters": {"iteration": 7}}

    def test_only_dead_writers_temp_files_are_removed(self, tmp_path: Path) -> None:
        """The next save removes the temp file of a writer killed mid-write on this host, and leaves a live
        writer's (another process writing into the same folder), another host's and unknown ones alone."""
        folder = tmp_path / "checkpoints"
        folder.mkdir()
        host = socket.gethostname()
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)
        live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            left = [f".iter_0000001.pt.{host}-{live.pid}.k3j2h1g0.tmp", f".iter_0000001.pt.elsewhere-{dead.stdout.strip()}"
                    ".a1b2c3d4.tmp", ".iter_0000001.pt.abc123.tmp", f".metrics.csv.{host}-{dead.stdout.strip()}.x1.tmp"]
            for name in [*left, f".iter_0000001.pt.{host}-{dead.stdout.strip()}.q9w8e7r6.tmp"]:
                (folder / name).write_bytes(b"mid-write")
            save_checkpoint(tmp_path, 2, {}, keep=3)
            assert names(folder) == sorted([*left, "iter_0000002.pt"])
        finally:
            live.kill()
            live.wait()

    def test_own_temp_file_is_named_after_this_process(self, tmp_path: Path) -> None:
        """While torch.save writes, the temp file carries this host and PID (what the cleanup reads)."""
        seen: list[str] = []

        def spy(f: BinaryIO) -> None:
            seen.extend(p.name for p in tmp_path.iterdir())
            f.write(b"x")

        atomic_write_bytes(tmp_path / "iter_0000001.pt", spy)
        assert len(seen) == 1 and seen[0].startswith(f".iter_0000001.pt.{socket.gethostname()}-{os.getpid()}.")


class TestDiskFullInsideTorchSave:
    """torch's zip writer reports a full disk as a RuntimeError: it must end as the same ResourceError."""

    def zip_writer_fails(self, monkeypatch: pytest.MonkeyPatch, with_os_error: bool) -> None:
        def save(obj: object, f: BinaryIO) -> None:
            f.write(b"the first bytes")
            try:
                if with_os_error:
                    raise OSError(errno.ENOSPC, "No space left on device")
                raise RuntimeError("basic_ios::clear: iostream error")
            except (OSError, RuntimeError):
                raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598") from None

        monkeypatch.setattr(torch, "save", save)

    @pytest.mark.parametrize("with_os_error", [True, False])
    def test_is_a_resource_error_naming_the_intact_checkpoint(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               with_os_error: bool) -> None:
        """"unexpected pos" (with the OSError behind it, or without one): "the disk is full", the newest
        checkpoint named, no temp file left."""
        older = save_checkpoint(tmp_path, 1, {"i": 1}, keep=3)
        self.zip_writer_fails(monkeypatch, with_os_error)
        with pytest.raises(ResourceError) as caught:
            save_checkpoint(tmp_path, 2, {"i": 2}, keep=3)
        assert str(caught.value) == (
            f"{tmp_path / 'checkpoints' / 'iter_0000002.pt'}: cannot write the checkpoint: the disk is full; the "
            f"newest complete checkpoint, {older}, is intact: free some space and continue with harl train "
            f"--resume {tmp_path}")
        assert names(tmp_path / "checkpoints") == ["iter_0000001.pt"]

    def test_other_runtime_errors_pass(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A RuntimeError that is not the zip writer's (a bug) is not dressed up as a full disk."""
        def save(obj: object, f: BinaryIO) -> None:
            raise RuntimeError("cannot pickle 'generator' object")

        monkeypatch.setattr(torch, "save", save)
        with pytest.raises(RuntimeError, match="cannot pickle"):
            save_checkpoint(tmp_path, 1, {}, keep=3)


class TestIntact:
    def test_a_damaged_newest_checkpoint_is_passed_over(self, tmp_path: Path) -> None:
        """The note after a failed write names the newest checkpoint that reads back whole, and the damaged newer one."""
        older = save_checkpoint(tmp_path, 1, {"w": torch.arange(1000.0)}, keep=3)
        newer = save_checkpoint(tmp_path, 2, {"w": torch.arange(1000.0)}, keep=3)
        assert intact(older) and intact(newer)
        data = bytearray(newer.read_bytes())
        data[data.index(struct.pack("<f", 500.0))] ^= 0xFF  # one flipped bit in a tensor's bytes
        newer.write_bytes(bytes(data))
        assert not intact(newer)
        assert checkpoint_note(tmp_path) == (
            f"; the newest complete checkpoint, {older}, is intact (newer ones do not read back whole: {newer}): "
            f"free some space and continue with harl train --resume {tmp_path}")

    def test_truncated_and_empty_files(self, tmp_path: Path) -> None:
        """A truncated archive, an empty file and a missing one are not intact; with none left, the note says so."""
        path = save_checkpoint(tmp_path, 1, {"w": torch.zeros(100)}, keep=3)
        path.write_bytes(path.read_bytes()[:-200])
        assert not intact(path) and not intact(tmp_path / "nothing.pt")
        (tmp_path / "empty.pt").write_bytes(b"")
        assert not intact(tmp_path / "empty.pt")
        assert checkpoint_note(tmp_path) == (
            f"; none of this run's 1 checkpoints reads back whole (the newest is {path}): free some space and "
            "start the run again with harl train")


class TestLatest:
    def test_highest_iteration_wins(self, tmp_path: Path) -> None:
        """The newest checkpoint is the highest iteration, compared as numbers, not names."""
        folder = tmp_path / "checkpoints"
        folder.mkdir()
        for name in ["iter_0000002.pt", "iter_10000000.pt", "iter_9999999.pt", "iter_0000010.pt"]:
            (folder / name).write_bytes(b"")
        assert latest_checkpoint(tmp_path) == folder / "iter_10000000.pt"

    def test_other_files_are_ignored(self, tmp_path: Path) -> None:
        """Temp files and unrelated names are not checkpoints."""
        folder = tmp_path / "checkpoints"
        folder.mkdir()
        for name in [".iter_0000009.pt.x.tmp", "iter_0000009.pt.bak", "notes.txt", "iter_0000003.pt"]:
            (folder / name).write_bytes(b"")
        assert list_checkpoints(tmp_path) == [folder / "iter_0000003.pt"]

    def test_no_checkpoint(self, tmp_path: Path) -> None:
        """A run without checkpoints gets a message naming the folder and what to do."""
        with pytest.raises(CheckpointError) as info:
            latest_checkpoint(tmp_path)
        assert str(info.value) == (
            f"{tmp_path}: no checkpoint in {tmp_path / 'checkpoints'}; a run writes one every "
            "[checkpoint] every_iterations iterations and at its end, so this run stopped before its "
            f"first one: harl train --resume {tmp_path} starts it again from the beginning, in place"
        )


class TestLoadErrors:
    def test_garbage_bytes(self, tmp_path: Path) -> None:
        """A file of garbage names itself and the older checkpoint to use instead."""
        older = save_checkpoint(tmp_path, 1, {}, keep=3)
        newest = save_checkpoint(tmp_path, 2, {}, keep=3)
        newest.write_bytes(b"\x00garbage, not a checkpoint")
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(newest)
        message = str(info.value)
        assert message.startswith(f"{newest}: not a readable harl checkpoint (")
        assert message.endswith(f"); pass an older one with --checkpoint {older}")

    def test_garbage_without_an_older_checkpoint(self, tmp_path: Path) -> None:
        """With no other checkpoint left, the message says the run must start again."""
        only = save_checkpoint(tmp_path, 1, {}, keep=3)
        only.write_bytes(b"")
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(only)
        assert str(info.value) == (
            f"{only}: not a readable harl checkpoint (EOFError: Ran out of input); no other "
            "checkpoint of this run is left, so the run must start again with harl train"
        )

    def test_torch_file_that_is_not_harl(self, tmp_path: Path) -> None:
        """A valid torch file without harl's format tag is not a harl checkpoint."""
        path = tmp_path / "weights.pt"
        torch.save({"weight": torch.zeros(2)}, path)
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(path)
        assert str(info.value) == (
            f'{path}: not a harl checkpoint (a harl checkpoint is a dict with a "format" entry; '
            "this file holds a dict without one)"
        )

    def test_torch_file_holding_a_tensor(self, tmp_path: Path) -> None:
        """A torch file holding a bare tensor is not a harl checkpoint either."""
        path = tmp_path / "tensor.pt"
        torch.save(torch.zeros(2), path)
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(path)
        assert str(info.value) == (f'{path}: not a harl checkpoint (a harl checkpoint is a dict '
                                   'with a "format" entry; this file holds Tensor)')

    def test_other_format_version(self, tmp_path: Path) -> None:
        """A checkpoint of another format version says which version reads it."""
        path = tmp_path / "future.pt"
        torch.save({"format": FORMAT_VERSION + 1}, path)
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(path)
        assert str(info.value) == (
            f"{path}: a harl checkpoint of format {FORMAT_VERSION + 1}, but this version of harl "
            f"reads format {FORMAT_VERSION}; use the harl version that wrote it"
        )

    def test_run_checkpoint_that_is_not_harl(self, tmp_path: Path) -> None:
        """A foreign file under a run's checkpoint name also points to the older checkpoint."""
        older = save_checkpoint(tmp_path, 1, {}, keep=3)
        path = older.with_name("iter_0000002.pt")
        torch.save([1, 2], path)
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(path)
        assert str(info.value) == (
            f'{path}: not a harl checkpoint (a harl checkpoint is a dict with a "format" entry; '
            f"this file holds list); pass an older one with --checkpoint {older}"
        )

    def test_missing_file(self, tmp_path: Path) -> None:
        """A checkpoint path that does not exist is named."""
        path = tmp_path / "iter_0000001.pt"
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(path)
        assert str(info.value) == f"{path}: no such checkpoint file"
