"""simple_reference (mpe2 ``simple_reference_v3``): two agents, each knows the other's goal.

Agent i's goal landmark ``g_i`` is where the *other* agent should go; agent i sees its
velocity, the three landmarks relative to it, the colour of ``g_i`` and the other agent's
utterance (10 channels).  Local reward of i: minus the distance from the other agent to
``g_i``; global: the mean of both; reward ``(1 - local_ratio) * global + local_ratio * local``.
"""

from __future__ import annotations

import torch

from harl.envs.mpe_torch.world import Layout, World, relative

LANDMARK_COLORS = ((0.75, 0.25, 0.25), (0.25, 0.75, 0.25), (0.25, 0.25, 0.75))


class Reference:
    """Observations and rewards of simple_reference over a batch of worlds."""

    def __init__(self, local_ratio: float, device: torch.device, dtype: torch.dtype) -> None:
        self.layout = Layout(
            movable=(True, True), silent=(False, False), collide=(False, False),
            size=(0.05, 0.05), n_landmarks=3, dim_c=10, n_goals=2,
        )
        self.local_ratio = local_ratio
        self.obs_sizes = [21, 21]
        self._colors = torch.tensor(LANDMARK_COLORS, device=device, dtype=dtype)

    def observe(self, world: World) -> torch.Tensor:
        """Both agents' observations side by side, ``(n, 42)``."""
        pos = world.agent_pos
        n = pos.shape[0]
        colors = self._colors.index_select(0, world.goals.flatten()).view(n, 2, 3)
        # flip(1): each agent hears the other one.
        obs = torch.cat([world.agent_vel, relative(world.landmark_pos, pos), colors,
                         world.comm.flip(1)], dim=2)
        return obs.flatten(1)

    def rewards(self, world: World) -> torch.Tensor:
        goal_pos = world.landmark_pos.gather(1, world.goals[:, :, None].expand(-1, -1, 2))
        local = -torch.linalg.vector_norm(world.agent_pos.flip(1) - goal_pos, dim=-1)
        global_reward = local.sum(1, keepdim=True) / 2
        return global_reward * (1 - self.local_ratio) + local * self.local_ratio
