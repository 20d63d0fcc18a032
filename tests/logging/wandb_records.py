"""Read a wandb offline run file (``run-<id>.wandb``) back: its records as protobuf messages.

The file is a LevelDB-style log (wandb's datastore): a 7-byte header, then 32 KiB blocks of
records, each ``checksum (4) | length (2) | type (1) | data``, a message split across blocks
as FIRST / MIDDLE / LAST pieces.  Each message is a ``wandb_internal_pb2.Record``.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

BLOCK, HEADER, RECORD = 32768, 7, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", "not a wandb datastore file"
    out, pending, pos = [], b"", HEADER
    while pos + RECORD <= len(data):
        left = BLOCK - pos % BLOCK
        if left < RECORD:  # block trailer padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + RECORD])
        if kind == 0 and length == 0:
            pos += left
            continue
        piece = data[pos + RECORD:pos + RECORD + length]
        pos += RECORD + length
        pending = piece if kind in (FULL, FIRST) else pending + piece
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
    return out


def wait_for_exit(path: Path, timeout: float = 30.0) -> None:
    """Wait until wandb's service has written the run's ``exit`` record (it writes after ``finish``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if any(r.WhichOneof("record_type") == "exit" for r in records(path)):
                return
        except Exception:  # noqa: BLE001 - a record still being written: read again
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{path}: no exit record after {timeout} s")


def history(path: Path) -> list[dict[str, Any]]:
    """The logged rows, ``{key: value}`` each (wandb's own ``_step`` etc. included)."""
    return [{_key(item): json.loads(item.value_json) for item in r.history.item}
            for r in records(path) if r.WhichOneof("record_type") == "history"]


def config(path: Path) -> dict[str, Any]:
    """The run's config (from its ``run`` record)."""
    (run,) = [r.run for r in records(path) if r.WhichOneof("record_type") == "run"]
    return {_key(item): json.loads(item.value_json) for item in run.config.update}


def _key(item: Any) -> str:
    return item.key or ".".join(item.nested_key)
