"""Importing a user's ``"module.path:Name"`` (an env factory, a stage's config class)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


def import_module(name: str) -> Any:
    """Import ``name``; if it is not found, retry with the current directory on ``sys.path``.

    The ``harl`` console script does not put the current directory on ``sys.path`` (``python
    -m`` does), yet "my_env:make_env" next to the pipeline is the common case.
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        cwd = os.getcwd()
        missing_is_ours = exc.name is not None and (name == exc.name or name.startswith(exc.name + "."))
        if not missing_is_ours or cwd in sys.path or "" in sys.path:
            raise
    sys.path.append(cwd)
    return importlib.import_module(name)
