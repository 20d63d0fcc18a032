"""Air combat on JSBSim: F-16s in the spirit of the Light Aircraft Game (LAG).

``[env] kind = "air_combat"`` with ``task = "heading"`` (one aircraft flies to changing
heading / altitude / speed targets, the warm-up) or ``task = "2v2_noweapon"`` (two
learning F-16s against two scripted ones, rewarded for posture, altitude safety and
events).  Written from the published task description, not from LAG's code.

One concept per module: ``aircraft`` (JSBSim wrapper), ``actions`` (policy action ->
stick and throttle), ``geometry`` (who is on whose tail), ``scripted_pilot`` (the
opponents' autopilot), ``heading`` and ``dogfight`` (the tasks), ``config``.
jsbsim (``pip install "harl[lag]"``) is imported only when an environment is built.
"""

from typing import Any

from harl.envs.air_combat.config import TASKS, AirCombatConfig
from harl.registry import register


def make_air_combat_env(config: AirCombatConfig) -> Any:
    """The task's environment (``HeadingEnv`` or ``DogfightEnv``); jsbsim is imported here."""
    if config.task == "heading":
        from harl.envs.air_combat.heading import HeadingEnv

        return HeadingEnv(config)
    from harl.envs.air_combat.dogfight import DogfightEnv

    return DogfightEnv(config)


__all__ = ["TASKS", "AirCombatConfig", "make_air_combat_env"]


register("env", AirCombatConfig, make_air_combat_env)
