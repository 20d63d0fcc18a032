"""MPE (simple_spread, simple_reference, simple_speaker_listener) stepped as torch tensors.

``[env] kind = "mpe_torch"`` takes the same keys as ``kind = "mpe"`` (plus ``device``) and
plays the same game: mpe2's physics, observations, state and rewards, reproduced in float32
and batched over all ``n_envs`` worlds (``tests/envs/test_mpe_torch.py`` pins it to mpe2).
It is a natively vectorised, tensor-native kind like VMAS: one simulator for the batch.

Layout: ``world.py`` (the batched world and its physics), one module per scenario
(observations, rewards, initial-state distribution), ``vector.py`` (the ``VectorEnv``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harl.envs.mpe_torch.config import MPETorchConfig
from harl.registry import register

if TYPE_CHECKING:
    from harl.envs.mpe_torch.vector import MPETorchVectorEnv

__all__ = ["MPETorchConfig", "make_mpe_torch_vector_env"]


def make_mpe_torch_vector_env(config: MPETorchConfig, n_envs: int, seed: int = 0) -> MPETorchVectorEnv:
    """One simulator of ``n_envs`` MPE worlds (torch is imported here, not by the registry,
    so subprocess env workers, which import the registry, stay free of it)."""
    from harl.envs.mpe_torch.vector import MPETorchVectorEnv

    return MPETorchVectorEnv(config, n_envs, seed)


register("env", MPETorchConfig, make_mpe_torch_vector_env, vectorised=True)
