"""LAG's combat tasks: 1v1 and 2v2 F-16s, with or without missiles, a frozen controller, self-play.

One env plays every ``tasks.COMBAT`` task.  Red aircraft (``red_0``, ``red_1``) always learn;
blue ones learn too in self-play tasks and are otherwise flown by harl's scripted pilot
(``scripted_pilot``: ``pursue`` chases the nearest red, ``maneuver`` holds its course and
turns away once a missile is inbound).  The starts are HARL's: red at the origin heading
north, blue ``separation_deg`` of latitude north heading south, wingmen 0.01 degrees of
longitude (556 m) east, all at 20,000 ft and 800 ft/s; a 1v1 episode swaps the two starts
with probability 1/2, as HARL's single-combat env does.

Each env step: the policies' actions (through the frozen controller in ``hierarchy`` tasks:
``controller``) become stick and throttle; JSBSim flies 12 steps of 1/60 s, each missile in
flight stepping after every one of them against its target (``missile``); then missiles are
launched (the ``weapons`` rule of the task), and each learner is paid (``rewards``):

- posture: ``posture_scale`` times the change of the summed ``rewards.posture`` over the opponents;
- missile posture (dodge tasks and 2v2 shoot): ``rewards.missile_posture`` while one is inbound;
- altitude: ``rewards.altitude_penalty``;
- events: +200 the step its missile hits, -10 per launch in the 1v1 shoot tasks; in 1v1, -200 the
  step it is shot down (by a missile, or by guns under ``artillery``: LAG's ``use_artillery``,
  ``gun_damage``) or crashes (``aircraft.lost``: at or below ``floor_altitude_m``, LAG's
  ExtremeState, LAG's Overload with ``overload_g`` after 10 s).

A lost aircraft costs nothing in 2v2, as in LAG: its ``MultipleCombatTask.get_reward`` pays an
aircraft no longer alive 0, a missile's or the guns' ``shotdown`` happens during the sim steps
(so the shot-down aircraft is paid 0 that step), and its env checks crashes after paying (so a
crashed aircraft is paid its step's reward without the -200); ``lost_aircraft_penalty = true``
pays the -200 in 2v2 too.  LAG's 1v1 env checks endings first and its ``SingleCombatTask`` pays a
lost aircraft once more, the -200 included: harl's 1v1 tasks do the same.  Each aircraft's
reward is its own; LAG hands each side the mean of its aircraft's, which is what harl's EP critic
(the agents' mean) sees.  An aircraft out of the fight stops flying (its agent inactive, reward 0).  The episode ends
(terminated) when a side has no aircraft left and no missile is still chasing a survivor;
``winner`` is the side still flying ("" for a draw or a timeout).  Truncated after ``max_episode_steps``.

Observation (HARL's): the aircraft's own 9 features (altitude / 5 km, sin and cos of roll and
pitch, body velocities and calibrated airspeed in Mach), 6 per other aircraft (partner first,
then opponents: forward-speed difference in Mach, altitude difference in km, ``AO``, ``TA``,
range / 10 km, which side it is on), and in tasks with missiles 6 more for the first missile
chasing it (zeros if none).  1v1 without weapons measures angles and range in the horizontal
plane, as HARL does.  The state is every aircraft's observation, red first.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from harl.envs.air_combat.actions import GRID, to_controls
from harl.envs.air_combat.aircraft import _M_PER_DEG_LAT, _M_PER_DEG_LON, Aircraft, FlightState, lost
from harl.envs.air_combat.config import AirCombatConfig
from harl.envs.air_combat.controller import HIGH_LEVEL_NVEC, Controller, controller_observation
from harl.envs.air_combat.missile import HIT, Missile, Vector
from harl.envs.air_combat.rewards import MACH, altitude_penalty, missile_posture, posture
from harl.envs.air_combat.scripted_pilot import cruise, pursue
from harl.envs.air_combat.seeded import SeededEnv
from harl.envs.air_combat.tacview import TrackObject, aircraft_object, aircraft_uid
from harl.envs.air_combat.tasks import COMBAT
from harl.envs.protocol import EnvStep

SIM_RATE_HZ = 60.0
START_ALTITUDE, START_SPEED = 20_000 * 0.3048, 800 * 0.3048
WINGMAN_SPACING_DEG = 0.01
MANEUVER_ALTITUDE = 6096.0
MAX_ATTACK_ANGLE = math.radians(45.0)
MAX_ATTACK_DISTANCE = 14_000.0
LOCK_STEPS = 5
"""Env steps (1 s) a dodge-task shooter must hold its target within the attack angle."""
MISSILE_POSTURE_SCALE = 30.0
HIT_REWARD, LOST_PENALTY, SHOT_PENALTY = 200.0, 200.0, 10.0
OWN, OTHER = 9, 6
OBS_CLIP = 10.0


def ao_ta_range(ego_pos: Vector, ego_vel: Vector, pos: Vector, vel: Vector, planar: bool = False) -> tuple[float, float, float, float]:
    """LAG's ``(AO, TA, R, side)`` of an object seen from ego (``planar``: horizontal components only).

    ``AO``: ego's velocity against the line of sight; ``TA``: the object's velocity against the
    same line; ``side``: the sign of ``v x d`` in the horizontal plane (+1: on ego's right).
    """
    k = 2 if planar else 3
    d = [pos[i] - ego_pos[i] for i in range(k)]
    r = math.sqrt(sum(x * x for x in d))
    ego_v = math.sqrt(sum(ego_vel[i] ** 2 for i in range(k)))
    v = math.sqrt(sum(vel[i] ** 2 for i in range(k)))
    ao = math.acos(max(-1.0, min(1.0, sum(d[i] * ego_vel[i] for i in range(k)) / (r * ego_v + 1e-8))))
    ta = math.acos(max(-1.0, min(1.0, sum(d[i] * vel[i] for i in range(k)) / (r * v + 1e-8))))
    cross = ego_vel[0] * d[1] - ego_vel[1] * d[0]
    return ao, ta, r, float(np.sign(cross))


GUN_CONE = 0.5236
"""LAG's artillery cone (rad, 30 degrees): an opponent inside it loses blood."""
GUN_FULL_M, GUN_RANGE_M = 1000.0, 3000.0
BLOOD = 100.0


def gun_damage(ao: float, r: float) -> float:
    """Blood an opponent at ``AO`` (rad) and range ``r`` (m) loses in a step (LAG's artillery).

    ``1 - AO / 30 deg`` inside the cone, times 1 within 1 km falling linearly to 0 at 3 km.
    """
    orientation = max(0.0, 1.0 - ao / GUN_CONE)
    distance = 1.0 if r <= GUN_FULL_M else max(0.0, (GUN_RANGE_M - r) / (GUN_RANGE_M - GUN_FULL_M))
    return orientation * distance


def own_part(s: FlightState) -> list[float]:
    """LAG's 9 ego features."""
    u, v, w = s.body_velocity
    return [s.altitude / 5000.0, math.sin(s.roll), math.cos(s.roll), math.sin(s.pitch), math.cos(s.pitch),
            u / MACH, v / MACH, w / MACH, s.calibrated_airspeed / MACH]


def other_part(ego: FlightState, speed_u: float, position: Vector, velocity: Vector, planar: bool) -> list[float]:
    """LAG's 6 features of another aircraft (``speed_u`` its forward speed) or a missile (its speed)."""
    ao, ta, r, side = ao_ta_range(ego.position, ego.velocity, position, velocity, planar)
    return [(speed_u - ego.body_velocity[0]) / MACH, (position[2] - ego.altitude) / 1000.0, ao, ta,
            r / 10_000.0, side]


class CombatEnv(SeededEnv):
    """Red learners against blue scripted pilots or blue learners (module docstring)."""

    def __init__(self, config: AirCombatConfig) -> None:
        self.config = config
        spec = self.spec = COMBAT[config.task_name]
        n = spec.per_side
        self._n = n
        self._aircraft = [Aircraft(SIM_RATE_HZ) for _ in range(2 * n)]
        self._learners = list(range(2 * n)) if spec.selfplay else list(range(n))
        self.n_agents = len(self._learners)
        names = [f"red_{i}" for i in range(n)] + [f"blue_{i}" for i in range(n)]
        self.agent_names = [names[k] for k in self._learners]
        if not spec.selfplay:
            self.agent_groups = {"red": names[:n]}
        elif config.sides == "two_teams":
            self.agent_groups = {"red": names[:n], "blue": names[n:]}
        else:
            self.agent_groups = {}
        self._planar = n == 1 and spec.weapons == "none"
        self._armed = spec.weapons != "none"
        self.obs_size = OWN + OTHER * (2 * n - 1) + (OTHER if self._armed else 0)
        box = spaces.Box(-OBS_CLIP, OBS_CLIP, (self.obs_size,), np.float32)
        self.observation_spaces = [box] * self.n_agents
        self.state_space = spaces.Box(-OBS_CLIP, OBS_CLIP, (2 * n * self.obs_size,), np.float32)
        shoot = spec.weapons == "shoot"
        self.action_spaces = [self._action_space(shoot) for _ in range(self.n_agents)]
        self._controller = (Controller(config.controller_path, config.controller_hidden_sizes,
                                       config.controller_activation) if spec.hierarchy else None)
        self._rng = np.random.default_rng()
        self._dt = 1.0 / SIM_RATE_HZ
        self._states: list[FlightState] = []
        self._alive = np.ones(2 * n, dtype=bool)
        self._blood = np.full(2 * n, BLOOD)
        self._headings = np.zeros(2 * n)
        self._missiles: list[Missile] = []
        self._left = np.zeros(2 * n, dtype=int)
        self._last_shot = np.zeros(2 * n, dtype=int)
        self._locks: list[deque[bool]] = [deque(maxlen=LOCK_STEPS) for _ in range(2 * n)]
        self._potential = np.zeros(2 * n)
        self._first_missile_speed: list[float | None] = [None] * (2 * n)
        self._steps = 0

    def _action_space(self, shoot: bool) -> spaces.Space:
        extra = [2] if shoot else []
        if self.spec.hierarchy:
            return spaces.MultiDiscrete([*HIGH_LEVEL_NVEC, *extra])
        if self.config.action_type == "continuous":
            return spaces.Box(-1.0, 1.0, (4 + len(extra),), np.float32)
        return spaces.MultiDiscrete([*GRID.tolist(), *extra])

    def _side(self, k: int) -> range:
        return range(self._n) if k < self._n else range(self._n, 2 * self._n)

    def _enemies(self, k: int) -> range:
        return range(self._n, 2 * self._n) if k < self._n else range(self._n)

    # --- observations -----------------------------------------------------------------

    def _inbound(self, k: int) -> Missile | None:
        """The first missile still chasing aircraft ``k`` (LAG's missile warning)."""
        return next((m for m in self._missiles if m.flying and m.target == k), None)

    def _aircraft_obs(self, k: int) -> np.ndarray:
        s = self._states
        ego = s[k]
        features = own_part(ego)
        for j in [*(i for i in self._side(k) if i != k), *self._enemies(k)]:
            features += other_part(ego, s[j].body_velocity[0], s[j].position, s[j].velocity, self._planar)
        if self._armed:
            missile = self._inbound(k)
            features += ([0.0] * OTHER if missile is None else
                         other_part(ego, missile.speed, missile.position, missile.velocity, False))
        return np.clip(np.array(features, np.float32), -OBS_CLIP, OBS_CLIP)

    def _observe(self) -> tuple[list[np.ndarray], np.ndarray]:
        every = [self._aircraft_obs(k) for k in range(2 * self._n)]
        obs = [every[k] if self._alive[k] else np.zeros(self.obs_size, np.float32) for k in self._learners]
        return obs, np.concatenate(every)

    # --- rewards ----------------------------------------------------------------------

    def _posture_sum(self, k: int) -> float:
        """Aircraft ``k``'s posture over every opponent (the fallen too, as LAG sums them)."""
        ego = self._states[k]
        total = 0.0
        for j in self._enemies(k):
            ao, ta, r, _ = ao_ta_range(ego.position, ego.velocity, self._states[j].position,
                                       self._states[j].velocity)
            total += posture(ao, ta, r)
        return self.spec.posture_scale * total

    def _missile_reward(self, k: int) -> float:
        missile = self._inbound(k)
        if missile is None:
            self._first_missile_speed[k] = None
            return 0.0
        speed = missile.speed
        if self._first_missile_speed[k] is None:
            self._first_missile_speed[k] = speed
        v = self._states[k].velocity
        cos = float(np.dot(missile.velocity, v) / (speed * np.linalg.norm(v) + 1e-12))
        return missile_posture(self._first_missile_speed[k] or speed, speed, cos, MISSILE_POSTURE_SCALE)

    # --- episode ----------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, None]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        n, spec = self._n, self.spec
        swap = n == 1 and bool(self._rng.integers(2))
        for k, aircraft in enumerate(self._aircraft):
            blue = (k >= n) != swap
            north = spec.separation_deg * _M_PER_DEG_LAT if blue else 0.0
            east = (k % n) * WINGMAN_SPACING_DEG * _M_PER_DEG_LON
            self._headings[k] = math.pi if blue else 0.0
            aircraft.start(north, east, START_ALTITUDE, self._headings[k], START_SPEED)
        self._states = [aircraft.read() for aircraft in self._aircraft]
        self._alive[:] = True
        self._blood[:] = BLOOD
        self._missiles = []
        self._left[:n], self._left[n:] = spec.missiles
        self._last_shot[:] = -spec.min_attack_interval
        for lock in self._locks:
            lock.clear()
        self._first_missile_speed = [None] * (2 * n)
        self._potential = np.array([self._posture_sum(k) for k in range(2 * n)])
        self._steps = 0
        self._sums = {"missiles_fired": 0.0, "missile_hits": 0.0, "shot_down": 0.0}
        obs, state = self._observe()
        return obs, state, None

    def _scripted(self, k: int) -> np.ndarray:
        me = self._states[k]
        if self.spec.baseline == "maneuver":
            turn = math.pi if self._inbound(k) is not None else 0.0
            return cruise(me, self._headings[k] + turn, MANEUVER_ALTITUDE)
        flying = [i for i in self._enemies(k) if self._alive[i]] or list(self._enemies(k))
        nearest = min(flying, key=lambda i: float(np.linalg.norm(self._states[i].position - me.position)))
        return pursue(me, self._states[nearest], self.config.floor_altitude_m)

    def _controls(self, actions: Sequence[np.ndarray]) -> tuple[dict[int, np.ndarray], set[int]]:
        """Stick and throttle of every flying aircraft, and who asks to fire."""
        controls: dict[int, np.ndarray] = {}
        fire: set[int] = set()
        shoot = self.spec.weapons == "shoot"
        pending = []
        for agent, k in enumerate(self._learners):
            if not self._alive[k]:
                continue
            a = np.asarray(actions[agent]).reshape(-1)
            if shoot and a[-1] > 0:
                fire.add(k)
            if self._controller is not None:
                pending.append((k, controller_observation(a[:3].tolist(), self._states[k])))
            else:
                controls[k] = to_controls(a[:4], self.config.action_type)
        if pending:
            sticks = self._controller.act([o for _, o in pending])  # type: ignore[union-attr]
            for (k, _), stick in zip(pending, sticks):
                controls[k] = to_controls(stick, "continuous")
        for k in range(2 * self._n):
            if self._alive[k] and k not in self._learners:
                controls[k] = self._scripted(k)
                fire.add(k)  # LAG's baselines always ask; the launch rule decides
        return controls, fire

    def _fly(self) -> set[int]:
        """12 sim steps; missiles step after each.  Returns the aircraft shot down."""
        steps = self.config.sim_steps_per_step
        flying = [k for k in range(2 * self._n) if self._alive[k]]
        down: set[int] = set()
        if not any(m.flying for m in self._missiles):
            for k in flying:
                self._aircraft[k].advance(steps)
            return down
        for _ in range(steps):
            for k in flying:
                if k not in down:
                    self._aircraft[k].advance(1)
            kinematics: dict[int, tuple[list[float], list[float]]] = {}
            for m in self._missiles:
                if not m.flying:
                    continue
                if m.target not in kinematics:
                    kinematics[m.target] = self._aircraft[m.target].kinematics()
                position, velocity = kinematics[m.target]
                alive = bool(self._alive[m.target]) and m.target not in down
                if m.step(position, velocity, alive) == HIT:
                    down.add(m.target)
        return down

    def _fire_guns(self) -> None:
        """LAG's artillery: every flying aircraft drains the opponents in its cone (shot down next step)."""
        for k in np.flatnonzero(self._alive).tolist():
            me = self._states[k]
            for j in self._enemies(k):
                if self._alive[j]:
                    ao, _, r, _ = ao_ta_range(me.position, me.velocity, self._states[j].position,
                                              self._states[j].velocity)
                    self._blood[j] -= gun_damage(ao, r)

    def _launch(self, fire: set[int]) -> list[int]:
        """Missiles fired this step (by the task's rule); returns the shooters."""
        spec, shooters = self.spec, []
        for k in range(2 * self._n):
            if not self._alive[k]:
                continue
            me = self._states[k]
            enemies = [j for j in self._enemies(k) if self._alive[j]]
            if not enemies:
                continue
            target = (enemies[0] if spec.weapons == "dodge" else
                      min(enemies, key=lambda j: float(np.linalg.norm(self._states[j].position - me.position))))
            sight = self._states[target].position - me.position
            distance = float(np.linalg.norm(sight))
            angle = math.acos(max(-1.0, min(1.0, float(sight @ me.velocity)
                                             / (distance * float(np.linalg.norm(me.velocity)) + 1e-8))))
            interval_ok = self._steps - self._last_shot[k] >= spec.min_attack_interval
            in_envelope = angle <= MAX_ATTACK_ANGLE and distance <= MAX_ATTACK_DISTANCE
            if spec.weapons == "dodge":
                self._locks[k].append(angle < MAX_ATTACK_ANGLE)
                ready = (sum(self._locks[k]) >= LOCK_STEPS and distance <= MAX_ATTACK_DISTANCE and interval_ok)
            else:
                ready = k in fire and (not spec.launch_limits or (in_envelope and interval_ok))
            if ready and self._left[k] > 0:
                self._missiles.append(Missile(k, target, me.position, me.velocity, me.pitch, me.yaw, self._dt))
                self._left[k] -= 1
                self._last_shot[k] = self._steps
                shooters.append(k)
        return shooters

    def step(self, actions: Sequence[np.ndarray]) -> EnvStep:
        cfg, spec, n = self.config, self.spec, self._n
        controls, fire = self._controls(actions)
        for k, c in controls.items():
            self._aircraft[k].command(c)
        was_alive = self._alive.copy()
        hits_before = [m for m in self._missiles if m.flying]
        shot_down = self._fly()
        if cfg.artillery:  # drained to 0 by guns last step: down now, as LAG's shotdown at its next run
            shot_down |= {k for k in np.flatnonzero(was_alive).tolist() if self._blood[k] <= 0}
        self._steps += 1
        crashed: set[int] = set()
        for k in np.flatnonzero(was_alive).tolist():
            state = self._aircraft[k].read() if k not in shot_down else None
            if state is not None and state.is_finite():
                self._states[k] = state
            if k in shot_down or (state is not None and lost(state, cfg.floor_altitude_m, cfg.overload_g,
                                                              cfg.min_airspeed_mps) is not None):
                self._alive[k] = False
                if k not in shot_down:
                    crashed.add(k)
        if cfg.artillery:
            self._fire_guns()
        shooters = self._launch(fire) if self._armed else []
        hits = [m.shooter for m in hits_before if m.status == HIT]
        rewards = np.zeros(self.n_agents, np.float32)
        lost_costs = n == 1 or cfg.lost_aircraft_penalty  # LAG: 1v1 pays -200, 2v2 nothing
        for agent, k in enumerate(self._learners):
            if not was_alive[k] or (k in shot_down and not lost_costs):
                continue  # LAG's 2v2: shot down during the sim steps, so no longer alive when paid: 0
            potential = self._posture_sum(k)
            r = potential - self._potential[k]
            self._potential[k] = potential
            if spec.missile_posture:
                r += self._missile_reward(k)
            s = self._states[k]
            r += altitude_penalty(s.altitude, s.velocity[2])
            r += HIT_REWARD * hits.count(k)
            if not self._alive[k] and lost_costs:
                r -= LOST_PENALTY
            if spec.shoot_penalty:
                r -= SHOT_PENALTY * shooters.count(k)
            rewards[agent] = r
        reds = [k for k in range(n) if k in shooters]
        self._sums["missiles_fired"] += len(reds)
        self._sums["missile_hits"] += sum(1 for k in hits if k < n)
        self._sums["shot_down"] += sum(1 for k in shot_down if k < n)
        red_up, blue_up = bool(self._alive[:n].any()), bool(self._alive[n:].any())
        chasing = any(m.flying and self._alive[m.target] for m in self._missiles)
        terminated = (not red_up or not blue_up) and not chasing
        truncated = not terminated and self._steps >= cfg.max_episode_steps
        info: dict[str, Any] = {}
        if terminated or truncated:
            winner = "red" if terminated and red_up else "blue" if terminated and blue_up else ""
            info = {"win": float(winner == "red"), "red_lost": float(n - self._alive[:n].sum()),
                    "blue_lost": float(n - self._alive[n:].sum()), **self._sums}
            if self.agent_groups:
                info["winner"] = winner
        obs, state = self._observe()
        active = np.array([self._alive[k] for k in self._learners])
        return EnvStep(obs, state, None, rewards, terminated, truncated, active=active, info=info)

    def track(self) -> tuple[float, list[TrackObject]]:
        """The sim time (s) and every aircraft and launched missile now (``tacview``)."""
        n, objects = self._n, []
        uids = []
        for k, state in enumerate(self._states):
            color, index = ("Red", k) if k < n else ("Blue", k - n)
            uids.append(aircraft_uid(color, index))
            objects.append(aircraft_object(uids[k], f"{color.lower()}_{index}", color, state, bool(self._alive[k])))
        fired = [0] * (2 * n)
        for m in self._missiles:
            fired[m.shooter] += 1
            north, east, up = m.position
            objects.append(TrackObject(f"{uids[m.shooter]}{fired[m.shooter]:X}", "AIM-9L", "missile",
                                       "Red" if m.shooter < n else "Blue", (north, east, up),
                                       (0.0, m.pitch, m.yaw), m.flying))
        return self._steps * self.config.sim_steps_per_step / SIM_RATE_HZ, objects
