"""``metrics.csv``: one row per iteration, appended to on resume; always written (resume and
``harl plot`` read it), so it is a sink kind without a table of its own."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import sys
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from harl.errors import CheckpointError
from harl.fs import atomic_write_bytes, writing
from harl.logging.sink import SinkContext, register_sink

INT_COLUMNS = ("iteration", "env_steps", "episodes")
"""Counters: read back as ``int``; every other number as ``float``."""


class CSVLogger:
    """Writes rows with a fixed column set; a resumed run keeps the file's own header.

    ``resume_after``: the iteration the run resumes from; rows written after it (by the
    interrupted run, past its last checkpoint) are dropped so no iteration appears twice.
    ``saved``: the run's rows up to ``resume_after`` as its checkpoint holds them (the text of
    the file, header first; ``metrics_state``): a file that lost some of them (removed, moved,
    cut short) is rewritten from it, so a resumed run's file has no hole.

    The logger keeps every row of the run it wrote or read (their CSV text, about 300 bytes a
    row) and checks before each row that ``path`` is still the file it writes (same device and
    inode): a file removed or replaced meanwhile (a sync or cleanup job) is written again whole,
    header and every row, with a warning line on stderr, instead of rows going to an unlinked file.
    """

    def __init__(self, path: Path, columns: Sequence[str], resume_after: int | None = None,
                 note: Callable[[], str] = str, saved: str | None = None,
                 warn: Callable[[str], Any] | None = None) -> None:
        self.path = path
        self.note = note
        self.warn = warn or _warn
        with writing(path, "the metrics", note=note):
            lines = self._read(resume_after)
            if saved is not None and resume_after is not None:
                lines = self._compare_saved(lines, saved, resume_after)
            existing = _parse(lines[0])[0] if lines else None
            self.columns = existing or list(columns)
            self.lines = lines or [_encode(self.columns)]
            self._zip = zlib.compressobj(1)
            self._zipped = [self._zip.compress("".join(self.lines).encode("utf-8"))]
            if self.lines != self._file_lines():
                self._rewrite()
            self._open()

    # ------------------------------------------------------------------ reading what is there

    def _file_lines(self) -> list[str]:
        if not self.path.is_file():
            return []
        with self.path.open(newline="", encoding="utf-8") as f:
            return [_encode(row) for row in csv.reader(f) if row]

    def _read(self, resume_after: int | None) -> list[str]:
        """The file's lines (re-encoded), without rows past ``resume_after``."""
        lines = self._file_lines()
        if not lines or resume_after is None:
            return lines
        header = _parse(lines[0])[0]
        if "iteration" not in header:
            return lines
        col = header.index("iteration")
        kept = [lines[0]]
        for line in lines[1:]:
            cells = _parse(line)[0]
            if len(cells) > col and cells[col].isdigit() and int(cells[col]) <= resume_after:
                kept.append(line)
        return kept

    def _compare_saved(self, lines: list[str], saved: str, resume_after: int) -> list[str]:
        """The file's lines, or the checkpoint's copy where the file lacks some of its iterations."""
        copy = [_encode(row) for row in csv.reader(io.StringIO(saved)) if row]
        if not copy or _iterations(lines) == _iterations(copy):
            return lines
        had = _iterations(lines)
        self.warn(f"harl: warning: {self.path} {'is missing' if not lines else f'holds {_span(had)}'} but the run "
                  f"has {len(copy) - 1} rows up to iteration {resume_after}: written again from the copy its "
                  "checkpoint holds")
        return copy

    # ------------------------------------------------------------------ writing

    def _rewrite(self) -> None:
        text = "".join(self.lines).encode("utf-8")
        atomic_write_bytes(self.path, lambda f: f.write(text))

    def _open(self) -> None:
        self.file = self.path.open("a", newline="", encoding="utf-8")
        st = os.fstat(self.file.fileno())
        self._identity = (st.st_dev, st.st_ino)

    def _lost(self) -> str | None:
        """How the file went away since it was opened (None: it is still there, the same file)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return "was removed"
        return None if (st.st_dev, st.st_ino) == self._identity else "was replaced by another file"

    def write(self, row: Mapping[str, Any]) -> None:
        with writing(self.path, "the metrics", note=self.note):
            line = _encode([_cell(row.get(c)) for c in self.columns])
            how = self._lost()
            if how is not None:
                with contextlib.suppress(OSError):
                    self.file.close()
                self._keep(line)
                self._rewrite()
                self._open()
                self.warn(f"harl: warning: {self.path} {how} while the run wrote it: written again whole, its header "
                          f"and all {len(self.lines) - 1} rows of the run")
                return
            self.file.write(line)
            self.file.flush()
            self._keep(line)

    def _keep(self, line: str) -> None:
        """The row's text, kept (and compressed as it comes, for ``zipped``)."""
        self.lines.append(line)
        self._zipped.append(self._zip.compress(line.encode("utf-8")))

    def zipped(self) -> bytes:
        """``text()`` compressed (zlib, rows compressed as they come and the stream ended on a copy of
        the compressor, so nothing is compressed twice; read it with ``unzip``)."""
        return b"".join(self._zipped) + self._zip.copy().flush()

    def text(self) -> str:
        """The file as it should be: header and every row of the run."""
        return "".join(self.lines)

    def close(self) -> None:
        with contextlib.suppress(OSError):  # a full disk was reported when the write failed
            self.file.close()


def _warn(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _encode(cells: Sequence[Any]) -> str:
    out = io.StringIO()
    csv.writer(out).writerow(cells)
    return out.getvalue()


def _parse(line: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(line)))


def _iterations(lines: list[str]) -> list[str]:
    """The iteration cells of ``lines`` (a header first): what a hole or a second copy shows in."""
    if not lines:
        return []
    header = _parse(lines[0])[0]
    if "iteration" not in header:
        return [str(len(lines) - 1)]
    col = header.index("iteration")
    return [cells[col] if len(cells) > col else "" for cells in (_parse(line)[0] for line in lines[1:])]


def _span(iterations: list[str]) -> str:
    if not iterations:
        return "no rows"
    return f"{len(iterations)} rows (iterations {iterations[0]}-{iterations[-1]})"


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def read_metrics(path: Path) -> list[dict[str, str]]:
    """The rows of a ``metrics.csv`` as the file writes them (text; see ``typed_rows``); a file that is
    not UTF-8 CSV (edited in a spreadsheet and saved in another encoding, damaged) is a ``CheckpointError``
    naming it."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    except UnicodeDecodeError as exc:
        raise CheckpointError(
            f"{path}: not a metrics file harl can read (byte {exc.start} is not UTF-8 text; harl writes "
            "metrics.csv as UTF-8): restore it from a copy, save it again as UTF-8 CSV, or leave this run "
            "out") from None
    except csv.Error as exc:
        raise CheckpointError(f"{path}: not a metrics file harl can read ({exc}): restore it from a copy, or "
                              "leave this run out") from None


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
        self.saved: str | None = None
        """The rows the checkpoint resumed from holds (``restore_rows``)."""
        self.logger: CSVLogger | None = None

    def write(self, row: Mapping[str, Any]) -> None:
        if self.logger is None:
            self.logger = CSVLogger(self.path, list(row), resume_after=self.resume_after, note=self.note,
                                    saved=self.saved)
        self.logger.write(row)

    def close(self, checkpoint: Path | None) -> None:
        if self.logger is not None:
            self.logger.close()


def metrics_state(sinks: Sequence[Any]) -> dict[str, Any]:
    """What a checkpoint holds of the run's metrics: ``{"metrics": {"csv": compressed text}}``, the
    header and every row up to the checkpoint's iteration (about 100 bytes a row compressed), or
    nothing before the first row.  A resume rewrites a ``metrics.csv`` that lost rows from it."""
    for sink in sinks:
        if isinstance(sink, CSVSink) and sink.logger is not None:
            return {"metrics": {"csv": sink.logger.zipped()}}
    return {}


def unzip(data: bytes) -> str:
    """The text ``CSVLogger.zipped`` compressed."""
    return zlib.decompress(data).decode("utf-8")


def restore_rows(sinks: Sequence[Any], state: Mapping[str, Any] | None) -> None:
    """Hand the rows a checkpoint holds (``metrics_state``) to the run's ``metrics.csv`` sink."""
    saved = (state or {}).get("metrics", {}).get("csv")
    if saved is None:
        return
    for sink in sinks:
        if isinstance(sink, CSVSink):
            sink.saved = unzip(saved)


register_sink(CSVConfig, CSVSink, kind="csv")
