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
import numpy as np
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
            return spaces.Box(0.0, 1.0, (size,), dtype=np.float32)
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
    """mpe2's action decoding and world step for one layout (see the module docstring).

    Decoding works on all agents at once (one concatenation, a few gathers) rather than
    agent by agent: with small batches a step costs per tensor operation, not per env.
    """

    def __init__(self, layout: Layout, continuous: bool, device: torch.device,
                 dtype: torch.dtype, legacy: bool = False) -> None:
        """``legacy``: pettingzoo 1.22's MPE (``harl.envs.mpe_legacy``): move with the new
        velocity, ``u_x = a[1] - a[2]`` (mpe2: ``a[2] - a[1]``)."""
        if len(set(layout.collide)) > 1:
            raise ValueError("either every agent collides (simple_spread) or none does")
        self.layout = layout
        self.continuous = continuous
        self.dtype = dtype
        n_agents = layout.n_agents
        sizes = [int(s.shape[0]) if isinstance(s, spaces.Box) else 1 for s in
                 (layout.action_space(i, continuous) for i in range(n_agents))]
        offsets = [sum(sizes[:i]) for i in range(n_agents)]
        moving = [i for i in range(n_agents) if layout.movable[i]]
        speaking = [i for i in range(n_agents) if not layout.silent[i]]

        def index(values: list[int]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.long, device=device)

        self._moving = index(moving) if len(moving) < n_agents else None
        self._speaking = index(speaking) if 0 < len(speaking) < n_agents else None
        self._n_speaking = len(speaking)
        # Continuous: columns of the concatenated actions; u = a[plus] - a[minus] per axis.
        plus, minus = ((1, 3), (2, 4)) if legacy else ((2, 4), (1, 3))
        self._plus = index([offsets[i] + k for i in moving for k in plus])
        self._minus = index([offsets[i] + k for i in moving for k in minus])
        self._legacy = legacy
        self._channels = index([offsets[i] + (MOVE_ACTIONS if layout.movable[i] else 0) + k
                                for i in speaking for k in range(layout.dim_c)])
        # Discrete: action = move + MOVE_ACTIONS * channel for agents that move and speak.
        self._moves = torch.tensor(_MOVES, device=device, dtype=dtype) * SENSITIVITY
        self._n_actions = index([int(layout.action_space(i, False).n) for i in range(n_agents)])  # type: ignore[attr-defined]
        self._movable = index([int(m) for m in layout.movable])
        self._divisor = index([MOVE_ACTIONS if m else 1 for m in layout.movable])
        self._not_silent = torch.tensor([not s for s in layout.silent], device=device, dtype=dtype)
        self._collide = all(layout.collide) and n_agents > 1
        size = torch.tensor(layout.size, device=device, dtype=dtype)
        self._dist_min = size[:, None] + size[None, :]
        self._eye = torch.eye(n_agents, device=device, dtype=dtype)

    def decode(self, actions: Sequence[Any], n_envs: int, device: torch.device, check: bool = True
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-agent actions -> controls ``u`` ``(n, A, 2)`` and utterances ``(n, A, dim_c)``;
        ``check=False``: discrete actions are not checked against their spaces (a read-back from
        the device; the compiled collection step's actions come from masked sampling)."""
        if self.continuous:
            return self._decode_continuous(actions, n_envs, device)
        layout = self.layout
        index = torch.cat([torch.as_tensor(a, device=device).reshape(n_envs, 1) for a in actions], 1).long()
        bad = (index < 0) | (index >= self._n_actions)
        if check and bool(bad.any()):
            agent = int(bad.any(0).nonzero()[0])
            raise ValueError(f"agent {agent}: an action is outside Discrete({int(self._n_actions[agent])})")
        # An immovable agent's move is 0 (no-op); a silent agent's channel is masked out.
        move = (index % MOVE_ACTIONS) * self._movable
        u = self._moves.index_select(0, move.flatten()).view(n_envs, layout.n_agents, DIM_P)
        channel = torch.nn.functional.one_hot(index // self._divisor, layout.dim_c)
        return u, channel.to(self.dtype) * self._not_silent[:, None]

    def _decode_continuous(self, actions: Sequence[Any], n: int, device: torch.device
                           ) -> tuple[torch.Tensor, torch.Tensor]:
        layout = self.layout
        # Clipped like mpe2's ClipOutOfBoundsWrapper (a new tensor: the inputs are kept).
        a = torch.cat([torch.as_tensor(x, device=device, dtype=torch.float32) for x in actions], 1)
        a = a.clamp(0.0, 1.0)
        # The differences in float32, the scaling in the world's dtype: as mpe2 does.
        moved = (a.index_select(1, self._plus) - a.index_select(1, self._minus)).to(self.dtype)
        moved = (moved * SENSITIVITY).view(n, -1, DIM_P)
        u = moved
        if self._moving is not None:
            u = torch.zeros(n, layout.n_agents, DIM_P, device=device, dtype=self.dtype)
            u.index_copy_(1, self._moving, moved)
        if self._n_speaking == 0:
            return u, torch.zeros(n, layout.n_agents, layout.dim_c, device=device, dtype=self.dtype)
        said = a.index_select(1, self._channels).to(self.dtype).view(n, self._n_speaking, layout.dim_c)
        if self._speaking is None:
            return u, said
        comm = torch.zeros(n, layout.n_agents, layout.dim_c, device=device, dtype=self.dtype)
        return u, comm.index_copy_(1, self._speaking, said)

    def step(self, world: World, u: torch.Tensor, comm: torch.Tensor) -> None:
        """Advance every world by one ``dt`` in place (mpe2's ``World.step``; ``legacy``:
        pettingzoo 1.22's, which moves with the velocity after this step's force)."""
        force = u + self._contact_forces(world.agent_pos) if self._collide else u
        if not self._legacy:
            world.agent_pos += world.agent_vel * DT
        world.agent_vel.mul_(1.0 - DAMPING).add_(force * DT)
        if self._legacy:
            world.agent_pos += world.agent_vel * DT
        world.comm.copy_(comm)  # in place: the compiled collection step keeps the world's tensors

    def _contact_forces(self, pos: torch.Tensor) -> torch.Tensor:
        """Sum over the other agents of mpe2's soft contact force, ``(n, A, 2)``."""
        delta = pos[:, :, None, :] - pos[:, None, :, :]
        dist = torch.linalg.vector_norm(delta, dim=-1)
        penetration = torch.nn.functional.softplus((self._dist_min - dist) / CONTACT_MARGIN)
        # The diagonal (an agent with itself) has delta 0: dividing by 1 there keeps it 0.
        scale = (CONTACT_FORCE * CONTACT_MARGIN) * penetration / (dist + self._eye)
        return (delta * scale[..., None]).sum(2)


def pairwise_dist(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``||a_i - b_j||`` for point sets ``(n, I, 2)`` and ``(n, J, 2)``: ``(n, I, J)``."""
    return torch.linalg.vector_norm(a[:, :, None, :] - b[:, None, :, :], dim=-1)


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
