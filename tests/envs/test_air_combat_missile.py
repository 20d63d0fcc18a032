"""The air-combat missile, LAG's combat rewards, the frozen controller and the task names: pure code, no JSBSim."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from harl.envs.air_combat import AirCombatConfig
from harl.envs.air_combat.aircraft import FlightState
from harl.envs.air_combat.controller import Controller, ControllerNet, controller_observation, extract
from harl.envs.air_combat.missile import (
    FLYING,
    HIT,
    MISSED,
    THRUST,
    Missile,
    air_density,
    cross_section,
    nav_gain,
    pn_overload,
)
from harl.envs.air_combat.rewards import altitude_penalty, missile_posture, orientation_v2, posture, range_v3
from harl.envs.air_combat.tasks import HARL_NAMES, LAG_YAML_TASKS, canonical
from harl.settings import InvalidSetting

DT = 1.0 / 60.0


class TestGuidance:
    def test_gain_fades_over_the_missile_life(self) -> None:
        """K = 3 (60 - t) / 60, never below 0."""
        assert nav_gain(0.0) == 3.0
        assert nav_gain(30.0) == pytest.approx(1.5)
        assert nav_gain(70.0) == 0.0

    def test_azimuth_rate_turns_the_missile(self) -> None:
        """Target 1 km ahead crossing east at 100 m/s: dbeta = (100 * 1000) / 1000^2 = 0.1 rad/s,
        ny = 3 * 300 / 9.81 * cos(0) * 0.1, nz = cos(0) = 1 (level flight)."""
        ny, nz, r = pn_overload((0, 0, 0), (300, 0, 0), (1000, 0, 0), (0, 100, 0), 3.0)
        assert ny == pytest.approx(3 * 300 / 9.81 * 0.1)
        assert nz == pytest.approx(1.0)
        assert r == pytest.approx(1000.0)

    def test_elevation_rate_pitches_the_missile(self) -> None:
        """Target 1 km ahead climbing at 50 m/s: deps = 50 * 1000^2 / (1000^2 * 1000) = 0.05 rad/s,
        nz = 3 * 300 / 9.81 * 0.05 + 1."""
        ny, nz, _ = pn_overload((0, 0, 0), (300, 0, 0), (1000, 0, 0), (0, 0, 50), 3.0)
        assert ny == pytest.approx(0.0)
        assert nz == pytest.approx(3 * 300 / 9.81 * 0.05 + 1.0)

    def test_overload_is_clipped(self) -> None:
        """A 1 rad/s line-of-sight rate would ask 91.7 g; the missile pulls 30."""
        ny, _, _ = pn_overload((0, 0, 0), (300, 0, 0), (1000, 0, 0), (0, 1000, 0), 3.0)
        assert ny == 30.0
        ny, _, _ = pn_overload((0, 0, 0), (300, 0, 0), (1000, 0, 0), (0, -1000, 0), 3.0)
        assert ny == -30.0


class TestFlight:
    def test_one_burning_step_by_hand(self) -> None:
        """Level at 6 km, 300 m/s, no turn: T = 9.81 * 120 * 6 = 7063.2 N, S = pi 0.0635^2,
        rho = 1.225 exp(-6000 / 9300), D = 0.5 * 0.4 * S * rho * 300^2 = 146.526 N,
        dv = (T - D) / 84 = 82.341 m/s^2, so v = 300 + 82.341 / 60; the mass drops by 6 / 60 kg."""
        assert THRUST == pytest.approx(7063.2)
        assert cross_section(0.0, 0.0) == pytest.approx(0.012667687)
        assert air_density(6000.0) == pytest.approx(0.642607959)
        m = Missile(0, 1, (0, 0, 6000), (300, 0, 0), 0.0, 0.0, DT)
        m.t = 0.5
        m.advance(0.0, 1.0)
        assert m.position == pytest.approx([5.0, 0.0, 6000.0])
        assert m.velocity == pytest.approx([301.37235587, 0.0, 0.0])
        assert m.mass == pytest.approx(84 - 0.1)
        assert (m.pitch, m.yaw) == (0.0, 0.0)

    def test_coasting_turns_and_slows(self) -> None:
        """After burn-out: no thrust, no mass loss; ny = 10 g turns at g / v * 10 rad/s; nz = 0
        drops the nose at g / v; v falls by the drag over the mass."""
        m = Missile(0, 1, (0, 0, 6000), (300, 0, 0), 0.0, 0.0, DT)
        m.t, m.mass = 4.0, 66.0
        m.advance(10.0, 0.0)
        drag = 0.5 * 0.4 * math.pi * 0.0635 ** 2 * 1.225 * math.exp(-6000 / 9300) * 300 ** 2
        speed = 300 - DT * drag / 66.0
        assert m.yaw == pytest.approx(DT * 9.81 / 300 * 10)
        assert m.pitch == pytest.approx(-DT * 9.81 / 300)
        assert m.speed == pytest.approx(speed)
        assert m.mass == 66.0

    def test_hits_a_straight_flying_target(self) -> None:
        """Launched 4 km behind a target flying straight and level, the missile hits it within 15 s."""
        m = Missile(0, 1, (0, 0, 6000), (250, 0, 0), 0.0, 0.0, DT)
        target = np.array([4000.0, 300.0, 6100.0])
        for _ in range(15 * 60):
            target += DT * np.array([200.0, 0.0, 0.0])
            if m.step(target, (200.0, 0.0, 0.0), True) != FLYING:
                break
        assert m.status == HIT
        assert m.t < 15.0

    def test_misses(self) -> None:
        """A missile misses once its target is down, once it is slower than 150 m/s, and after 60 s."""
        m = Missile(0, 1, (0, 0, 6000), (250, 0, 0), 0.0, 0.0, DT)
        assert m.step((5000, 0, 6000), (250, 0, 0), False) == MISSED
        slow = Missile(0, 1, (0, 0, 6000), (140, 0, 0), 0.0, 0.0, DT)
        assert slow.step((5000, 0, 6000), (250, 0, 0), True) == MISSED
        old = Missile(0, 1, (0, 0, 6000), (250, 0, 0), 0.0, 0.0, DT)
        old.t = 60.0
        assert old.step((5000, 0, 6000), (250, 0, 0), True) == MISSED

    def test_a_target_within_the_kill_radius_is_hit(self) -> None:
        m = Missile(0, 1, (0, 0, 6000), (250, 0, 0), 0.0, 0.0, DT)
        assert m.step((299, 0, 6000), (250, 0, 0), True) == HIT
        assert Missile(0, 1, (0, 0, 6000), (250, 0, 0), 0.0, 0.0, DT).step(
            (301, 0, 6000), (250, 0, 0), True) == FLYING

    def test_a_range_opening_for_five_seconds_misses(self) -> None:
        """A target running away faster than the coasting missile: after 300 opening steps, a miss."""
        m = Missile(0, 1, (0, 0, 6000), (400, 0, 0), 0.0, 0.0, DT)
        m.t = 10.0  # coasting
        target = np.array([2000.0, 0.0, 6000.0])
        steps = 0
        while m.step(target, (800.0, 0.0, 0.0), True) == FLYING:
            target += DT * np.array([800.0, 0.0, 0.0])
            steps += 1
        assert m.status == MISSED
        assert steps == 300


class TestRewards:
    def test_orientation_by_hand(self) -> None:
        """On the tail 1/2 + 1/2 + 1/2 = 1.5; AO = 30 deg, TA = 120 deg:
        1 / (50/6 + 2) + 1 + atanh(1 - 4/3) / 2pi."""
        assert orientation_v2(0.0, 0.0) == pytest.approx(1.5)
        assert orientation_v2(math.pi / 6, 2 * math.pi / 3) == pytest.approx(
            1 / (50 / 6 + 2) + 1 + math.atanh(-1 / 3) / (2 * math.pi))
        assert math.isfinite(orientation_v2(math.pi, math.pi))

    def test_range_by_hand(self) -> None:
        """3 km: 1 + min(exp(-0.48), 0.2) = 1.2; 10 km: clip(-3.2 + 2.84 + 0.38) + 0.2 = 0.22."""
        assert range_v3(3.0) == pytest.approx(1.2)
        assert range_v3(10.0) == pytest.approx(0.22)
        assert posture(0.0, 0.0, 3000.0) == pytest.approx(1.8)

    def test_altitude_penalty_by_hand(self) -> None:
        """3 km sinking at 34 m/s: -(0.1 / 0.2 * 1/4) + (3 / 3.5 - 2); at 5 km nothing."""
        assert altitude_penalty(3000.0, -34.0) == pytest.approx(-0.125 + 3 / 3.5 - 2)
        assert altitude_penalty(3000.0, 34.0) == pytest.approx(3 / 3.5 - 2)
        assert altitude_penalty(5000.0, -100.0) == 0.0

    def test_missile_posture_by_hand(self) -> None:
        """Lost 100 m/s, scale 30: drop = 100 / 340 * 30; away pays cos * drop, towards costs cos / (drop + 1)."""
        drop = 100 / 340 * 30
        assert missile_posture(800.0, 700.0, 0.5, 30.0) == pytest.approx(0.5 * drop)
        assert missile_posture(800.0, 700.0, -0.5, 30.0) == pytest.approx(-0.5 / (drop + 1))
        assert missile_posture(700.0, 800.0, 0.5, 30.0) == 0.0


def _tiny_weights(path: Path, hidden: list[int]) -> ControllerNet:
    torch.manual_seed(0)
    net = ControllerNet(hidden, "relu")
    for p in net.parameters():
        torch.nn.init.normal_(p)
    torch.save(net.state_dict(), path)
    return net


def _level(speed: float = 250.0) -> FlightState:
    return FlightState(position=np.array([0.0, 0.0, 6000.0]), velocity=np.array([speed, 0.0, 0.0]),
                       roll=0.0, pitch=0.0, yaw=0.0, body_velocity=np.array([speed, 0.0, 0.0]),
                       airspeed=speed, rates=np.zeros(3), load=1.0)


class TestController:
    def test_observation_is_the_heading_tasks(self) -> None:
        """Climb, turn 30 degrees right, speed up: errors of +100 m, pi/6, +17 m/s, then a fresh target."""
        obs = controller_observation([0, 4, 0], _level())
        assert obs[:4] == pytest.approx([0.1, 1 / 6, 0.05, 1.0])
        assert obs.shape == (16,)
        assert controller_observation([2, 0, 2], _level())[:3] == pytest.approx([-0.1, -1 / 6, -0.05])

    def test_numpy_acting_equals_the_network(self, tmp_path: Path) -> None:
        """A stand-in network made here: the frozen controller's numpy actions equal torch's, in [-1, 1]."""
        net = _tiny_weights(tmp_path / "w.pt", [8, 8])
        controller = Controller(tmp_path / "w.pt", [8, 8], "relu")
        obs = [np.random.default_rng(i).normal(size=16).astype(np.float32) for i in range(5)]
        with torch.no_grad():
            expected = net(torch.from_numpy(np.stack(obs))).numpy()
        np.testing.assert_allclose(controller.act(obs), expected, atol=1e-5)
        assert np.abs(controller.act(obs)).max() <= 1.0

    def test_a_config_accepts_matching_weights_and_refuses_others(self, tmp_path: Path) -> None:
        _tiny_weights(tmp_path / "w.pt", [8])
        AirCombatConfig(task="1v1_dodge_missile_hierarchy", controller=str(tmp_path / "w.pt"),
                        controller_hidden_sizes=[8])
        with pytest.raises(InvalidSetting) as exc:
            AirCombatConfig(task="1v1_dodge_missile_hierarchy", controller=str(tmp_path / "w.pt"))
        message = str(exc.value)
        assert message.startswith("controller: task '1v1_dodge_missile_hierarchy' flies through a frozen "
                                  "flight controller of hidden sizes [128, 128] (relu), and "
                                  f"{tmp_path / 'w.pt'} does not fit it: it holds hidden sizes [8] over 16 "
                                  "observations with 4 actions; the controller is built with hidden sizes "
                                  "[128, 128] over the heading task's 16 observations and 4 actions. ")
        assert message.endswith('or leave controller = "" for the one harl ships')
        (tmp_path / "junk.pt").write_text("hello")
        with pytest.raises(InvalidSetting, match="junk.pt is not a torch weight file"):
            AirCombatConfig(task="1v1_dodge_missile_hierarchy", controller=str(tmp_path / "junk.pt"))
        torch.save({"net.0.weight": torch.zeros(2, 2)}, tmp_path / "other.pt")
        with pytest.raises(InvalidSetting, match="it is not a controller's state dict"):
            AirCombatConfig(task="1v1_dodge_missile_hierarchy", controller=str(tmp_path / "other.pt"))
        with pytest.raises(InvalidSetting, match="there is no file"):
            AirCombatConfig(task="2v2/ShootMissile/HierarchyVsBaseline", controller=str(tmp_path / "none.pt"))

    def test_the_shipped_weights_fit(self) -> None:
        """The default controller file ships with harl and fits the default network."""
        assert AirCombatConfig(task="2v2/ShootMissile/HierarchyVsBaseline").controller_path.is_file()

    def test_extract_keeps_the_acting_part(self, tmp_path: Path) -> None:
        """From a checkpoint's policy: agent 0's base and mean, without the std."""
        net = _tiny_weights(tmp_path / "w.pt", [8])
        policy = {f"actors.0.{k}": v for k, v in net.state_dict().items()}
        policy["actors.0.head.log_std"] = torch.zeros(4)
        torch.save({"policy": policy}, tmp_path / "ckpt.pt")
        extract(tmp_path / "ckpt.pt", tmp_path / "out.pt")
        kept = torch.load(tmp_path / "out.pt", weights_only=True)
        assert set(kept) == set(net.state_dict())


class TestTaskNames:
    def test_lag_yaml_names_map_to_harl_names(self) -> None:
        """HARL's six lag.yaml tasks, its default among them, each a harl task; harl's names pass through."""
        assert LAG_YAML_TASKS == ("1/heading", "1v1/NoWeapon/vsBaseline", "1v1/DodgeMissile/vsBaseline",
                                  "1v1/DodgeMissile/HierarchyVsBaseline", "2v2/NoWeapon/vsBaseline",
                                  "2v2/ShootMissile/HierarchyVsBaseline")
        assert canonical("2v2/ShootMissile/HierarchyVsBaseline") == "2v2_shoot_missile_hierarchy"
        assert canonical("1v1_noweapon") == "1v1_noweapon"
        assert canonical("3v3") is None
        for name in HARL_NAMES:
            assert AirCombatConfig(task=name).task_name == HARL_NAMES[name]

    def test_unknown_task_lists_both_kinds_of_name(self) -> None:
        with pytest.raises(InvalidSetting) as exc:
            AirCombatConfig(task="3v3")
        message = str(exc.value)
        assert message.startswith("task: unknown air-combat task '3v3'; harl's names: heading, 2v2_noweapon, "
                                  "1v1_noweapon,")
        assert "HARL's lag names (scenario/task paths, each the same task as a harl name): 1/heading, " in message
        assert "2v2/ShootMissile/HierarchyVsBaseline" in message
