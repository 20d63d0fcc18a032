"""Air combat on JSBSim: F-16s in the spirit of the Light Aircraft Game (LAG).

``[env] kind = "air_combat"`` with ``task = "heading"`` (one aircraft flies to changing
heading / altitude / speed targets, the warm-up), ``task = "2v2_noweapon"`` (two
learning F-16s against two scripted ones, rewarded for posture, altitude safety and
events), or one of LAG's combat tasks (``tasks.COMBAT``: 1v1 and 2v2, missiles, a frozen
flight controller, self-play), each also by HARL's ``lag.yaml`` name.

One concept per module: ``aircraft`` (JSBSim wrapper), ``actions`` (policy action ->
stick and throttle), ``geometry`` (who is on whose tail), ``scripted_pilot`` (the
opponents' autopilot), ``missile`` (guidance and flight), ``rewards`` (LAG's combat
rewards), ``controller`` (the frozen low-level pilot), ``tasks`` (the names), ``heading``,
``dogfight`` and ``combat`` (the envs), ``seeded`` (their generator state), ``config``.
jsbsim (``pip install "harl[lag]"``) is imported only when an environment is built.
"""

from typing import Any

from harl.envs.air_combat.config import TASKS, AirCombatConfig
from harl.registry import register


def make_air_combat_env(config: AirCombatConfig) -> Any:
    """The task's environment (``HeadingEnv``, ``DogfightEnv`` or ``CombatEnv``); jsbsim is imported here."""
    if config.task_name == "heading":
        from harl.envs.air_combat.heading import HeadingEnv

        return HeadingEnv(config)
    if config.task_name == "2v2_noweapon":
        from harl.envs.air_combat.dogfight import DogfightEnv

        return DogfightEnv(config)
    from harl.envs.air_combat.combat import CombatEnv

    return CombatEnv(config)


__all__ = ["TASKS", "AirCombatConfig", "make_air_combat_env"]


register("env", AirCombatConfig, make_air_combat_env, tracks=True)  # harl render --format acmi|png3d
