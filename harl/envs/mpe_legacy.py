"""PettingZoo 1.22's MPE (the ``*_v2`` / ``simple_speaker_listener_v3`` scenarios) on mpe2.

HARL's published MPE numbers were measured on pettingzoo 1.22, whose MPE differs from
mpe2's in three ways (found by replaying seeded random actions in both; the replay is
pinned by ``tests/envs/test_mpe_legacy.py`` against values recorded from pettingzoo 1.22):

1. Integration.  pettingzoo 1.22 updates the velocity first and moves with the *new*
   velocity (semi-implicit Euler), so an action moves its agent in the same step and
   shows in that step's reward.  mpe2 moves with the *old* velocity first, so an action's
   effect on position (and reward) arrives one step later, and the last action of an
   episode changes no reward at all.
2. Continuous action signs.  pettingzoo 1.22 reads ``u_x = a[1] - a[2]``, mpe2
   ``u_x = a[2] - a[1]`` (likewise ``a[3]``, ``a[4]``): a relabelling that changes nothing
   learnable, kept so recorded actions replay exactly.
3. simple_spread's collision penalty counts each agent's collision with itself:
   ``-local_ratio`` per agent and step, a constant (-37.5 per 25-step episode in the team
   sum of 3 agents at ``local_ratio = 0.5``).
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

VARIANTS = ("mpe2", "pettingzoo_1.22")


def _integrate_semi_implicit(world: Any, p_force: list[Any]) -> None:
    """pettingzoo 1.22's ``World.integrate_state``: damp, accelerate, clamp speed, then move."""
    for i, entity in enumerate(world.entities):
        if not entity.movable:
            continue
        state = entity.state
        state.p_vel = state.p_vel * (1 - world.damping)
        if p_force[i] is not None:
            state.p_vel += (p_force[i] / entity.mass) * world.dt
        if entity.max_speed is not None:
            speed = np.sqrt(np.square(state.p_vel[0]) + np.square(state.p_vel[1]))
            if speed > entity.max_speed:
                state.p_vel = state.p_vel / speed * entity.max_speed
        state.p_pos += state.p_vel * world.dt


def use_semi_implicit_integration(world: Any) -> None:
    """Make this one world integrate as pettingzoo 1.22 did (mpe2's class is left alone)."""
    world.integrate_state = types.MethodType(_integrate_semi_implicit, world)


def to_mpe2_signs(action: np.ndarray) -> np.ndarray:
    """A movable agent's pettingzoo-1.22 continuous action in mpe2's sign convention.

    Swapping ``a[1] <-> a[2]`` and ``a[3] <-> a[4]`` turns ``a[1] - a[2]`` into mpe2's
    ``a[2] - a[1]`` with the same value; the communication entries (from 5 on) stay.
    """
    swapped = action.copy()
    swapped[[1, 2, 3, 4]] = action[[2, 1, 4, 3]]
    return swapped


def self_collision_penalty(scenario: str, local_ratio: float) -> float:
    """The per-agent, per-step reward term pettingzoo 1.22 adds and mpe2 does not."""
    return -local_ratio if scenario == "simple_spread" else 0.0
