"""Multi-agent particle environments (PettingZoo MPE2) as a ``MultiAgentEnv``.

We build mpe2's ``raw_env`` for the scenario but drive its internals directly (set
``current_actions``, call ``_execute_world_step``, ask the scenario for observations)
instead of going through the AEC and parallel wrappers: those cycle agent by agent and
rebuild dicts on every call, which roughly halves the step rate (simple_spread: ~7,000
steps/s here vs ~3,000-4,000 through ``parallel_env``), and stepping is the collector's
hot loop.
Because this leans on private mpe2 attributes, ``tests/envs/test_mpe.py`` pins
observations, rewards, state and spaces to be equal to the public ``parallel_env`` API
for every scenario, with discrete and continuous actions.

Sides: ``agent_names`` are mpe2's, ``agent_groups`` mpe2's two sides, ``adversary`` (agents whose
``adversary`` flag is set) and ``agent`` (the rest); a cooperative scenario has the one side
``agent``.  ``team_reward`` sums rewards within each side, so cooperative scenarios keep
HARL's sum over all agents.  A two-sided episode's last step reports each side's return
(``return_adversary``, ``return_agent``: the side's own mpe2 rewards, mean over its agents,
summed over the steps) and, in simple_tag and simple_world_comm, ``captures``: the
predator-prey pairs touching, summed over the steps (what the predators' reward counts).

mpe2 is an optional dependency: it is imported only when an environment is built.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs import mpe_keys, mpe_legacy
from harl.envs.names import group_indices
from harl.envs.protocol import EnvStep
from harl.errors import MissingExtraError
from harl.registry import register
from harl.settings import in_range, kind_field, one_of, setting

# Scenario name (``mpe_keys.SCENARIOS``) -> the versioned mpe2 module that defines its ``raw_env``.
_SCENARIO_MODULES = {
    "simple_spread": "mpe2.simple_spread_v3",
    "simple_reference": "mpe2.simple_reference_v3",
    "simple_speaker_listener": "mpe2.simple_speaker_listener_v4",
    "simple_tag": "mpe2.simple_tag_v3",
    "simple_adversary": "mpe2.simple_adversary_v3",
    "simple_push": "mpe2.simple_push_v3",
    "simple_world_comm": "mpe2.simple_world_comm_v3",
}
_CAPTURES = ("simple_tag", "simple_world_comm")
"""The predator-prey scenarios, whose episodes report ``captures``."""


@attrs.frozen
class MPEConfig:
    """Which MPE scenario to play and how."""

    kind: str = kind_field("mpe")
    scenario: str = mpe_keys.scenario(mpe_keys.SCENARIOS + mpe_keys.COMPETITIVE_SCENARIOS)
    continuous_actions: bool = mpe_keys.continuous_actions()
    max_episode_steps: int = mpe_keys.max_episode_steps()
    n_agents: int = mpe_keys.n_agents()
    local_ratio: float = mpe_keys.local_ratio()
    team_reward: bool = setting(
        True, "every agent gets the sum of its side's rewards (a cooperative scenario has one side: the "
        "sum of all agents' rewards, HARL's MPE convention, returns then compare with HARL's; "
        "simple_tag, simple_adversary, simple_push, simple_world_comm: the adversaries' sum and "
        "the good agents' sum), else each agent its own mpe2 reward",
    )
    variant: str = setting(
        "mpe2", "mpe2: mpe2's scenarios; pettingzoo_1.22: the MPE HARL's published results "
        "were measured on (an action moves its agent in the same step, simple_spread's "
        "self-collision term; see harl/envs/mpe_legacy.py)", one_of(mpe_legacy.VARIANTS),
    )
    num_good: int = setting(
        -1, "good agents (prey): simple_tag, simple_world_comm, simple_adversary (its N); "
        "-1: the scenario's own count (1, 2, 2)", in_range(-1),
    )
    num_adversaries: int = setting(
        -1, "adversaries (predators): simple_tag, simple_world_comm (the leader among them); "
        "-1: the scenario's own count (3, 4)", in_range(-1),
    )
    num_obstacles: int = setting(
        -1, "obstacles: simple_tag, simple_world_comm; -1: the scenario's own count (2, 1)", in_range(-1),
    )


def _raw_env_kwargs(config: MPEConfig, render_mode: str | None) -> dict[str, Any]:
    """The constructor arguments each scenario's ``raw_env`` accepts."""
    kwargs: dict[str, Any] = {
        "max_cycles": config.max_episode_steps,
        "continuous_actions": config.continuous_actions,
        "render_mode": render_mode,
    }
    if config.scenario in ("simple_spread", "simple_reference"):
        kwargs["local_ratio"] = config.local_ratio
    if config.scenario == "simple_spread":
        kwargs["N"] = config.n_agents
    counts = {"num_good": config.num_good, "num_adversaries": config.num_adversaries,
              "num_obstacles": config.num_obstacles}
    if config.scenario in _CAPTURES:
        kwargs.update({key: value for key, value in counts.items() if value >= 0})
    if config.scenario == "simple_adversary" and config.num_good >= 0:
        kwargs["N"] = config.num_good
    return kwargs


def _sides(agents: Sequence[Any]) -> dict[str, list[str]]:
    """mpe2's sides: ``adversary`` (agents whose ``adversary`` flag is set, in a competitive
    scenario) and ``agent`` (the good agents; every agent of a cooperative scenario)."""
    adversaries = [agent.name for agent in agents if getattr(agent, "adversary", False)]
    good = [agent.name for agent in agents if not getattr(agent, "adversary", False)]
    return {"adversary": adversaries, "agent": good} if adversaries and good else {"agent": [a.name for a in agents]}


def _import_scenario(scenario: str) -> Any:
    try:
        return importlib.import_module(_SCENARIO_MODULES[scenario])
    except ImportError as exc:
        raise MissingExtraError('env kind "mpe"', "mpe", "mpe2") from exc


class MPEEnv:
    """One MPE scenario stepped through mpe2's internals (see the module docstring)."""

    def __init__(self, config: MPEConfig, render_mode: str | None = None) -> None:
        module = _import_scenario(config.scenario)
        raw = module.raw_env(**_raw_env_kwargs(config, render_mode))
        self.config = config
        self._raw = raw
        self._world = raw.world
        self._scenario = raw.scenario
        self._agents = list(raw.world.agents)
        self._names = [agent.name for agent in self._agents]
        self._continuous = config.continuous_actions
        self._max_cycles = config.max_episode_steps
        self._steps = 0
        self._episode_start: dict[str, Any] = {"seed": None, "rng": None}
        """How the current episode began: its reset's seed, or mpe2's generator before it (``get_state``)."""
        # BaseScenario.is_terminal exists since mpe2 1.0; older scenarios never terminate.
        self._is_terminal = getattr(raw.scenario, "is_terminal", None)
        legacy = config.variant == "pettingzoo_1.22"
        if legacy:
            mpe_legacy.use_semi_implicit_integration(raw.world)
        self._flip_signs = [legacy and agent.movable for agent in self._agents]
        self._reward_offset = (
            mpe_legacy.self_collision_penalty(config.scenario, config.local_ratio) if legacy else 0.0
        )

        self.n_agents = len(self._agents)
        self.agent_names: list[str] = list(self._names)
        self.agent_groups: dict[str, list[str]] = _sides(self._agents)
        # Scenarios with two sides: per-side reward sums and episode metrics (None: one side).
        self._sides = group_indices(self._names, self.agent_groups) if len(self.agent_groups) > 1 else None
        self._side_returns = np.zeros(len(self._sides or ()))
        adversaries = [agent for agent in self._agents if getattr(agent, "adversary", False)]
        good = [agent for agent in self._agents if not getattr(agent, "adversary", False)]
        self._pairs = [(a, g) for a in adversaries for g in good] if config.scenario in _CAPTURES else None
        self._captures = 0
        self.observation_spaces: list[spaces.Box] = [
            raw.observation_spaces[name] for name in self._names
        ]
        self.action_spaces: list[spaces.Space] = [raw.action_spaces[name] for name in self._names]
        self.state_space: spaces.Box = raw.state_space

        if self._continuous:  # mpe2's continuous actions: a Box per agent; else a Discrete
            boxes = [space for space in self.action_spaces if isinstance(space, spaces.Box)]
            self._low = [space.low for space in boxes]
            self._high = [space.high for space in boxes]
            self._avail: list[np.ndarray] | None = None
        else:
            self._n_actions = [int(space.n) for space in self.action_spaces if isinstance(space, spaces.Discrete)]
            # Every action is always legal; the masks are shared, so make them read-only.
            self._avail = []
            for n in self._n_actions:
                mask = np.ones(n, dtype=np.float32)
                mask.flags.writeable = False
                self._avail.append(mask)

    def _observe(self) -> tuple[list[np.ndarray], np.ndarray]:
        observation = self._scenario.observation
        world = self._world
        obs = [observation(agent, world).astype(np.float32) for agent in self._agents]
        return obs, np.concatenate(obs)

    def reset(
        self, seed: int | None = None
    ) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray] | None]:
        """Start an episode; a seed re-seeds mpe2's generator exactly as ``raw_env.reset`` does."""
        self._episode_start = {"seed": seed, "rng": None if seed is not None else self.get_rng_state()}
        self._raw.reset(seed=seed)
        self._steps = 0
        self._side_returns[:] = 0.0
        self._captures = 0
        obs, state = self._observe()
        return obs, state, self._avail

    def _set_actions(self, actions: Sequence[Any]) -> None:
        current = self._raw.current_actions
        if self._continuous:
            # Same as mpe2's ClipOutOfBoundsWrapper (which clips only out-of-bounds
            # actions, to the same values).
            for i in range(self.n_agents):
                action = np.clip(actions[i], self._low[i], self._high[i])
                current[i] = mpe_legacy.to_mpe2_signs(action) if self._flip_signs[i] else action
            return
        for i in range(self.n_agents):
            action = actions[i]
            # A Python int: mpe2 decodes it with ``%=`` / ``//=``, which would write
            # into the caller's array if we passed a view, and indexes with it (a float index,
            # as an off-policy buffer stores a category, fails there).
            raw = action.item() if isinstance(action, np.ndarray) else action
            value = int(raw)
            if value != raw or not 0 <= value < self._n_actions[i]:
                raise ValueError(
                    f"agent {i}: action {raw} is outside Discrete({self._n_actions[i]})"
                )
            current[i] = value

    def step(self, actions: Sequence[Any]) -> EnvStep:
        self._set_actions(actions)
        self._raw._execute_world_step()
        self._steps += 1
        rewards_by_name = self._raw.rewards
        rewards = np.array([rewards_by_name[name] for name in self._names], dtype=np.float32)
        rewards += self._reward_offset
        if self._sides is not None:
            self._side_returns += [rewards[side].mean(dtype=np.float64) for side in self._sides]
            if self.config.team_reward:
                for side in self._sides:
                    rewards[side] = rewards[side].sum()
        elif self.config.team_reward:
            rewards[:] = rewards.sum()
        if self._pairs is not None:
            collides = self._scenario.is_collision
            self._captures += sum(1 for a, g in self._pairs if collides(g, a))
        obs, state = self._observe()
        # A terminal state wins over the time limit: its value is zero either way.
        terminated = self._is_terminal is not None and bool(self._is_terminal(self._world))
        truncated = not terminated and self._steps >= self._max_cycles
        avail: list[np.ndarray | None] | None = None if self._avail is None else [*self._avail]
        info = self._episode_info() if (terminated or truncated) and self._sides is not None else {}
        return EnvStep(obs, state, avail, rewards, terminated, truncated, info=info)

    def _episode_info(self) -> dict[str, float]:
        """A two-sided episode's metrics: each side's return (its agents' own mpe2 rewards, mean over
        the side, summed over the steps) and, in a predator-prey scenario, ``captures``."""
        info = {f"return_{side}": float(value) for side, value in zip(self.agent_groups, self._side_returns)}
        if self._pairs is not None:
            info["captures"] = float(self._captures)
        return info

    def get_rng_state(self) -> dict[str, Any]:
        """The state of mpe2's generator (MPE draws random numbers only in ``reset``)."""
        return self._raw.np_random.bit_generator.state

    def set_rng_state(self, state: dict[str, Any]) -> None:
        self._raw.np_random.bit_generator.state = state

    def get_state(self) -> dict[str, Any]:
        """The whole env mid-episode (``harl.envs.protocol.MultiAgentEnv``): how its episode began
        (the reset's seed, or mpe2's generator before it), every entity's position and velocity and
        every agent's utterance now, the step count, the generator now and the side accumulators.

        What a reset sets besides positions (colours, goal landmarks, speeds) never changes within
        an episode, so ``set_state`` replays the episode's reset for it and then puts the moving
        parts back: a copy of the world costs a few arrays, not a pickle of mpe2's objects."""
        n_agents = self.n_agents
        entities = [(e.state.p_pos.copy(), e.state.p_vel.copy(), e.state.c.copy() if k < n_agents else None)
                    for k, e in enumerate(self._world.entities)]
        return {"start": dict(self._episode_start), "entities": entities, "steps": self._steps,
                "rng": self.get_rng_state(), "side_returns": self._side_returns.copy(), "captures": self._captures}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from ``get_state``'s snapshot: the next ``step`` is the one that followed it."""
        start = state["start"]
        if start["seed"] is None and start["rng"] is not None:
            self.set_rng_state(start["rng"])
        self.reset(start["seed"])
        for entity, (pos, vel, c) in zip(self._world.entities, state["entities"], strict=True):
            entity.state.p_pos, entity.state.p_vel = pos.copy(), vel.copy()
            if c is not None:
                entity.state.c = c.copy()
        self._steps = int(state["steps"])
        self._side_returns[:] = state["side_returns"]
        self._captures = state["captures"]
        self.set_rng_state(state["rng"])

    def render(self) -> np.ndarray:
        """An RGB frame ``(height, width, 3)``; needs ``make_mpe_env(..., render_mode="rgb_array")``."""
        if self._raw.render_mode != "rgb_array":
            raise RuntimeError('build the env with make_mpe_env(config, render_mode="rgb_array")')
        return self._raw.render()

    def close(self) -> None:
        self._raw.close()


def make_mpe_env(config: MPEConfig, render_mode: str | None = None) -> MPEEnv:
    """Build the scenario; ``render_mode="rgb_array"`` enables ``render()``."""
    return MPEEnv(config, render_mode)


register("env", MPEConfig, make_mpe_env, default=True)
