"""``[env] kind = "mpe_torch"``: the keys of ``kind = "mpe"`` plus the torch device.

A kind of its own (not a ``backend`` key on ``kind = "mpe"``) because the env registry
dispatches on the config class: a second class registers (``vectorised=True``) without
touching the mpe2 adapter, and a shipped MPE pipeline switches by changing one word.
Its own class rather than derived from ``MPEConfig`` so this backend accepts exactly the
options it implements; the keys both kinds have are made by ``harl.envs.mpe_keys``.
"""

from __future__ import annotations

from typing import Any

import attrs

from harl.envs import mpe_keys
from harl.envs.mpe_keys import SCENARIOS
from harl.envs.mpe_legacy import VARIANTS
from harl.settings import InvalidSetting, kind_field, one_of, setting

__all__ = ["SCENARIOS", "MPETorchConfig"]


def _device(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    """Checked by name here (torch is not imported with the env registry); whether CUDA is
    there is checked when the env is built."""
    if not (value in ("cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit())):
        raise InvalidSetting(attribute.name, f'expected one of: cpu, cuda, cuda:N; got "{value}"')


@attrs.frozen
class MPETorchConfig:
    """Which MPE scenario to play, how, and on which torch device."""

    kind: str = kind_field("mpe_torch")
    scenario: str = mpe_keys.scenario()
    continuous_actions: bool = mpe_keys.continuous_actions()
    max_episode_steps: int = mpe_keys.max_episode_steps()
    n_agents: int = mpe_keys.n_agents()
    local_ratio: float = mpe_keys.local_ratio()
    team_reward: bool = setting(
        True, "every agent gets the sum of all agents' rewards (HARL's MPE convention), "
        "else each agent its own mpe2 reward; the episode return is the team's sum either way",
    )
    variant: str = setting(
        "mpe2", "mpe2's dynamics, or pettingzoo_1.22: HARL's MPE (agents move with the new velocity, "
        "HARL's continuous action signs, simple_spread's self-collision term), as the mpe kind's variant",
        one_of(VARIANTS))
    device: str = setting("cpu", "torch device the worlds are simulated on (cpu, cuda, cuda:N)", _device)
    precision: str = setting(
        "float64", "dtype of the simulated world; observations and rewards are float32 either way. "
        "float64 agrees with mpe2 (float64 numpy) to 1e-6; float32 drifts to ~1e-4 within an "
        "episode where agents touch (stiff contact forces)", one_of(("float64", "float32")),
    )
