"""``metrics.csv``: one row per iteration, appended to on resume."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class CSVLogger:
    """Writes rows with a fixed column set; a resumed run keeps the file's own header."""

    def __init__(self, path: Path, columns: Sequence[str]) -> None:
        self.path = path
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

    def write(self, row: dict[str, Any]) -> None:
        self.writer.writerow({k: _cell(v) for k, v in row.items()})
        self.file.flush()

    def close(self) -> None:
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
