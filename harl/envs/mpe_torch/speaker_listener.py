"""simple_speaker_listener (mpe2 ``simple_speaker_listener_v4``): a speaker that cannot move
tells a listener that cannot speak which of three landmarks to reach.

The speaker sees only the goal landmark's colour; the listener sees its velocity, the
landmarks relative to it and the speaker's utterance (3 channels).  Both get minus the
squared distance from the listener to the goal (mpe2 uses no local/global blend here).
"""

from __future__ import annotations

import torch

from harl.envs.mpe_torch.world import Layout, World, relative

LANDMARK_COLORS = ((0.65, 0.15, 0.15), (0.15, 0.65, 0.15), (0.15, 0.15, 0.65))


class SpeakerListener:
    """Observations and rewards of simple_speaker_listener over a batch of worlds."""

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        self.layout = Layout(
            movable=(False, True), silent=(False, True), collide=(False, False),
            size=(0.075, 0.075), n_landmarks=3, dim_c=3, n_goals=1,
        )
        self.obs_sizes = [3, 11]
        self._colors = torch.tensor(LANDMARK_COLORS, device=device, dtype=dtype)

    def observe(self, world: World) -> torch.Tensor:
        """The speaker's then the listener's observation, ``(n, 3 + 11)``."""
        listener = world.agent_pos[:, 1:2]
        speaker_obs = self._colors.index_select(0, world.goals[:, 0])
        listener_obs = torch.cat([
            world.agent_vel[:, 1], relative(world.landmark_pos, listener)[:, 0], world.comm[:, 0],
        ], dim=1)
        return torch.cat([speaker_obs, listener_obs], dim=1)

    def rewards(self, world: World) -> torch.Tensor:
        goal = world.landmark_pos.gather(1, world.goals[:, :, None].expand(-1, -1, 2))[:, 0]
        reward = -(world.agent_pos[:, 1] - goal).square().sum(-1)
        return reward[:, None].expand(-1, 2)
