"""A run directory's files all get the same permissions: what ``open()`` gives a new file (0666 less the
umask: 0644 by default), metrics.csv and the checkpoints (written through a temp file and a rename) as
pipeline.toml; a file replaced keeps the permissions it had."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

import harl
from harl.fs import atomic_write_bytes
from tests.api.test_api import TABLES
from tests.fakes import counting  # noqa: F401 - registers env kind "counting"


@pytest.fixture
def umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def modes(run: Path) -> dict[str, int]:
    return {str(p.relative_to(run)): stat.S_IMODE(p.stat().st_mode) for p in run.rglob("*") if p.is_file()}


@pytest.mark.usefixtures("umask")
@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_every_file_of_a_run_directory_has_the_same_mode(tmp_path: Path, mask: int) -> None:
    os.umask(mask)
    run = tmp_path / "run"
    harl.train(TABLES, run_dir=run)
    found = modes(run)
    assert {"pipeline.toml", "metrics.csv", "checkpoints/iter_0000003.pt"} <= set(found)
    assert {name: oct(mode) for name, mode in found.items() if mode != 0o666 & ~mask} == {}


@pytest.mark.usefixtures("umask")
def test_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    atomic_write_bytes(path, lambda f: f.write(b"a\n"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    path.chmod(0o600)
    atomic_write_bytes(path, lambda f: f.write(b"b\n"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_bytes() == b"b\n"
