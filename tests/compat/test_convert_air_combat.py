"""harl.compat on HARL's LAG configs: lag.yaml's six tasks and HARL's self-play configs become
air_combat pipelines; an unknown pair is one paragraph listing the pairs."""

from __future__ import annotations

import pytest

from harl.compat import pipeline_from_harl
from harl.compat.envs import lag_tasks
from harl.config.loading import structure_pipeline
from harl.envs.air_combat.tasks import HARL_NAMES, LAG_YAML_TASKS
from harl.errors import ConfigError
from harl.utils.configs_tools import get_defaults_yaml_args


def _convert(scenario: str | None = None, task: str | None = None) -> dict:
    algo_args, env_args = get_defaults_yaml_args("happo", "lag")
    if scenario is not None:
        env_args.update(scenario=scenario, task=task)
    return pipeline_from_harl("happo", "lag", None, algo_args, env_args).pipeline


def test_harl_default_lag_config_is_the_2v2_shoot_missile_task() -> None:
    """HARL's default lag.yaml (MultipleCombat 2v2/ShootMissile/HierarchyVsBaseline) converts unchanged."""
    pipeline = _convert()
    assert pipeline["env"] == {"kind": "air_combat", "task": "2v2/ShootMissile/HierarchyVsBaseline"}
    assert structure_pipeline(pipeline, "harl convert").env.task_name == "2v2_shoot_missile_hierarchy"


@pytest.mark.parametrize("task", LAG_YAML_TASKS)
def test_each_lag_yaml_task_converts(task: str) -> None:
    scenario = {"1": "SingleControl", "1v1": "SingleCombat", "2v2": "MultipleCombat"}[task.split("/")[0]]
    env = _convert(scenario, task)["env"]
    assert env["task"] == task
    assert structure_pipeline(_convert(scenario, task), "harl convert").env.task_name == HARL_NAMES[task]


def test_selfplay_runs_as_one_team_as_harl_does() -> None:
    env = _convert("SingleCombat", "1v1/NoWeapon/Selfplay")["env"]
    assert env == {"kind": "air_combat", "task": "1v1/NoWeapon/Selfplay", "action_type": "multidiscrete",
                   "sides": "one_team"}


def test_every_harl_task_has_its_scenario() -> None:
    assert len(lag_tasks()) == len(HARL_NAMES)
    assert ("MultipleCombat", "2v2/ShootMissile/HierarchyVsBaseline") in lag_tasks()


def test_an_unknown_pair_lists_the_pairs() -> None:
    with pytest.raises(ConfigError) as exc:
        _convert("SingleCombat", "2v2/NoWeapon/vsBaseline")
    message = str(exc.value)
    assert "SingleControl 1/heading; SingleCombat 1v1/NoWeapon/vsBaseline;" in message
    assert message.endswith('HARL\'s "SingleCombat" "2v2/NoWeapon/vsBaseline" is not among them: write one of '
                            "those pairs")
