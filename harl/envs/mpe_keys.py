"""The keys ``[env] kind = "mpe"`` and ``kind = "mpe_torch"`` share, defined once.

Each kind keeps its own attrs class (the env registry dispatches on the class, and each
accepts exactly the options its backend implements, ``kind`` first as a resolved pipeline
writes it); the fields they have in common are made here, so a default, a check or a
``harl stages`` line cannot drift between the two.  ``team_reward`` and ``variant`` keep a
doc line of their own per backend (what each says about mpe2 differs).
"""

from __future__ import annotations

from typing import Any

from harl.settings import in_range, one_of, positive, setting

SCENARIOS = ("simple_spread", "simple_reference", "simple_speaker_listener")
"""The cooperative scenarios, which both kinds play."""
COMPETITIVE_SCENARIOS = ("simple_tag", "simple_adversary", "simple_push", "simple_world_comm")
"""mpe2's scenarios with two sides (adversaries and good agents); ``kind = "mpe"`` plays them."""


def scenario(choices: tuple[str, ...] = SCENARIOS) -> Any:
    return setting("simple_spread", "MPE scenario to play", one_of(choices))


def continuous_actions() -> Any:
    return setting(True, "Box actions in [0, 1] when true, Discrete actions when false")


def max_episode_steps() -> Any:
    return setting(25, "steps per episode before truncation (PettingZoo's max_cycles)", positive())


def n_agents() -> Any:
    return setting(3, "agents (and landmarks); only used by simple_spread", in_range(1))


def local_ratio() -> Any:
    return setting(0.5, "weight of the local vs global reward (simple_spread, simple_reference)",
                   in_range(0.0, 1.0))
