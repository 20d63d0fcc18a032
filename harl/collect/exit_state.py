"""What a collector's checkpoint saves, safe to ask for at any moment.

A checkpoint may be written while a ``collect`` was cut short (an env crashed, a second Ctrl-C)
or after the envs failed to answer: then the collector must not talk to them (closed, or with a
step in flight) and the state as of the end of the last whole ``collect`` is the one that matches
the counters saved with it. Every collector keeps one ``ExitState`` for this."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from harl.errors import EnvCrashedError


@attrs.define
class ExitState:
    read: Callable[[], dict[str, Any]]
    """The collector's state now, read from its envs and buffers."""
    saved: dict[str, Any] = attrs.Factory(lambda: {"started": False, "episode_starts": None})
    """The state at the end of the last whole ``collect`` (or as loaded)."""
    use_saved: bool = False
    """Inside ``collect``, or after it or the envs failed: ``current`` gives ``saved``."""

    def current(self) -> dict[str, Any]:
        if self.use_saved:
            return self.saved
        try:
            return self.read()
        except EnvCrashedError:  # a worker died since the collect: the exit-save takes the saved state
            self.use_saved = True
            raise

    def collecting(self) -> None:
        self.use_saved = True

    def collected(self) -> None:
        self.saved = self.read()
        self.use_saved = False
