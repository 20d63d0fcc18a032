"""``harl tune``: hyper-parameter search on Optuna (``pip install "harl[tune]"``).

A search space file names pipeline keys and their distributions (``space``); each trial trains
the pipeline with one set of values on several seeds, every seed an ordinary run directory; its
value is a statistic of their evaluation returns (``objective``), maximised; the driver reports
each evaluation to the study and prunes bad trials through harl's callbacks (``worker``); the
study lives in the tune directory's SQLite file, written by the driver only (``study``,
``driver``); trials run as local processes, populations or Ray tasks (``runners``); at the end
the best values become a pipeline file, re-evaluated on fresh seeds against the starting one
(``report``, ``command``).  See docs/tune.md.

Importing this package needs no extra: ``optuna`` is imported when a study starts.
"""

import sys
import types
from typing import Any

from harl.tune.command import TuneResult, tune
from harl.tune.space import Param, Space, read_space

__all__ = ["Param", "Space", "TuneResult", "read_space", "tune"]


class _CallableModule(types.ModuleType):
    """``harl.tune(...)`` calls ``tune``: importing this package makes ``harl.tune`` the package
    (Python sets a subpackage on its parent), which must stay the function of the Python API."""

    def __call__(self, *args: Any, **kwargs: Any) -> TuneResult:
        return tune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
