"""LAG's combat tasks on JSBSim: spaces and sides by task, a missile launched, flown and scored,
the frozen controller in the action path, and a controller file that does not fit its network."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.envs.air_combat import AirCombatConfig, make_air_combat_env
from harl.envs.air_combat.combat import ao_ta_range, gun_damage
from harl.envs.air_combat.controller import ControllerNet
from harl.settings import InvalidSetting

pytest.importorskip("jsbsim", reason="the air-combat env flies JSBSim's F-16 (pip install harl[lag])")

PIPELINES = Path(__file__).parent.parent.parent / "pipelines"
CENTRED = np.array([20, 20, 20, 15])


def _tiny_controller(path: Path) -> Path:
    torch.manual_seed(0)
    torch.save(ControllerNet([8], "relu").state_dict(), path)
    return path


class TestSpaces:
    @pytest.mark.parametrize(("task", "agents", "obs", "action"), [
        ("1v1/NoWeapon/vsBaseline", ["red_0"], 15, spaces.MultiDiscrete([41, 41, 41, 30])),
        ("1v1/DodgeMissile/vsBaseline", ["red_0"], 21, spaces.MultiDiscrete([41, 41, 41, 30])),
        ("1v1_shoot_missile_selfplay", ["red_0", "blue_0"], 21, spaces.MultiDiscrete([41, 41, 41, 30, 2])),
    ])
    def test_lag_sizes(self, task: str, agents: list[str], obs: int, action: spaces.Space) -> None:
        """HARL's observation sizes (9 own + 6 per other aircraft + 6 for a missile) and action spaces."""
        env = make_air_combat_env(AirCombatConfig(task=task, action_type="multidiscrete"))
        assert env.agent_names == agents
        assert env.observation_spaces[0].shape == (obs,)
        assert env.state_space.shape == (2 * obs,)
        assert env.action_spaces[0] == action
        o, state, _ = env.reset(seed=0)
        assert o[0].shape == (obs,) and state.shape == (2 * obs,)

    def test_hierarchy_2v2_with_a_stand_in_controller(self, tmp_path: Path) -> None:
        """HARL's default task: 2 red agents, 33 observations, MultiDiscrete [3, 5, 3, 2] through the controller."""
        config = AirCombatConfig(task="2v2/ShootMissile/HierarchyVsBaseline",
                                 controller=str(_tiny_controller(tmp_path / "c.pt")), controller_hidden_sizes=[8])
        env = make_air_combat_env(config)
        assert env.agent_names == ["red_0", "red_1"] and env.agent_groups == {"red": ["red_0", "red_1"]}
        assert env.observation_spaces[0].shape == (33,) and env.state_space.shape == (4 * 33,)
        assert env.action_spaces[0] == spaces.MultiDiscrete([3, 5, 3, 2])
        env.reset(seed=0)
        before = [s.position.copy() for s in env._states]
        step = env.step([np.array([1, 2, 1, 0])] * 2)
        assert step.rewards.shape == (2,) and np.isfinite(step.rewards).all()
        assert all(np.linalg.norm(s.position - b) > 30 for s, b in zip(env._states, before))

    def test_harl_2v2_noweapon_is_lags_hierarchical_task(self, tmp_path: Path) -> None:
        """HARL's 2v2/NoWeapon/vsBaseline.yaml: task hierarchical_multiplecombat_vs_baseline, red learners,
        9 + 3 x 6 observations, MultiDiscrete [3, 5, 3], pursuers 0.1 degrees north, posture scale 15."""
        config = AirCombatConfig(task="2v2/NoWeapon/vsBaseline", controller=str(_tiny_controller(tmp_path / "c.pt")),
                                 controller_hidden_sizes=[8])
        assert config.task_name == "2v2_noweapon_hierarchy"
        env = make_air_combat_env(config)
        assert env.agent_names == ["red_0", "red_1"] and env.observation_spaces[0].shape == (27,)
        assert env.action_spaces[0] == spaces.MultiDiscrete([3, 5, 3])
        assert (env.spec.separation_deg, env.spec.posture_scale, env.spec.baseline) == (0.1, 15.0, "pursue")

    def test_selfplay_sides(self) -> None:
        """Two teams: red and blue are agent groups; one team (HARL's way): no groups."""
        two = make_air_combat_env(AirCombatConfig(task="1v1/NoWeapon/Selfplay"))
        assert two.agent_groups == {"red": ["red_0"], "blue": ["blue_0"]}
        one = make_air_combat_env(AirCombatConfig(task="1v1/NoWeapon/Selfplay", sides="one_team"))
        assert one.agent_groups == {} and one.n_agents == 2


class TestMissiles:
    def test_blue_fires_by_the_rule_and_the_missile_is_observed_and_scored(self) -> None:
        """Head-on at 22 km: blue locks red for 1 s within 45 degrees, fires inside 14 km; red sees the
        missile in its last 6 observations; a hit ends the episode for blue with -200 for red."""
        env = make_air_combat_env(AirCombatConfig(task="1v1/DodgeMissile/vsBaseline", action_type="multidiscrete"))
        env.reset(seed=1)
        fired_at = None
        seen = False
        for t in range(400):
            step = env.step([CENTRED])
            if fired_at is None and env._missiles:
                fired_at = t
                missile = env._missiles[0]
                assert (missile.shooter, missile.target) == (1, 0)
                assert np.linalg.norm(env._states[1].position - env._states[0].position) <= 14_000 + 1_000
            seen |= bool(np.any(step.obs[0][15:] != 0))
            if step.terminated or step.truncated:
                break
        assert fired_at is not None and seen
        assert env._left.tolist() == [0, 0]
        assert step.terminated and step.info["winner"] == "blue" and step.info["shot_down"] == 1.0
        assert step.rewards[0] < -150

    def test_no_weapons_no_missile_features(self) -> None:
        env = make_air_combat_env(AirCombatConfig(task="1v1_noweapon", action_type="multidiscrete"))
        env.reset(seed=0)
        for _ in range(5):
            step = env.step([CENTRED])
        assert env._missiles == [] and step.obs[0].shape == (15,)


class TestArtillery:
    def test_gun_damage_by_hand(self) -> None:
        """LAG's ``_orientation_fn(AO) * _distance_fn(R / 1000)``: 1 - AO / 0.5236 inside 30 degrees,
        1 within 1 km, (3 - R) / 2 between 1 and 3 km."""
        assert gun_damage(0.0, 500.0) == pytest.approx(1.0)
        assert gun_damage(0.2618, 2000.0) == pytest.approx(0.5 * 0.5)
        assert gun_damage(0.1, 1500.0) == pytest.approx((1 - 0.1 / 0.5236) * 0.75)
        assert gun_damage(0.53, 500.0) == 0.0 and gun_damage(0.0, 3000.0) == 0.0

    def test_guns_drain_blood_and_shoot_down_a_step_later(self) -> None:
        """Head-on, each in the other's cone: blood drains by gun_damage; at 0 the opponent is shot down
        on the next step (LAG's shotdown in its next run), red wins, and no +200 for guns."""
        env = make_air_combat_env(AirCombatConfig(task="1v1/NoWeapon/Selfplay", action_type="multidiscrete",
                                                  artillery=True))
        env.reset(seed=0)
        for _ in range(60):
            env.step([CENTRED, CENTRED])
            red, blue = env._states
            if np.linalg.norm(red.position - blue.position) < 2500:
                break
        ao, _, r, _ = ao_ta_range(red.position, red.velocity, blue.position, blue.velocity)
        before = env._blood.copy()
        env.step([CENTRED, CENTRED])
        red, blue = env._states
        ao, _, r, _ = ao_ta_range(red.position, red.velocity, blue.position, blue.velocity)
        assert env._blood[1] == pytest.approx(before[1] - gun_damage(ao, r))
        assert env._blood[1] < 100.0
        env._blood[1] = 0.0
        step = env.step([CENTRED, CENTRED])
        assert step.terminated and step.info["winner"] == "red" and step.info["win"] == 1.0
        assert step.rewards[1] < -150 and step.rewards[0] < 100

    def test_off_by_default_and_refused_where_lag_has_none(self) -> None:
        env = make_air_combat_env(AirCombatConfig(task="1v1/NoWeapon/Selfplay", action_type="multidiscrete"))
        env.reset(seed=0)
        for _ in range(60):
            env.step([CENTRED, CENTRED])
        assert env._blood.tolist() == [100.0, 100.0]
        with pytest.raises(InvalidSetting, match="artillery"):
            AirCombatConfig(task="heading", artillery=True)


@pytest.mark.slow
def test_a_controller_that_does_not_fit_is_one_paragraph_exit_2_nothing_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """harl train with a controller file of another network: exit 2, one paragraph, no run directory."""
    from harl.cli import main

    weights = _tiny_controller(tmp_path / "small.pt")
    run = tmp_path / "run"
    code = main(["train", str(PIPELINES / "happo_air_combat_2v2_shoot_missile.toml"), "--set",
                 f"env.controller={weights}", "--run-dir", str(run)])
    err = capsys.readouterr().err
    assert code == 2
    assert not run.exists()
    assert "[env] controller" in err or "env.controller" in err
    assert f"{weights} does not fit it: it holds hidden sizes [8]" in err
    assert err.strip().count("\n\n") == 0
