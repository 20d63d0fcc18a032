"""Compiled graphs of the update: ``torch.compile`` with the inductor options harl sets.

``[updater] compile`` (``harl.update.fused``) hands its whole minibatch step to ``compiled``: fixed
shapes (``dynamic=False``: the rollout's and the minibatch's, fixed for a run) and inductor's C++
wrapper.  (Until issue 58 ``[policy] compile`` compiled the loss and the optimiser's step here as two
graphs; that key is now ``[updater] compile``, one code path.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

__all__ = ("INDUCTOR_OPTIONS", "compiled")


INDUCTOR_OPTIONS: dict[str, Any] = {"cpp_wrapper": True}
"""Inductor options of every graph compiled here: its C++ wrapper, whose steps measured 3-6 % less CPU than
the Python wrapper's (MAPPO SMAX 3m actor 14.7 against 15.2 ms, HAPPO spread actor 16.5 against 17.6 ms
per minibatch step) for a compile about 1.4x as long (docs/performance.md)."""

F = TypeVar("F", bound=Callable[..., Any])


def compiled(fn: F) -> F:
    """``fn`` compiled for fixed shapes with this module's inductor options."""
    return torch.compile(fn, dynamic=False, options=dict(INDUCTOR_OPTIONS) or None)  # type: ignore[return-value]
