"""The air-combat tasks by harl's short names and by HARL's ``lag.yaml`` names, and what each one is.

HARL names a task by scenario and path (``MultipleCombat`` ``2v2/ShootMissile/HierarchyVsBaseline``);
``[env] task`` takes that path or harl's short name (``2v2_shoot_missile_hierarchy``).  Each combat
task is a ``CombatSpec``: aircraft per side, weapons, whether a frozen controller flies for the
policy, whether the other side learns too, and the reward and launch settings of HARL's config.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class CombatSpec:
    """One LAG combat task's facts (HARL's yaml, in harl's units)."""

    per_side: int
    weapons: str
    """``none``; ``dodge``: every aircraft with missiles fires by LAG's rule (a 1 s lock within
    the attack angle and distance); ``shoot``: the policy's last sub-action fires."""
    hierarchy: bool
    selfplay: bool
    missiles: tuple[int, int]
    """Missiles each red and each blue aircraft carries."""
    separation_deg: float
    """Blue starts this many degrees of latitude north of red."""
    posture_scale: float
    missile_posture: bool
    shoot_penalty: bool
    launch_limits: bool = True
    """``shoot``: whether a launch needs the attack angle, distance and interval (LAG's 1v1 shoot
    tasks fire on the action alone)."""
    min_attack_interval: int = 125
    baseline: str = "pursue"
    """The scripted side's pilot (vs-baseline tasks): ``pursue`` or ``maneuver``."""


_1V1_NONE = dict(per_side=1, weapons="none", missiles=(0, 0), separation_deg=0.05, posture_scale=100.0,
                 missile_posture=False, shoot_penalty=False)
_1V1_DODGE = dict(per_side=1, weapons="dodge", posture_scale=15.0, missile_posture=True, shoot_penalty=False)
_1V1_SHOOT = dict(per_side=1, weapons="shoot", separation_deg=0.2, posture_scale=15.0, missile_posture=False,
                  shoot_penalty=True, launch_limits=False)
_2V2 = dict(per_side=2, separation_deg=0.1, posture_scale=15.0, shoot_penalty=False)

COMBAT: dict[str, CombatSpec] = {
    "1v1_noweapon": CombatSpec(**_1V1_NONE, hierarchy=False, selfplay=False),  # type: ignore[arg-type]
    "1v1_noweapon_selfplay": CombatSpec(**_1V1_NONE, hierarchy=False, selfplay=True),  # type: ignore[arg-type]
    "1v1_noweapon_hierarchy_selfplay": CombatSpec(**_1V1_NONE, hierarchy=True, selfplay=True),  # type: ignore[arg-type]
    "1v1_dodge_missile": CombatSpec(**_1V1_DODGE, missiles=(0, 1), separation_deg=0.2,  # type: ignore[arg-type]
                                    hierarchy=False, selfplay=False),
    "1v1_dodge_missile_hierarchy": CombatSpec(**_1V1_DODGE, missiles=(0, 1), separation_deg=0.2,  # type: ignore[arg-type]
                                              hierarchy=True, selfplay=False),
    "1v1_dodge_missile_selfplay": CombatSpec(**_1V1_DODGE, missiles=(1, 1), separation_deg=0.05,  # type: ignore[arg-type]
                                             hierarchy=False, selfplay=True),
    "1v1_dodge_missile_hierarchy_selfplay": CombatSpec(**_1V1_DODGE, missiles=(1, 1),  # type: ignore[arg-type]
                                                       separation_deg=0.17, hierarchy=True, selfplay=True),
    "1v1_shoot_missile_selfplay": CombatSpec(**_1V1_SHOOT, missiles=(2, 2), hierarchy=False,  # type: ignore[arg-type]
                                             selfplay=True),
    "1v1_shoot_missile_hierarchy": CombatSpec(**_1V1_SHOOT, missiles=(2, 0), hierarchy=True,  # type: ignore[arg-type]
                                              selfplay=False, baseline="maneuver"),
    "1v1_shoot_missile_hierarchy_selfplay": CombatSpec(**_1V1_SHOOT, missiles=(2, 2), hierarchy=True,  # type: ignore[arg-type]
                                                       selfplay=True, min_attack_interval=25),
    "2v2_noweapon_hierarchy": CombatSpec(**_2V2, weapons="none", missiles=(0, 0), missile_posture=False,  # type: ignore[arg-type]
                                         hierarchy=True, selfplay=False),
    "2v2_noweapon_selfplay": CombatSpec(**_2V2, weapons="none", missiles=(0, 0), missile_posture=False,  # type: ignore[arg-type]
                                        hierarchy=False, selfplay=True),
    "2v2_noweapon_hierarchy_selfplay": CombatSpec(**_2V2, weapons="none", missiles=(0, 0),  # type: ignore[arg-type]
                                                  missile_posture=False, hierarchy=True, selfplay=True),
    "2v2_shoot_missile_hierarchy": CombatSpec(**_2V2, weapons="shoot", missiles=(2, 2), missile_posture=True,  # type: ignore[arg-type]
                                              hierarchy=True, selfplay=False, baseline="maneuver"),
    "2v2_shoot_missile_hierarchy_selfplay": CombatSpec(**_2V2, weapons="shoot", missiles=(2, 2),  # type: ignore[arg-type]
                                                       missile_posture=True, hierarchy=True, selfplay=True),
}
"""harl's combat tasks (the two others, ``heading`` and ``2v2_noweapon``, are their own envs).

HARL's ``2v2/NoWeapon/vsBaseline`` is hierarchical (its yaml's task is
``hierarchical_multiplecombat_vs_baseline``): ``2v2_noweapon_hierarchy``.  ``2v2_noweapon`` is
harl's own posture fight with stick and throttle (``dogfight``), not one of LAG's tasks."""

HARL_NAMES: dict[str, str] = {
    "1/heading": "heading",
    "1v1/NoWeapon/vsBaseline": "1v1_noweapon",
    "1v1/DodgeMissile/vsBaseline": "1v1_dodge_missile",
    "1v1/DodgeMissile/HierarchyVsBaseline": "1v1_dodge_missile_hierarchy",
    "2v2/NoWeapon/vsBaseline": "2v2_noweapon_hierarchy",
    "2v2/ShootMissile/HierarchyVsBaseline": "2v2_shoot_missile_hierarchy",
    "1v1/NoWeapon/Selfplay": "1v1_noweapon_selfplay",
    "1v1/NoWeapon/HierarchySelfplay": "1v1_noweapon_hierarchy_selfplay",
    "1v1/DodgeMissile/Selfplay": "1v1_dodge_missile_selfplay",
    "1v1/DodgeMissile/HierarchySelfplay": "1v1_dodge_missile_hierarchy_selfplay",
    "1v1/ShootMissile/Selfplay": "1v1_shoot_missile_selfplay",
    "1v1/ShootMissile/HierarchyVsBaseline": "1v1_shoot_missile_hierarchy",
    "1v1/ShootMissile/HierarchySelfplay": "1v1_shoot_missile_hierarchy_selfplay",
    "2v2/NoWeapon/Selfplay": "2v2_noweapon_selfplay",
    "2v2/NoWeapon/HierarchySelfplay": "2v2_noweapon_hierarchy_selfplay",
    "2v2/ShootMissile/HierarchySelfplay": "2v2_shoot_missile_hierarchy_selfplay",
}
"""HARL's task paths (``lag.yaml``'s six first, then its self-play configs) -> harl's names."""

LAG_YAML_TASKS = tuple(list(HARL_NAMES)[:6])
"""The six tasks HARL's ``lag.yaml`` offers (its default: ``2v2/ShootMissile/HierarchyVsBaseline``)."""
SHORT_NAMES = ("heading", "2v2_noweapon", *COMBAT)
HIERARCHY = tuple(name for name, spec in COMBAT.items() if spec.hierarchy)
ARTILLERY_TASKS = tuple(COMBAT)
"""The tasks that take LAG's ``use_artillery`` (every combat task's step calls its single-combat step;
``2v2_noweapon`` is harl's own dogfight env, which has none)."""


def canonical(task: str) -> str | None:
    """harl's short name of ``task`` (a short name or HARL's path), or None if neither."""
    if task in SHORT_NAMES:
        return task
    return HARL_NAMES.get(task)
