"""What a critic reads of a step, and the values a policy's own step gives, for the eager collector and
the compiled step alike."""

from __future__ import annotations

from typing import Any


def critic_input(critic: Any, obs: Any, state: Any) -> Any:
    """What the critic reads of a step: the global state, or what its ``reads(obs, state)`` makes of
    the agents' observations (``harl.update.independent_v``: each agent's own, stacked)."""
    reads = getattr(critic, "reads", None)
    return state if reads is None else reads(obs, state)


def policy_values(critic: Any, sampled: Any) -> Any:
    """V(s_t) in env units where the policy's sample gave values of its own (``values``: a critic that is
    a head of the policy, MAT's encoder, in the critic's normalised units), else None."""
    values = getattr(sampled, "values", None)
    return None if values is None else critic.denormalize(values)
