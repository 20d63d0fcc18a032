"""A non-finite update stops the run before it can be saved.

One NaN in a loss (too high a learning rate, an exploding value target) spreads to every
parameter within a step or two, and a checkpoint written after that is worthless: worse,
it would rotate out the last good one.  ``check_update`` runs after every update, on the
update's reported numbers and on the networks' parameters (one pass, one device sync),
and raises ``NonFiniteUpdateError`` naming the iteration, the stage and the agent; the Trainer
then writes no checkpoint, so the newest one on disk is the last finite state.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import torch

from harl.errors import NonFiniteError
from harl.rundir.checkpoint import list_checkpoints

_AGENT_KEY = re.compile(r"^agent(\d+)_(.+)$")


class NonFiniteUpdateError(NonFiniteError):
    """The networks are poisoned: unlike a NaN from an env, nothing may be saved after it."""


def _bad_number(row: dict[str, Any]) -> tuple[str, Any] | None:
    for key, value in row.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isfinite(value):
            return key, value
    return None


def _all_finite(module: torch.nn.Module) -> bool:
    flags = [torch.isfinite(p).all() for p in module.parameters()]
    return not flags or bool(torch.stack(flags).all())


def _where(key: str) -> str:
    """A metrics column as the stage and agent it belongs to."""
    found = _AGENT_KEY.match(key)
    if found:
        return f"the actor update of agent {found.group(1)} ({found.group(2)})"
    return f"the critic update ({key})"


def _kept(run_dir: Path) -> str:
    found = list_checkpoints(run_dir)
    if not found:
        return "no checkpoint was written yet"
    return f"the newest checkpoint, {found[-1]}, holds the last finite state and is kept as it was"


def check_update(row: dict[str, Any], iteration: int, stages: Any, run_dir: Path) -> None:
    """Raise ``NonFiniteUpdateError`` if ``row`` or the networks of ``stages`` hold NaN or infinity."""
    bad = _bad_number(row)
    if bad is not None:
        where = f"{_where(bad[0])} gave {bad[1]}"
    else:
        # The networks where the stages expose them (a stub Trainer test's stages have none).
        actors = list(getattr(getattr(stages, "policy", None), "actors", []))
        broken = [f"actor of agent {i}" for i, actor in enumerate(actors) if not _all_finite(actor)]
        critic = getattr(stages, "critic", None)
        if critic is not None and not _all_finite(critic):
            broken.append("critic")
        if not broken:
            return
        where = f"the update left non-finite parameters in the {', '.join(broken)}"
    raise NonFiniteUpdateError(
        f"iteration {iteration}: {where}; the run stopped without saving: {_kept(run_dir)}. "
        "Lower the learning rates (updater.objective.lr, critic.lr), or check the rewards' scale"
    )
