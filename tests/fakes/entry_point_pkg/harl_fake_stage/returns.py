"""``half_gae``: GAE advantages halved, a return computer found through an entry point."""

from __future__ import annotations

from typing import Any

import attrs

from harl.registry import register
from harl.returns.gae import GAE, GAEConfig, ReturnStats
from harl.settings import in_range, setting


@attrs.frozen
class HalfGAEConfig:
    """GAE whose advantages are scaled by ``scale``."""

    gamma: float = setting(0.99, "discount factor", in_range(0, 1))
    scale: float = setting(0.5, "factor on every advantage", in_range(0, None))


class HalfGAE:
    def __init__(self, config: HalfGAEConfig) -> None:
        self.config = config
        self.gae = GAE(GAEConfig(gamma=config.gamma))

    def compute(self, buffer: Any) -> ReturnStats:
        self.gae.compute(buffer)
        buffer.advantages = buffer.advantages * self.config.scale
        return ReturnStats(float(buffer.advantages.mean()), float(buffer.returns.mean()))


register("returns", HalfGAEConfig, lambda config, parts: HalfGAE(config), family="on_policy")
