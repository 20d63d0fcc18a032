"""Multi-agent MuJoCo (gymnasium-robotics' MaMuJoCo v1) as a ``MultiAgentEnv``.

A MuJoCo robot is split into agents, each controlling some of its joints (``agent_conf``
"2x3": two agents of three joints) and observing its own joints plus those within
``agent_obsk`` hops of them; observation sizes differ between agents and are not padded.
All agents share the robot's reward; the global state is the single-agent observation
(``parallel_env.state()``).

gymnasium-robotics builds the factorisation (which joints each agent controls and sees);
the partitions HARL uses that it does not ship (HalfCheetah 3x2, Walker2d 6x1, Ant 8x1,
Humanoid / HumanoidStandup 17x1) are built here with its documented custom-factorisation
API (``agent_factorization``), from the robot's own joint graph.

Like the MPE adapter, we build the public ``parallel_env`` but step its single-agent
MuJoCo env directly (``env.unwrapped.step``) instead of going through gymnasium's
wrappers and the per-agent dicts, and cut per-agent observations out of the global
observation with the package's own index map where that is exact (robots whose
observation does not clip velocities); elsewhere each agent's observation is built by
the package's ``build_obs``.  HalfCheetah 6x1 steps ~2x faster this way (see docs/environments/mamujoco.md).
``tests/envs/test_mamujoco.py`` pins observations, state, rewards and episode ends to
``parallel_env`` for every partition listed in ``PARTITIONS``.

gymnasium-robotics and mujoco are optional: imported only when an environment is built.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.protocol import EnvStep
from harl.errors import MissingExtraError
from harl.registry import register
from harl.settings import InvalidSetting, in_range, kind_field, one_of, positive, setting

PARTITIONS: dict[str, tuple[str, ...]] = {
    "HalfCheetah": ("2x3", "3x2", "6x1"),
    "Walker2d": ("2x3", "6x1"),
    "Ant": ("2x4", "2x4d", "4x2", "8x1"),
    "Hopper": ("3x1",),
    "Humanoid": ("9|8", "17x1"),
    "HumanoidStandup": ("9|8", "17x1"),
    "Swimmer": ("2x1",),
    "ManySegmentSwimmer": ("NxK",),
    "ManySegmentAnt": ("NxK",),
}
"""Scenario -> supported ``agent_conf`` values ("NxK": N agents of K segments, any N, K)."""

_EACH_JOINT = "each joint"
_CUSTOM: dict[tuple[str, str], Any] = {
    # HARL's grouping of the cheetah's six joints into three pairs.
    ("HalfCheetah", "3x2"): (("bfoot", "bshin"), ("bthigh", "ffoot"), ("fshin", "fthigh")),
    ("Walker2d", "6x1"): _EACH_JOINT,
    ("Ant", "8x1"): _EACH_JOINT,
    ("Humanoid", "17x1"): _EACH_JOINT,
    ("HumanoidStandup", "17x1"): _EACH_JOINT,
}
"""Partitions gymnasium-robotics does not ship: agent -> joint labels (or one joint each,
in actuator order)."""

_INDEXABLE = frozenset({"HalfCheetah", "Ant", "Humanoid", "HumanoidStandup", "Swimmer",
                        "ManySegmentSwimmer"})
"""Robots whose single-agent observation holds every agent's observed values unchanged,
so per-agent observations are slices of it (Hopper and Walker2d clip velocities there;
the many-segment Ant's index map is off for its free joint)."""

_MANY_SEGMENT = {"ManySegmentSwimmer": "Swimmer-v5", "ManySegmentAnt": "Ant-v5"}
_NXK = re.compile(r"^([1-9][0-9]*)x([1-9][0-9]*)$")
_METRICS = ("x_velocity",)
"""Per-step env infos reported as episode means (through the evaluator)."""


@attrs.frozen
class MaMuJoCoConfig:
    """Which robot, how it is split into agents, and what each agent sees."""

    kind: str = kind_field("mamujoco")
    scenario: str = setting("HalfCheetah", "MuJoCo robot", one_of(PARTITIONS))
    agent_conf: str = setting(
        "2x3", 'split into agents: "AxJ" is A agents of J joints; valid values depend on the '
        "scenario (harl.envs.mamujoco.PARTITIONS, the table in docs/environments/mamujoco.md)",
    )
    agent_obsk: int = setting(
        1, "an agent observes joints up to this many hops from its own (0: only its own)",
        in_range(0),
    )
    max_episode_steps: int = setting(1000, "steps per episode before truncation", positive())
    observation: str = setting(
        "local", "local: each agent sees its own joints (agent_obsk hops); harl: HARL's MaMuJoCo, every agent "
        "sees the whole robot's observation and its one-hot id, each vector standardised by its own mean and "
        "std (the critic's state too; agent_obsk is then unused, as in HARL)", one_of(("local", "harl")))
    clip_actions: bool = setting(
        True, "clip actions to [-1, 1] before the robot; false passes the Gaussian sample on as HARL does "
        "(MuJoCo clamps the torque, the control cost is charged on the unclipped action)")

    def __attrs_post_init__(self) -> None:
        allowed = PARTITIONS[self.scenario]
        if allowed == ("NxK",):
            if not _NXK.match(self.agent_conf):
                raise InvalidSetting(
                    "agent_conf",
                    f'expected "NxK" (N agents of K segments, e.g. "10x2") for {self.scenario}, '
                    f'got "{self.agent_conf}"', suggest_default=False,
                )
        elif self.agent_conf not in allowed:
            raise InvalidSetting(
                "agent_conf",
                f'expected one of: {", ".join(allowed)} for {self.scenario}; got "{self.agent_conf}"',
                suggest_default=False,
            )


def _import_mamujoco() -> tuple[Any, Any]:
    try:
        import mujoco  # noqa: F401 - gymnasium imports it only when a robot is made
    except ImportError as exc:
        raise MissingExtraError('env kind "mamujoco"', "mamujoco", "mujoco") from exc
    try:
        # gymnasium-robotics prints an unrelated notice (about Adroit hand envs) on import.
        with contextlib.redirect_stderr(io.StringIO()):
            from gymnasium_robotics.envs.multiagent_mujoco import mujoco_multi, obsk
    except ImportError as exc:
        raise MissingExtraError('env kind "mamujoco"', "mamujoco", "gymnasium-robotics") from exc
    return mujoco_multi, obsk


@contextlib.contextmanager
def quiet_mujoco_compiler() -> Iterator[None]:
    """Drop MuJoCo 4's deprecation warning about gymnasium's assets while a model is built.

    gymnasium's robot files use ``settotalmass``, which MuJoCo >= 4 warns about on stderr
    for every model compiled: one line per environment copy.  Other MuJoCo warnings go
    through Python's ``warnings``.  Without mujoco installed this does nothing.
    """
    try:
        import mujoco
    except ImportError:
        mujoco = None
    if mujoco is None:
        yield
        return
    previous = mujoco.get_mju_user_warning()

    def handle(message: str) -> None:
        if "settotalmass" not in message:
            warnings.warn(f"MuJoCo: {message}", RuntimeWarning, stacklevel=2)

    mujoco.set_mju_user_warning(handle)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


def _factorization(obsk: Any, scenario: str, agent_conf: str) -> dict[str, Any] | None:
    """The documented ``agent_factorization`` dict for a partition we build, else None."""
    custom = _CUSTOM.get((scenario, agent_conf))
    if custom is None:
        return None
    (nodes,), edges, global_nodes = obsk.get_parts_and_edges(scenario, None)
    if custom == _EACH_JOINT:
        partition = [(node,) for node in sorted(nodes, key=lambda node: node.act_ids)]
    else:
        by_label = {node.label: node for node in nodes}
        partition = [tuple(by_label[label] for label in labels) for labels in custom]
    return {"partition": partition, "edges": edges, "globals": global_nodes}


def _many_segment_env(module: Any, scenario: str, agent_conf: str) -> Any:
    """The single-agent env of a many-segment robot, from an asset in a private temp dir.

    gymnasium-robotics would write the generated asset into its own package directory
    under a fixed name, which races when several worker processes build envs at once.
    """
    import gymnasium

    n_agents, per_agent = (int(n) for n in agent_conf.split("x"))
    generator = (module.many_segment_swimmer if scenario == "ManySegmentSwimmer"
                 else module.many_segment_ant)
    with tempfile.TemporaryDirectory(prefix="harl-mamujoco-") as tmp:
        path = os.path.join(tmp, f"{scenario}_{n_agents * per_agent}.xml")
        generator.gen_asset(n_segs=n_agents * per_agent, asset_path=path)
        return gymnasium.make(_MANY_SEGMENT[scenario], xml_file=path)


def make_parallel_env(config: MaMuJoCoConfig, render_mode: str | None = None) -> Any:
    """gymnasium-robotics' public ``parallel_env`` for ``config`` (what ``MaMuJoCoEnv`` steps)."""
    mujoco_multi, obsk = _import_mamujoco()
    with quiet_mujoco_compiler():
        gym_env = None
        if config.scenario in _MANY_SEGMENT:
            gym_env = _many_segment_env(mujoco_multi, config.scenario, config.agent_conf)
        return mujoco_multi.MultiAgentMujocoEnv(
            config.scenario, config.agent_conf, agent_obsk=config.agent_obsk,
            agent_factorization=_factorization(obsk, config.scenario, config.agent_conf),
            render_mode=render_mode, gym_env=gym_env,
        )


def _standardised(x: np.ndarray) -> np.ndarray:
    """``(x - mean(x)) / std(x)`` over the vector's own entries, in float32 (HARL's per-vector scaling)."""
    return ((x - np.mean(x)) / np.std(x)).astype(np.float32)


class MaMuJoCoEnv:
    """One factorised MuJoCo robot, stepped through its single-agent env (module docstring)."""

    def __init__(self, config: MaMuJoCoConfig, render_mode: str | None = None) -> None:
        parallel = make_parallel_env(config, render_mode)
        self.config = config
        self._parallel = parallel
        self._mujoco = parallel.single_agent_env.unwrapped
        self._names = list(parallel.possible_agents)
        self.n_agents = len(self._names)
        self._harl_obs = config.observation == "harl"
        self._ids = np.eye(self.n_agents)
        """HARL's observation: each agent's one-hot id after the robot's observation."""
        whole = self._mujoco.observation_space.shape[0]
        self.observation_spaces: list[spaces.Box] = [
            spaces.Box(-np.inf, np.inf, (whole + self.n_agents,) if self._harl_obs
                       else parallel.observation_space(name).shape, np.float32)
            for name in self._names
        ]
        self.action_spaces: list[spaces.Box] = [parallel.action_space(name) for name in self._names]
        state_shape = self._mujoco.observation_space.shape
        self.state_space = spaces.Box(-np.inf, np.inf, state_shape, np.float32)

        # Agent i's action fills these entries of the robot's action vector.
        self._act_ids = np.array(
            [node.act_ids for part in parallel.agent_action_partitions for node in part], dtype=np.int64
        )
        n_actions = self._mujoco.action_space.shape[0]
        if sorted(self._act_ids.tolist()) != list(range(n_actions)):
            raise ValueError(f"{config.scenario} {config.agent_conf}: the agents do not cover each "
                             "actuator exactly once")
        self._global_action = np.zeros(n_actions, dtype=np.float64)
        self._low = self._mujoco.action_space.low.astype(np.float64)
        self._high = self._mujoco.action_space.high.astype(np.float64)
        self._obs_index: list[np.ndarray] | None = None
        mapping = parallel.observation_factorization
        if config.scenario in _INDEXABLE and mapping is not None:
            self._obs_index = [np.asarray(mapping[name], dtype=np.int64) for name in self._names]
        self._steps = 0
        self._metric_sums = dict.fromkeys(_METRICS, 0.0)

    def _observe(self, global_obs: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        if self._harl_obs:  # HARL's get_obs / get_state (multiagent_mujoco/mujoco_multi.py)
            obs = [_standardised(np.concatenate([global_obs, self._ids[i]])) for i in range(self.n_agents)]
            return obs, _standardised(global_obs)
        state = global_obs.astype(np.float32)
        if self._obs_index is not None:
            return [state[index] for index in self._obs_index], state
        agent_obs = self._parallel._get_obs_agent
        return [agent_obs(i).astype(np.float32) for i in range(self.n_agents)], state

    def reset(
        self, seed: int | None = None
    ) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray] | None]:
        """Start an episode; a seed re-seeds the robot's generator as ``parallel_env.reset`` does."""
        global_obs, _ = self._mujoco.reset(seed=seed)
        self._steps = 0
        for key in self._metric_sums:
            self._metric_sums[key] = 0.0
        obs, state = self._observe(global_obs)
        return obs, state, None

    def step(self, actions: Sequence[np.ndarray]) -> EnvStep:
        """Step the robot; actions outside [-1, 1] (Gaussian samples) are clipped first (``clip_actions``)."""
        # The agents' actions laid out in partition order, then scattered to actuators.
        flat = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1) for a in actions])
        self._global_action[self._act_ids] = flat
        if self.config.clip_actions:
            np.clip(self._global_action, self._low, self._high, out=self._global_action)
        global_obs, reward, terminated, _, info = self._mujoco.step(self._global_action)
        self._steps += 1
        for key in self._metric_sums:
            if key in info:
                self._metric_sums[key] += float(info[key])
        obs, state = self._observe(global_obs)
        terminated = bool(terminated)
        # A terminal state wins over the time limit: its value is zero either way.
        truncated = not terminated and self._steps >= self.config.max_episode_steps
        episode_info: dict[str, Any] = {}
        if terminated or truncated:
            episode_info = {key: total / self._steps for key, total in self._metric_sums.items()
                            if key in info}
        rewards = np.full(self.n_agents, reward, dtype=np.float32)
        return EnvStep(obs, state, None, rewards, terminated, truncated, info=episode_info)

    def get_rng_state(self) -> dict[str, Any]:
        """The robot's generator (MuJoCo envs draw random numbers only in ``reset``)."""
        return self._mujoco.np_random.bit_generator.state

    def set_rng_state(self, state: dict[str, Any]) -> None:
        self._mujoco.np_random.bit_generator.state = state

    def render(self) -> Any:
        """A frame from the robot's renderer; needs ``make_mamujoco_env(..., render_mode="rgb_array")``."""
        # The unwrapped env: ``reset`` bypasses gymnasium's wrappers, whose OrderEnforcing
        # would refuse to render "before reset".
        return self._mujoco.render()

    def close(self) -> None:
        self._parallel.close()


def make_mamujoco_env(config: MaMuJoCoConfig, render_mode: str | None = None) -> MaMuJoCoEnv:
    """Build the factorised robot; ``render_mode="rgb_array"`` enables ``render()``."""
    return MaMuJoCoEnv(config, render_mode)


register("env", MaMuJoCoConfig, make_mamujoco_env)
