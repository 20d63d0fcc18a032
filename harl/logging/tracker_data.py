"""What every experiment tracker writes: the pipeline as flat params, a row's numbers, and
the tracker's run id kept in the run directory so a resumed run continues the same tracker run."""

from __future__ import annotations

import json
import math
import numbers
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

IDS = "trackers.json"
"""Run directory file: tracker name -> its run id, for resume."""

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested table as ``{"updater.objective.clip": "0.2", ...}`` (values as text)."""
    flat: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = str(value)
    return flat


def pipeline_tables(pipeline_text: str) -> dict[str, Any]:
    """The run's ``pipeline.toml`` (as harl wrote it) as nested tables."""
    return tomllib.loads(pipeline_text)


def pipeline_params(pipeline_text: str) -> dict[str, str]:
    return flatten(pipeline_tables(pipeline_text))


def numeric(row: Mapping[str, Any]) -> dict[str, float]:
    """The row's finite numbers (text columns, empty cells and booleans left out)."""
    return {k: float(v) for k, v in row.items()
            if isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)}


def saved_id(run_dir: Path, name: str) -> str | None:
    path = run_dir / IDS
    return json.loads(path.read_text(encoding="utf-8")).get(name) if path.is_file() else None


def save_id(run_dir: Path, name: str, run_id: str) -> None:
    path = run_dir / IDS
    ids = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    ids[name] = run_id
    path.write_text(json.dumps(ids, indent=1) + "\n", encoding="utf-8")
