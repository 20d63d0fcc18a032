"""harl's two baseline scripts: ``random`` (what any learned policy must beat) and ``noop``
(an opponent that stands still, to check that a team can win at all).

Actions come out as a policy's do, one float tensor per agent: ``(E, 1)`` category indices for
a Discrete space (``(E, k)`` for a MultiDiscrete's ``k`` sub-actions), ``(E, dim)`` for a Box.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import torch
from gymnasium import spaces

from harl.errors import ConfigError
from harl.registry import register
from harl.settings import kind_field
from harl.teams.scripted import box_bounds, category_sizes, masks


@attrs.frozen
class RandomScriptConfig:
    """``[teams.NAME.script] kind = "random"``: each agent acts uniformly at random: over its available actions, or in its Box."""

    kind: str = kind_field("random")


@attrs.frozen
class NoopScriptConfig:
    """``[teams.NAME.script] kind = "noop"``: each agent takes action 0 (the lowest available one), or its Box's zero clipped into bounds."""

    kind: str = kind_field("noop")


class _Agents:
    """Per agent: categorical sub-action sizes, or a Box's flattened bounds."""

    def __init__(self, act_spaces: Sequence[spaces.Space], kind: str) -> None:
        self.sizes = [category_sizes(s) for s in act_spaces]
        self.bounds = [box_bounds(s) if isinstance(s, spaces.Box) else None for s in act_spaces]
        self.kind = kind

    def check(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None) -> None:
        if len(obs) != len(self.sizes) or (avail is not None and len(avail) != len(self.sizes)):
            raise ValueError(f'script "{self.kind}" was built for {len(self.sizes)} agents, got observations of '
                             f"{len(obs)}" + ("" if avail is None else f" and masks of {len(avail)}"))


class RandomScript:
    """Uniform actions from its own seeded CPU generator, so its draws do not depend on the device
    or on anything else the run draws."""

    def __init__(self, act_spaces: Sequence[spaces.Space], seed: int) -> None:
        self.agents = _Agents(act_spaces, "random")
        for i, bounds in enumerate(self.agents.bounds):
            if bounds is not None and not all(math.isfinite(float(v)) for b in bounds for v in b):
                raise ConfigError(f'script kind "random": agent {i}\'s action space {act_spaces[i]} is unbounded, '
                                  "so it has no uniform distribution; use a bounded Box or another script")
        self.generator = torch.Generator().manual_seed(int(seed))

    def act(self, obs: list[torch.Tensor], avail: list[torch.Tensor | None] | None,
            starts: torch.Tensor) -> list[torch.Tensor]:
        self.agents.check(obs, avail)
        actions = []
        for i, (sizes, bounds) in enumerate(zip(self.agents.sizes, self.agents.bounds)):
            n = obs[i].shape[0]
            if bounds is not None:
                low, high = bounds
                action = low + (high - low) * torch.rand(n, low.numel(), generator=self.generator)
            else:
                allowed = masks(None if avail is None else avail[i], sizes or [], n)
                action = torch.stack([torch.multinomial(m.float(), 1, generator=self.generator).squeeze(-1)
                                      for m in allowed], -1).float()
            actions.append(action.to(obs[i].device))
        return actions


class NoopScript:
    """The same "do nothing" action every step; where action 0 is masked (SMAX's no-op is kept for
    the dead), the lowest-numbered available one (stop)."""

    def __init__(self, act_spaces: Sequence[spaces.Space]) -> None:
        self.agents = _Agents(act_spaces, "noop")
        self.box_actions = [None if b is None else torch.clamp(torch.zeros_like(b[0]), b[0], b[1])
                            for b in self.agents.bounds]

    def act(self, obs: list[torch.Tensor], avail: list[torch.Tensor | None] | None,
            starts: torch.Tensor) -> list[torch.Tensor]:
        self.agents.check(obs, avail)
        actions = []
        for i, (sizes, box) in enumerate(zip(self.agents.sizes, self.box_actions)):
            n = obs[i].shape[0]
            if box is not None:
                action = box.expand(n, -1).clone()
            else:  # argmax of a boolean mask: the first allowed index
                allowed = masks(None if avail is None else avail[i], sizes or [], n)
                action = torch.stack([m.to(torch.uint8).argmax(-1) for m in allowed], -1).float()
            actions.append(action.to(obs[i].device))
        return actions


def _random(config: Any, obs_spaces: Sequence[spaces.Space], act_spaces: Sequence[spaces.Space],
            seed: int) -> RandomScript:
    return RandomScript(act_spaces, seed)


def _noop(config: Any, obs_spaces: Sequence[spaces.Space], act_spaces: Sequence[spaces.Space],
          seed: int) -> NoopScript:
    return NoopScript(act_spaces)


register("script", RandomScriptConfig, _random, default=True)
register("script", NoopScriptConfig, _noop)
