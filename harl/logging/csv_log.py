"""``metrics.csv``: one row per iteration, appended to on resume."""

from __future__ import annotations

import contextlib
import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harl.fs import atomic_write_bytes
from harl.run.files import writing


class CSVLogger:
    """Writes rows with a fixed column set; a resumed run keeps the file's own header.

    ``resume_after``: the iteration the run resumes from; rows written after it (by the
    interrupted run, past its last checkpoint) are dropped so no iteration appears twice.
    """

    def __init__(self, path: Path, columns: Sequence[str], resume_after: int | None = None) -> None:
        self.path = path
        with writing(path, "the metrics", path.parent):
            if resume_after is not None:
                self._truncate_after(resume_after)
            existing = self._header()
            self.columns = existing or list(columns)
            self.file = path.open("a", newline="", encoding="utf-8")
            self.writer = csv.DictWriter(self.file, fieldnames=self.columns, extrasaction="ignore")
            if not existing:
                self.writer.writeheader()
                self.file.flush()

    def _header(self) -> list[str] | None:
        if not self.path.is_file() or self.path.stat().st_size == 0:
            return None
        with self.path.open(newline="", encoding="utf-8") as f:
            return next(csv.reader(f), None)

    def _truncate_after(self, iteration: int) -> None:
        if not self.path.is_file():
            return
        with self.path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        if not rows or "iteration" not in rows[0]:
            return
        col = rows[0].index("iteration")
        kept = [rows[0]] + [r for r in rows[1:] if r and r[col].isdigit() and int(r[col]) <= iteration]
        if len(kept) == len(rows):
            return

        def write(f) -> None:  # noqa: ANN001
            text = io.StringIO()
            csv.writer(text).writerows(kept)
            f.write(text.getvalue().encode("utf-8"))

        atomic_write_bytes(self.path, write)

    def write(self, row: dict[str, Any]) -> None:
        with writing(self.path, "the metrics", self.path.parent):
            self.writer.writerow({k: _cell(v) for k, v in row.items()})
            self.file.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # a full disk was reported when the write failed
            self.file.close()


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def read_metrics(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
