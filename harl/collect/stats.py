"""What one ``collect`` call hands back, whatever the family (``harl.protocols.Collected``)."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class CollectStats:
    """One iteration's collection: the env steps it took and the episodes that finished."""

    env_steps: int
    episodes: list[dict[str, Any]]
    """One dict per finished episode: ``return``, ``length`` and env metrics."""

    def row(self) -> dict[str, Any]:
        """No columns of its own: the Trainer writes the env steps and the episodes' returns."""
        return {}
