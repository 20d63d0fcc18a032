"""A batch of MPE worlds as tensors, and mpe2's physics step over all of them at once.

mpe2 (``_mpe_utils/core.py``, ``World.step``) does, per world and in this order:

1. force on each movable agent = its control ``u`` (``simple_env._set_action``: the
   continuous action's ``a[2] - a[1], a[4] - a[3]`` or the discrete move's unit vector,
   times the sensitivity 5; mpe2's agents have no motor noise here);
2. plus, for every pair of colliding entities, a soft contact force
   ``contact_force * delta / dist * logaddexp(0, -(dist - dist_min) / margin) * margin``;
3. ``pos += vel * dt``, then ``vel = vel * (1 - damping) + force / mass * dt`` (mass 1;
   position moves with the velocity from *before* this step's force);
4. each agent's utterance becomes its communication action (zeros for silent agents).

None of the three scenarios sets ``max_speed``, ``accel``, ``u_noise`` or ``c_noise``, moves
a landmark, or lets a landmark collide, so those branches of mpe2 are not reproduced.
Immovable agents (the speaker) get no force and keep zero velocity, so step 3 leaves them
in place without a mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import torch
from gymnasium import spaces

DT = 0.1
DAMPING = 0.25
CONTACT_FORCE = 1e2
CONTACT_MARGIN = 1e-3
SENSITIVITY = 5.0
DIM_P = 2
MOVE_ACTIONS = 2 * DIM_P + 1
"""Physical actions: no-op, -x, +x, -y, +y (mpe2's order)."""

_MOVES = ((0.0, 0.0), (-1.0, 0.0), (1.0, 0.0), (0.0, -1.0), (0.0, 1.0))


@attrs.frozen
class Layout:
    """A scenario's fixed entities: per-agent flags, landmark count, channel width."""

    movable: tuple[bool, ...]
    silent: tuple[bool, ...]
    collide: tuple[bool, ...]
    size: tuple[float, ...]
    n_landmarks: int
    dim_c: int
    n_goals: int
    """Landmark indices drawn at reset (targets), one column each in ``World.goals``."""

    @property
    def n_agents(self) -> int:
        return len(self.movable)

    def action_space(self, i: int, continuous: bool) -> spaces.Space:
        """Agent ``i``'s action space, sized as ``SimpleEnv.__init__`` sizes it."""
        if self.movable[i]:
            size = MOVE_ACTIONS
        else:
            size = 0 if continuous else 1
        if not self.silent[i]:
            size = size + self.dim_c if continuous else size * self.dim_c
        if continuous:
            return spaces.Box(0.0, 1.0, (size,), dtype="float32")
        return spaces.Discrete(size)


@attrs.define
class World:
    """``n_envs`` worlds: agents' positions and velocities, landmarks, utterances, goals."""

    agent_pos: torch.Tensor
    """``(n_envs, n_agents, 2)``."""
    agent_vel: torch.Tensor
    """``(n_envs, n_agents, 2)``."""
    landmark_pos: torch.Tensor
    """``(n_envs, n_landmarks, 2)``."""
    comm: torch.Tensor
    """``(n_envs, n_agents, dim_c)``: each agent's utterance (zeros for silent agents)."""
    goals: torch.Tensor
    """``(n_envs, n_goals)`` int64 landmark indices."""


class Physics:
    """mpe2's action decoding and world step for one layout (see the module docstring)."""

    def __init__(self, layout: Layout, continuous: bool, device: torch.device,
                 dtype: torch.dtype) -> None:
        self.layout = layout
        self.continuous = continuous
        self.dtype = dtype
        self._moves = torch.tensor(_MOVES, device=device, dtype=dtype) * SENSITIVITY
        self._n_actions = [
            None if continuous else int(layout.action_space(i, False).n)  # type: ignore[attr-defined]
            for i in range(layout.n_agents)
        ]
        colliders = [i for i in range(layout.n_agents) if layout.collide[i]]
        self._colliders = colliders if len(colliders) > 1 else []
        sizes = torch.tensor([layout.size[i] for i in colliders], device=device, dtype=dtype)
        self._dist_min = sizes[:, None] + sizes[None, :]
        self._eye = torch.eye(len(colliders), device=device, dtype=dtype)

    def decode(self, actions: Sequence[Any], n_envs: int, device: torch.device
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-agent actions -> controls ``u`` ``(n, A, 2)`` and utterances ``(n, A, dim_c)``."""
        layout = self.layout
        u = torch.zeros(n_envs, layout.n_agents, DIM_P, device=device, dtype=self.dtype)
        comm = torch.zeros(n_envs, layout.n_agents, layout.dim_c, device=device, dtype=self.dtype)
        for i, action in enumerate(actions):
            if self.continuous:
                # Clipped like mpe2's ClipOutOfBoundsWrapper (a new tensor: the input is kept).
                a = torch.as_tensor(action, device=device, dtype=torch.float32).clamp(0.0, 1.0)
                if layout.movable[i]:
                    # The differences in float32, the scaling in the world's dtype: as mpe2 does.
                    u[:, i, 0] = (a[:, 2] - a[:, 1]).to(self.dtype) * SENSITIVITY
                    u[:, i, 1] = (a[:, 4] - a[:, 3]).to(self.dtype) * SENSITIVITY
                    a = a[:, MOVE_ACTIONS:]
                if not layout.silent[i]:
                    comm[:, i] = a[:, : layout.dim_c]
                continue
            index = torch.as_tensor(action, device=device).reshape(n_envs).long()
            n = self._n_actions[i]
            if bool(((index < 0) | (index >= n)).any()):
                raise ValueError(f"agent {i}: an action is outside Discrete({n})")
            if layout.movable[i]:
                u[:, i] = self._moves[index % MOVE_ACTIONS]
                index = index // MOVE_ACTIONS
            if not layout.silent[i]:
                comm[:, i] = torch.nn.functional.one_hot(index, layout.dim_c).to(self.dtype)
        return u, comm

    def step(self, world: World, u: torch.Tensor, comm: torch.Tensor) -> None:
        """Advance every world by one ``dt`` in place (mpe2's ``World.step``)."""
        force = u
        if self._colliders:
            force = force.clone()
            force[:, self._colliders] += self._contact_forces(world.agent_pos[:, self._colliders])
        world.agent_pos += world.agent_vel * DT
        world.agent_vel.mul_(1.0 - DAMPING).add_(force * DT)
        world.comm = comm

    def _contact_forces(self, pos: torch.Tensor) -> torch.Tensor:
        """Sum over the other colliders of mpe2's soft contact force, ``(n, C, 2)``."""
        delta = pos[:, :, None, :] - pos[:, None, :, :]
        dist = delta.square().sum(-1).sqrt()
        penetration = torch.nn.functional.softplus(-(dist - self._dist_min) / CONTACT_MARGIN)
        # The diagonal (an entity with itself) has delta 0: dividing by 1 there keeps it 0.
        scale = CONTACT_FORCE * CONTACT_MARGIN * penetration / (dist + self._eye)
        return (delta * scale[..., None]).sum(2)


def pairwise_dist(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``||a_i - b_j||`` for point sets ``(n, I, 2)`` and ``(n, J, 2)``: ``(n, I, J)``."""
    return (a[:, :, None, :] - b[:, None, :, :]).square().sum(-1).sqrt()


def relative(points: torch.Tensor, origin: torch.Tensor) -> torch.Tensor:
    """Each agent's view of ``points`` ``(n, J, 2)`` from ``origin`` ``(n, A, 2)``: ``(n, A, 2J)``."""
    return (points[:, None, :, :] - origin[:, :, None, :]).flatten(2)


def sample_worlds(layout: Layout, n: int, generator: torch.Generator, device: torch.device,
                  dtype: torch.dtype) -> World:
    """Fresh worlds as mpe2's ``reset_world`` draws them in all three scenarios: every agent
    and landmark uniform in ``[-1, 1)^2``, each goal a uniform landmark index, at rest, silent."""
    def uniform(count: int) -> torch.Tensor:
        return torch.rand(n, count, DIM_P, generator=generator, device=device, dtype=dtype) * 2.0 - 1.0

    agent_pos = uniform(layout.n_agents)
    landmark_pos = uniform(layout.n_landmarks)
    goals = torch.randint(layout.n_landmarks, (n, layout.n_goals), generator=generator, device=device)
    return World(
        agent_pos=agent_pos, agent_vel=torch.zeros_like(agent_pos), landmark_pos=landmark_pos,
        comm=torch.zeros(n, layout.n_agents, layout.dim_c, device=device, dtype=dtype), goals=goals,
    )
