"""Scripted opponents: a team whose agents act by a fixed rule, found through the registry.

A scripted kind is a stage kind of the ``script`` slot, registered at the bottom of its module
like any other::

    register("script", MyScriptConfig, lambda config, obs_spaces, act_spaces, seed: MyScript(...))

harl's own are the modules of this package (``registry.BUILTIN``); a user's is
``kind = "my_pkg.module:MyScriptConfig"``.  What a built script offers is
``harl.protocols.Script``.  This module holds only what every kind shares, so that the
registry's scan of the package imports nothing heavier than torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from harl import registry
from harl.errors import ConfigError
from harl.protocols import Script

SLOT = "script"


def script_entry(kind: str, where: str = "script.kind") -> registry.Entry:
    """The registered kind ``kind`` (harl's, ``"module:Name"`` or an entry point), or a ``ConfigError`` at ``where``."""
    try:
        entry = registry.resolve(SLOT, kind)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if entry is None:
        known = ", ".join(f'"{e.kind}"' for e in registry.kinds(SLOT))
        raise ConfigError(f'{where} = "{kind}" is not a scripted kind; known: {known}, or your own '
                          'as "my_pkg.module:MyScriptConfig" (registered with '
                          'harl.registry.register("script", MyScriptConfig, factory))')
    return entry


def build_script(config: Any, obs_spaces: Sequence[spaces.Space], act_spaces: Sequence[spaces.Space],
                 seed: int, where: str = "script.kind") -> Script:
    """The scripted agents of ``config``'s kind, once they have ``act`` (users' kinds are checked)."""
    entry = registry.entry_of(config)
    if entry.slot != SLOT or entry.factory is None:
        raise TypeError(f"{type(config).__qualname__} is not a scripted kind's config")
    script = entry.factory(config, list(obs_spaces), list(act_spaces), seed)
    registry.check_protocol(entry, script, where)
    return script


def category_sizes(space: spaces.Space) -> list[int] | None:
    """A categorical space's sub-action sizes (``[n]`` for Discrete), None for a Box."""
    if isinstance(space, spaces.Discrete):
        return [int(space.n)]
    if isinstance(space, spaces.MultiDiscrete):
        return [int(n) for n in np.asarray(space.nvec).ravel()]
    if isinstance(space, spaces.Box):
        return None
    raise ConfigError(f"a scripted team acts in Box, Discrete or MultiDiscrete action spaces, not {space!r}")


def box_bounds(space: spaces.Box) -> tuple[torch.Tensor, torch.Tensor]:
    """A Box's flattened low and high bounds as float32 tensors (what a policy's ``(E, dim)`` actions use)."""
    low = torch.as_tensor(np.asarray(space.low, dtype=np.float32).ravel())
    high = torch.as_tensor(np.asarray(space.high, dtype=np.float32).ravel())
    return low, high


def masks(avail: torch.Tensor | None, sizes: list[int], n_envs: int) -> list[torch.Tensor]:
    """One ``(E, n_j)`` boolean mask per sub-action (a MultiDiscrete's masks are concatenated); a row
    with no action allowed allows them all, since an action must be given."""
    if avail is None:
        return [torch.ones(n_envs, n, dtype=torch.bool) for n in sizes]
    if avail.shape[-1] != sum(sizes):
        raise ValueError(f"an action mask of width {avail.shape[-1]} for sub-actions of sizes {sizes}")
    parts = (avail.detach().to("cpu") > 0).split(sizes, -1)
    return [torch.where(m.any(-1, keepdim=True), m, torch.ones_like(m)) for m in parts]
