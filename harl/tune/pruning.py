"""How pruning reaches a trial's runs: a file the driver writes, a callback each run reads.

The driver, which alone writes the study, decides that a trial is pruned and writes ``PRUNED``
into the trial's directory; each of its runs has a ``Pruning`` callback (``harl.callbacks``)
that sees the file after its iteration and returns True, so the run stops there with a
checkpoint, as one Ctrl-C would.  A file is all it takes, so a trial on a Ray worker of a
shared filesystem is pruned the same way (the sweep rules: docs/ray.md), and so is a
``--vectorize`` population: every member has the callback, and the population's loop
(``harl.trainer.drive``) stops all of them after the iteration, each with its checkpoint.

Its own module, not ``harl.tune.worker``'s: the driver imports it, and a module that is also run
with ``python -m`` must not be imported first (Python warns that it is already in sys.modules).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

PRUNED = "PRUNED"


class Pruning:
    """Stops the run once the driver pruned its trial (a ``PRUNED`` file in the trial directory)."""

    def __init__(self, run_dir: Path) -> None:
        self.flag = Path(run_dir).parent / PRUNED

    def on_iteration(self, row: Mapping[str, Any]) -> bool:
        return self.flag.exists()
