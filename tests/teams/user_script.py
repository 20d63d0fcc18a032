"""A user's scripted kinds for the tests: one good, one that builds something without ``act``."""

from __future__ import annotations

from typing import Any

import attrs
import torch

from harl.registry import register
from harl.settings import in_range, setting


@attrs.frozen
class ConstantScriptConfig:
    """Every agent plays ``action`` (a category index)."""

    action: int = setting(1, "the category index every agent plays", in_range(0, None))


class ConstantScript:
    def __init__(self, action: int, n_agents: int) -> None:
        self.action, self.n_agents = action, n_agents

    def act(self, obs: list[torch.Tensor], avail: list[torch.Tensor | None] | None,
            starts: torch.Tensor) -> list[torch.Tensor]:
        return [torch.full((o.shape[0], 1), float(self.action)) for o in obs]


@attrs.frozen
class SilentScriptConfig:
    """Builds an object that cannot act."""


register("script", ConstantScriptConfig,
         lambda config, obs_spaces, act_spaces, seed: ConstantScript(config.action, len(act_spaces)))
register("script", SilentScriptConfig, lambda config, obs_spaces, act_spaces, seed: object())


def unused(_: Any) -> None:
    """Not a config: refused as a kind."""
