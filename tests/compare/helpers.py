"""Shared by the compare tests: the rliable skip marker and a section built from arrays."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from harl.compare.sections import Section

needs_rliable = pytest.mark.skipif(importlib.util.find_spec("rliable") is None,
                                   reason='needs rliable (pip install "harl[compare]")')


def section_of(scores: dict[str, np.ndarray], normalised: bool = False) -> Section:
    """A one-task section (or as many tasks as the arrays have columns) without curves."""
    tasks = tuple(f"t{k}" for k in range(next(iter(scores.values())).shape[1]))
    return Section("env/task", "final", normalised, tasks, scores, None, {}, 1.0 if normalised else None)
