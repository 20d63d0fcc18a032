"""``metrics.csv``: one row per iteration, appended to on resume; always written (resume and
``harl plot`` read it), so it is a sink kind without a table of its own."""

from __future__ import annotations

import contextlib
import csv
import io
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from harl.fs import atomic_write_bytes, writing
from harl.logging.sink import SinkContext, register_sink

INT_COLUMNS = ("iteration", "env_steps", "episodes")
"""Counters: read back as ``int``; every other number as ``float``."""


class CSVLogger:
    """Writes rows with a fixed column set; a resumed run keeps the file's own header.

    ``resume_after``: the iteration the run resumes from; rows written after it (by the
    interrupted run, past its last checkpoint) are dropped so no iteration appears twice.
    """

    def __init__(self, path: Path, columns: Sequence[str], resume_after: int | None = None,
                 note: Callable[[], str] = str) -> None:
        self.path = path
        self.note = note
        with writing(path, "the metrics", note=note):
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

    def write(self, row: Mapping[str, Any]) -> None:
        with writing(self.path, "the metrics", note=self.note):
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
    """The rows of a ``metrics.csv`` as the file writes them (text; see ``typed_rows``)."""
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def typed_cell(column: str, text: str) -> int | float | str | None:
    """A cell as a number: counters as ``int``, other numbers as ``float``, empty as None, text as it is."""
    if text == "":
        return None
    try:
        number = float(text)
    except ValueError:
        return text  # a text column (the updater's agent_order)
    return int(number) if column in INT_COLUMNS else number


def typed_rows(path: Path) -> list[dict[str, int | float | str | None]]:
    return [{k: typed_cell(k, v) for k, v in row.items()} for row in read_metrics(path)]


@attrs.frozen
class CSVConfig:
    """``metrics.csv`` in the run directory: always written, no keys."""


class CSVSink:
    """``metrics.csv``, opened at the first row: its columns are that row's (base, then the updater's)."""

    def __init__(self, config: CSVConfig, context: SinkContext) -> None:
        self.path = context.run_dir / "metrics.csv"
        self.resume_after = context.iteration
        self.note = context.note
        self.logger: CSVLogger | None = None

    def write(self, row: Mapping[str, Any]) -> None:
        if self.logger is None:
            self.logger = CSVLogger(self.path, list(row), resume_after=self.resume_after, note=self.note)
        self.logger.write(row)

    def close(self, checkpoint: Path | None) -> None:
        if self.logger is not None:
            self.logger.close()


register_sink(CSVConfig, CSVSink, kind="csv")
