"""The name of a folder harl makes for a new sweep, study or run: ``<stem>-<date>-<time>``.

One helper, so that every such folder sorts by when it started and two started in the same
second get ``-2``, ``-3``, ... rather than one overwriting the other.
"""

from __future__ import annotations

import time
from pathlib import Path


def stamped(parent: Path, stem: str) -> Path:
    """``parent/<stem>-YYYYmmdd-HHMMSS`` (local time), with ``-N`` added while that path exists;
    not created (the caller makes it, or checks it first)."""
    base = parent / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path
