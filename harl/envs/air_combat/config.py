"""``[env] kind = "air_combat"``: which task, which action variant, and the task's limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from harl.envs.air_combat.actions import ACTION_TYPES
from harl.envs.air_combat.tasks import ARTILLERY_TASKS, HARL_NAMES, HIERARCHY, SHORT_NAMES, canonical
from harl.settings import InvalidSetting, each_positive, in_range, kind_field, one_of, positive, setting

TASKS = SHORT_NAMES
SIDES = ("two_teams", "one_team")


def _known_task(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or canonical(value) is None:
        raise InvalidSetting(attribute.name, (
            f"unknown air-combat task {value!r}; harl's names: {', '.join(SHORT_NAMES)}; HARL's lag names "
            f"(scenario/task paths, each the same task as a harl name): {', '.join(HARL_NAMES)}"),
            suggest_default=False)


@attrs.frozen
class AirCombatConfig:
    """F-16s in JSBSim: the heading task, harl's 2-vs-2 dogfight, or one of LAG's combat tasks."""

    kind: str = kind_field("air_combat")
    task: str = setting(
        "heading", '"heading": one F-16 flies to changing heading/altitude/speed targets; '
        '"2v2_noweapon": two learning F-16s against two scripted ones; the LAG combat tasks '
        '("1v1_noweapon", "1v1_dodge_missile", "2v2_shoot_missile_hierarchy", ... and their '
        '"_selfplay" variants; docs/environments/air-combat.md), each also by HARL\'s name '
        '("2v2/ShootMissile/HierarchyVsBaseline")', _known_task,
    )
    action_type: str = setting(
        "continuous", '"continuous": Box(-1, 1, (4,)) stick and throttle; "multidiscrete": '
        "MultiDiscrete([41, 41, 41, 30]) settings of the same", one_of(ACTION_TYPES),
    )
    max_episode_steps: int = setting(1000, "env steps per episode before truncation", positive())
    sim_steps_per_step: int = setting(
        12, "JSBSim steps (at 60 Hz) per env step; 12 is 0.2 s of flight", positive()
    )
    floor_altitude_m: float = setting(
        2500.0, "an aircraft at or below this altitude (m) counts as crashed (LAG's altitude_limit)",
        in_range(0.0),
    )
    overload_g: float = setting(
        10.0, "LAG's Overload (acceleration_limit_x/y/z): once JSBSim's clock is past 10 s, an aircraft "
        "with |nx| or |ny| or |nz + 1| above this (g) is lost; LAG's ExtremeState also ends one above "
        "10 g on any axis from the start, whatever this is", positive(),
    )
    min_airspeed_mps: float = setting(
        0.0, "harl's own stall limit: an aircraft slower than this (m/s) is lost; 0 (the default, as "
        "LAG, which has none) = off", in_range(0.0),
    )
    crash_penalty: float = setting(
        200.0, "heading and 2v2_noweapon: reward subtracted when a learning aircraft crashes, overloads "
        "or stalls", in_range(0.0)
    )
    lost_aircraft_penalty: bool = setting(
        False, "LAG's 2v2 combat tasks: also pay -200 the step an aircraft is shot down or crashes "
        "(false, LAG's way: a shot-down aircraft is paid 0 that step, a crashed one its step's reward "
        "without the -200, as LAG's MultipleCombatTask pays a lost aircraft nothing and checks crashes "
        "after paying); 1v1 tasks always pay the -200, as LAG's SingleCombatTask does",
    )
    max_heading_change_deg: float = setting(
        90.0, "heading task: each new target heading is up to this far from the last one",
        in_range(0.0, 180.0),
    )
    max_altitude_change_m: float = setting(
        1000.0, "heading task: each new target altitude is up to this far from the last one",
        in_range(0.0),
    )
    max_speed_change_mps: float = setting(
        50.0, "heading task: each new target speed is up to this far from the last one", in_range(0.0)
    )
    target_interval_s: float = setting(
        30.0, "heading task: seconds per target; missing it by more than 10 degrees at the "
        "end of its time ends the episode (terminated)", positive(),
    )
    opponent: str = setting(
        "pursue", '2v2: the scripted opponents\' tactic: "pursue" (pure pursuit of the nearest '
        'learner) or "cruise" (straight and level)', one_of(("pursue", "cruise")),
    )
    sound_range_m: float = setting(
        3000.0, "2v2: posture counts in full within this range of an opponent", positive()
    )
    safe_altitude_m: float = setting(
        4000.0, "2v2: below this altitude a learner is penalised, down to -1 at the floor",
        positive(),
    )
    sides: str = setting(
        "two_teams", 'self-play tasks: "two_teams": red and blue are agent groups (a pipeline\'s '
        '[teams] can pit a learner against its snapshots) and the env names the winner; "one_team": '
        "no groups, every aircraft one learning team (HARL's way)", one_of(SIDES),
    )
    artillery: bool = setting(
        False, "combat tasks: LAG's use_artillery (off in every HARL config): an aircraft "
        "pointing its nose within 30 degrees of an opponent within 3 km drains the opponent's blood "
        "(100 at the start) by up to 1 a step, and at 0 shoots it down; without it a no-weapon game "
        "is won only by the other side crashing",
    )
    controller: str = setting(
        "", "hierarchy tasks: the frozen flight controller's weight file (a state dict from a heading "
        'run, python -m harl.envs.air_combat.controller); "" = the one harl ships',
    )
    controller_hidden_sizes: list[int] = setting(
        factory=lambda: [128, 128], doc="hierarchy tasks: the controller network's hidden sizes",
        check=each_positive(),
    )
    controller_activation: str = setting(
        "relu", "hierarchy tasks: the controller network's activation",
        one_of(("relu", "tanh", "leaky_relu", "elu")),
    )

    @property
    def task_name(self) -> str:
        """harl's short name of ``task`` (HARL's path names map to one)."""
        return canonical(self.task) or self.task

    @property
    def controller_path(self) -> Path:
        from harl.envs.air_combat.controller import SHIPPED

        return Path(self.controller) if self.controller else SHIPPED


    def __attrs_post_init__(self) -> None:
        if self.safe_altitude_m <= self.floor_altitude_m:
            raise InvalidSetting(
                "safe_altitude_m", f"expected a value above floor_altitude_m "
                f"({self.floor_altitude_m}), got {self.safe_altitude_m}", suggest_default=False,
            )
        if self.artillery and self.task_name not in ARTILLERY_TASKS:
            raise InvalidSetting("artillery", (
                f"task {self.task!r} has no artillery: harl plays LAG's guns (use_artillery) in the combat "
                f"tasks ({', '.join(ARTILLERY_TASKS)}), not in heading or harl's own 2v2_noweapon env; "
                "set artillery = false or pick one of them"),
                suggest_default=False)
        if self.task_name in HIERARCHY:
            from harl.envs.air_combat.controller import weights_problem

            problem = weights_problem(self.controller_path, self.controller_hidden_sizes,
                                      self.controller_activation)
            if problem is not None:
                raise InvalidSetting("controller", (
                    f"task {self.task!r} flies through a frozen flight controller of hidden sizes "
                    f"{list(self.controller_hidden_sizes)} ({self.controller_activation}), and {problem}. "
                    "Give controller the path of a weight file made from a heading run "
                    "(python -m harl.envs.air_combat.controller CHECKPOINT OUT), with "
                    "controller_hidden_sizes and controller_activation as that run's [policy], or "
                    'leave controller = "" for the one harl ships'), suggest_default=False)
