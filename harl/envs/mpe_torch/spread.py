"""simple_spread (mpe2 ``simple_spread_v3``): N agents cover N landmarks without colliding.

Observation of agent i: its velocity, its position, every landmark relative to it, every
other agent relative to it, the other agents' utterances (all zero: agents are silent).
Reward: ``(1 - local_ratio) * global + local_ratio * local_i`` where global is minus the sum
over landmarks of the nearest agent's distance and local_i is minus the number of other
agents overlapping agent i (centres closer than the sum of radii).
"""

from __future__ import annotations

import torch

from harl.envs.mpe_torch.world import Layout, World, pairwise_dist, relative

AGENT_SIZE = 0.15


def off_diagonal(pairs: torch.Tensor) -> torch.Tensor:
    """``(n, A, 2A)`` rows of per-agent views of all agents -> ``(n, A, 2(A-1))`` without each
    agent's view of itself, the others in index order (as mpe2 lists them).  Index arithmetic
    instead of a gather: drop the first entry of the flattened ``A x A`` grid and every diagonal
    entry then starts a row of ``A + 1``."""
    n, a, _ = pairs.shape
    grid = pairs.reshape(n, a * a, 2)[:, 1:].reshape(n, a - 1, a + 1, 2)[:, :, :a]
    return grid.reshape(n, a, 2 * (a - 1))


class Spread:
    """Observations and rewards of simple_spread over a batch of worlds."""

    def __init__(self, n_agents: int, local_ratio: float, device: torch.device, dtype: torch.dtype) -> None:
        self.layout = Layout(
            movable=(True,) * n_agents, silent=(True,) * n_agents, collide=(True,) * n_agents,
            size=(AGENT_SIZE,) * n_agents, n_landmarks=n_agents, dim_c=2, n_goals=0,
        )
        self.local_ratio = local_ratio
        self.obs_sizes = [4 + 2 * n_agents + 4 * (n_agents - 1)] * n_agents
        self._not_self = ~torch.eye(n_agents, dtype=torch.bool, device=device)

    def observe(self, world: World) -> torch.Tensor:
        """The agents' observations side by side, ``(n, n_agents * obs_size)``."""
        pos = world.agent_pos
        n, n_agents, _ = pos.shape
        # Agents are silent: the other agents' utterances are zeros, as in mpe2.
        silence = pos.new_zeros(n, n_agents, (n_agents - 1) * world.comm.shape[2])
        obs = torch.cat([
            world.agent_vel, pos, relative(world.landmark_pos, pos), off_diagonal(relative(pos, pos)),
            silence,
        ], dim=2)
        return obs.flatten(1)

    def rewards(self, world: World) -> torch.Tensor:
        global_reward = -pairwise_dist(world.landmark_pos, world.agent_pos).amin(2).sum(1)
        apart = pairwise_dist(world.agent_pos, world.agent_pos)
        collisions = ((apart < 2 * AGENT_SIZE) & self._not_self).sum(2)
        return (global_reward[:, None] * (1 - self.local_ratio)
                - collisions.to(apart.dtype) * self.local_ratio)
