"""What a critic reads of a step, for the eager collector and the compiled step alike."""

from __future__ import annotations

from typing import Any


def critic_input(critic: Any, obs: Any, state: Any) -> Any:
    """What the critic reads of a step: the global state, or what its ``reads(obs, state)`` makes of
    the agents' observations (``harl.update.independent_v``: each agent's own, stacked)."""
    reads = getattr(critic, "reads", None)
    return state if reads is None else reads(obs, state)
