"""Pinned metrics: a short fixed-seed run's metrics.csv against a copy recorded earlier (wall-clock columns aside).

Used by ``tests/test_pinned_runs.py`` (HAPPO, HASAC, QMIX) and ``tests/mat/test_pinned_metrics.py`` (MAT).
A recorded file is metrics.csv as harl wrote it (numbers to 6 significant digits), without the columns
that measure the machine rather than the run (``WALL_CLOCK``: ``wall_time``, ``steps_per_s``; harl writes
no other timing column to metrics.csv).  Columns are compared in the file's order, cell by cell, as text.

Re-recording: ``HARL_RECORD_PINNED=1 pytest tests/test_pinned_runs.py tests/mat/test_pinned_metrics.py``
writes every pinned file from the runs (those tests then skip, saying what they wrote).  Re-record only
for a change meant to change the numbers (a new default, a fixed bug, a retuned shipped pipeline), in a
commit of its own or one whose message says which pinned numbers changed and why; a refactor that moves
them is a bug to find, not a file to re-record.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from tests.test_determinism import WALL_CLOCK

RECORD = os.environ.get("HARL_RECORD_PINNED", "") == "1"
"""``HARL_RECORD_PINNED=1``: write the pinned files instead of comparing with them."""

EXACT = os.environ.get("HARL_PINNED_EXACT", "") == "1"
"""``HARL_PINNED_EXACT=1``: bit for bit (at the file's 6 digits), for a refactor checked on the machine
that recorded the files. Without it the numbers agree to ``ACROSS_MACHINES`` relative: another CPU
(CI's) may take other SIMD kernels, whose last-bit rounding a few training iterations carry into the
sixth digit; a real change (a learning rate moved by 0.2 %) moves cells far more."""
ACROSS_MACHINES = 1e-4
ACROSS_MACHINES_ABS = 1e-6
"""With ``ACROSS_MACHINES``: a cell also passes within this absolute difference. A loss that is a mean of
float32 terms of size ~1 cancelling to near 0 (a PPO policy loss of -4.4e-4) carries their rounding,
~1e-7, as an absolute error: relative to the small result that is 3e-4, so a new machine (2026-12-07's
AMD EPYC) failed MAT's pinned policy loss at 1e-4 relative while every other cell agreed."""

Table = list[list[str]]
"""A CSV file's rows as text, the header first."""


def set_args(values: dict[str, object]) -> list[str]:
    """``{"a.b": 1}`` -> ``["--set", "a.b=1"]``: settings for ``harl train``."""
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def read_table(path: Path) -> Table:
    with path.open(newline="", encoding="utf-8") as f:
        return [row for row in csv.reader(f) if row]


def metrics_table(run_dir: Path) -> Table:
    """A run's metrics.csv without the wall-clock columns."""
    table = read_table(run_dir / "metrics.csv")
    keep = [i for i, name in enumerate(table[0]) if name not in WALL_CLOCK]
    return [[row[i] if i < len(row) else "" for i in keep] for row in table]


def differences(got: Table, want: Table, rel: float | None = None) -> list[str]:
    """What differs, one line per cell (``rel``: numbers equal to that relative tolerance pass; empty
    cells must be empty on both sides)."""
    if got[:1] != want[:1]:
        return [f"columns: got {got[:1]}, recorded {want[:1]}"]
    if len(got) != len(want):
        return [f"rows: got {len(got) - 1}, recorded {len(want) - 1}"]
    header, found = want[0], []
    for g_row, w_row in zip(got[1:], want[1:]):
        for column, g, w in zip(header, g_row, w_row):
            if g == w or (rel is not None and g and w and _number(g) and _number(w)
                          and float(g) == pytest.approx(float(w), rel=rel, abs=ACROSS_MACHINES_ABS)):
                continue
            found.append(f"iteration {w_row[0]}, {column}: got {g!r}, recorded {w!r}")
    return found


def check_pinned(run_dir: Path, path: Path, rel: float | None = None) -> None:
    """The run's metrics (wall-clock columns aside) are the recorded ones: cell for cell as text, or to
    ``rel`` where given; with ``HARL_RECORD_PINNED=1`` records them to ``path`` and skips."""
    got = metrics_table(run_dir)
    if RECORD:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as f:
            csv.writer(f, lineterminator="\n").writerows(got)
        pytest.skip(f"HARL_RECORD_PINNED=1: recorded {path}")
    assert path.is_file(), f"{path} is missing: record it with HARL_RECORD_PINNED=1 (see tests/pinned.py)"
    if rel is None and not EXACT:
        rel = ACROSS_MACHINES
    found = differences(got, read_table(path), rel)
    assert not found, (f"{len(found)} cell(s) differ from {path} ({'to rel ' + str(rel) if rel else 'bit for bit'}):\n"
                       + "\n".join(found[:20]) + "\nA deliberate change of the numbers: re-record, as tests/pinned.py "
                       "says (HARL_RECORD_PINNED=1), and say so in the commit message.")


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
