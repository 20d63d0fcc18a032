"""Google Research Football (gfootball) academy scenarios as a ``MultiAgentEnv``.

Each agent controls one left-team player and observes gfootball's ``simple115v2`` vector
(115 floats: both teams' positions and motions, the ball, who owns it, the game mode and
a one-hot of the player this agent controls); it picks one of gfootball's 19 default
actions (``Discrete(19)``, every action always allowed).  The agent count per scenario is
HARL's (``SCENARIOS``).

Global state (EP): the simple115 vectors of the agents differ only in the one-hot of the
controlled player, so the state is the first agent's vector followed by the other agents'
one-hots: ``115 + 11 * (n_agents - 1)`` floats.  That is the same information, and the same
size, as HARL's football state (which it rebuilds from gfootball's raw observations).

Episodes: an academy episode ends on a goal, the ball going out of play or the other team
winning the ball (terminated), or after the scenario's ``game_duration`` (400 steps;
truncated: ``steps_left`` in the raw observation is 0 and no goal was scored on that
step).  Every episode reports ``score`` (1.0 if the left team scored, else 0.0), which the
evaluator averages into the ``eval_score`` column: HARL's score rate.

Rewards: gfootball gives each controlled player ``scoring`` (+1 / -1 per goal) plus, with
``checkpoints``, 0.1 for each of 10 rings around the goal (distances 0.99 down to 0.19)
that the player first reaches with the ball; a goal pays the rings not yet collected, so at
most 1.0 per episode and player comes from them.  ``team_reward`` decides what every agent receives:
"first" the first controlled player's reward (HARL's choice, which its tuned settings
assume), "sum" or "mean" over the controlled players.

Seeding: gfootball seeds its engine at every episode start from its config's
``game_engine_random_seed``, or from Python's global ``random`` when that is unset.  We
draw the engine seed of each episode from our own generator (``reset(seed)`` re-seeds it)
and apply it by seeding a private ``random.Random`` state around gfootball's reset, so an
episode is fixed by its seed without touching the caller's ``random`` stream, and a
checkpoint can replay how an episode began (``get_rng_state``).  The gfootball env is
created at the first reset for the same reason (its constructor already runs an episode
start).

gfootball is optional (``pip install "harl[football]"``) and compiles its C++ engine when
installed: see docs/environments/football.md for the Debian packages it needs, or ``nox -s football``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import random
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.protocol import EnvStep
from harl.errors import MissingExtraError
from harl.registry import register
from harl.settings import kind_field, one_of, setting

SCENARIOS: dict[str, int] = {
    "academy_3_vs_1_with_keeper": 3,
    "academy_counterattack_easy": 4,
    "academy_counterattack_hard": 4,
    "academy_pass_and_shoot_with_keeper": 2,
    "academy_run_pass_and_shoot_with_keeper": 2,
    "academy_corner": 11,
    "academy_single_goal_versus_lazy": 11,
}
"""gfootball scenario -> left-team players the agents control (one agent each; HARL's counts)."""

OBS_SIZE = 115
N_ACTIONS = 19
"""gfootball's default action set: idle, 8 directions, passes, shot, sprint, dribble, ..."""
ACTIVE = slice(97, 108)
"""Where simple115 / simple115v2 hold the one-hot of the controlled player (after 88
player values, 3 ball position, 3 ball direction and 3 ball-owner values)."""
_SEED_RANGE = 2_000_000_000
"""gfootball draws its engine seeds from [0, 2e9]; ours come from the same range."""


@attrs.frozen
class FootballConfig:
    """``[env] kind = "football"``: a Google Research Football academy scenario."""

    kind: str = kind_field("football")
    scenario: str = setting(
        "academy_3_vs_1_with_keeper", "gfootball academy scenario; the agent count is HARL's "
        "(harl.envs.football.SCENARIOS)", one_of(SCENARIOS),
    )
    representation: str = setting(
        "simple115v2", "115-float observation: simple115v2 keeps player slots fixed, simple115 is "
        "the older layout", one_of(("simple115v2", "simple115")),
    )
    rewards: str = setting(
        "scoring,checkpoints", "gfootball reward: goals only, or goals plus 0.1 for each of 10 "
        "rings around the goal first reached with the ball", one_of(("scoring,checkpoints", "scoring")),
    )
    team_reward: str = setting(
        "first", "what every agent receives: the first controlled player's reward (HARL), or the "
        "sum / mean over the controlled players", one_of(("first", "sum", "mean")),
    )


def import_gfootball() -> Any:
    """``gfootball.env``, or a ``MissingExtraError`` that says how to install it.

    gfootball imports the retired ``gym``, which prints a notice to stderr on import (once per
    env worker); we drop it, as the MaMuJoCo adapter does for gymnasium-robotics' notice.
    """
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return importlib.import_module("gfootball.env")
    except ImportError as exc:
        raise MissingExtraError(
            'env kind "football" (Google Research Football; gfootball compiles its engine when '
            "installed: docs/environments/football.md lists the Debian packages it needs, or run nox -s football)",
            "football", "gfootball",
        ) from exc


@contextlib.contextmanager
def _python_random_seeded(seed: int) -> Iterator[None]:
    """Seed Python's global ``random`` (which gfootball draws from) and restore it afterwards."""
    saved = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(saved)


def team_rewards(player_rewards: np.ndarray, how: str, n_agents: int) -> np.ndarray:
    """Every agent's reward from the controlled players' gfootball rewards (``team_reward``)."""
    if how == "first":
        value = player_rewards[0]
    elif how == "sum":
        value = player_rewards.sum()
    else:
        value = player_rewards.mean()
    return np.full(n_agents, value, dtype=np.float32)


def global_state(obs: np.ndarray) -> np.ndarray:
    """EP state from the ``(n_agents, 115)`` observations: agent 0's, then the others' one-hots."""
    return np.concatenate([obs[0], obs[1:, ACTIVE].reshape(-1)]).astype(np.float32, copy=False)


class FootballEnv:
    """One gfootball academy episode stream, ``n_agents`` left players (module docstring)."""

    def __init__(self, config: FootballConfig) -> None:
        self._module = import_gfootball()
        self.config = config
        self.n_agents = SCENARIOS[config.scenario]
        box = spaces.Box(-np.inf, np.inf, (OBS_SIZE,), np.float32)
        self.observation_spaces: list[spaces.Box] = [box] * self.n_agents
        self.action_spaces: list[spaces.Discrete] = [spaces.Discrete(N_ACTIONS)] * self.n_agents
        state_size = OBS_SIZE + (self.n_agents - 1) * (ACTIVE.stop - ACTIVE.start)
        self.state_space = spaces.Box(-np.inf, np.inf, (state_size,), np.float32)
        self._env: Any = None
        self._rng = np.random.default_rng()
        self._scored = False

    def _create(self) -> Any:
        with warnings.catch_warnings():  # gym 0.25 warns that gfootball's wrappers use its old step API
            warnings.simplefilter("ignore", DeprecationWarning)
            env = self._module.create_environment(
                env_name=self.config.scenario,
                representation=self.config.representation,
                rewards=self.config.rewards,
                stacked=False,
                number_of_left_players_agent_controls=self.n_agents,
                number_of_right_players_agent_controls=0,
                render=False,
            )
        shape = (self.n_agents, OBS_SIZE) if self.n_agents > 1 else (OBS_SIZE,)
        if tuple(env.observation_space.shape) != shape:
            raise RuntimeError(f"gfootball {self.config.scenario}: observation space "
                               f"{env.observation_space.shape}, expected {shape}")
        return env

    def _observe(self, raw_obs: Any) -> tuple[list[np.ndarray], np.ndarray]:
        obs = np.asarray(raw_obs, dtype=np.float32).reshape(self.n_agents, OBS_SIZE)
        return list(obs), global_state(obs)

    def reset(
        self, seed: int | None = None
    ) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray] | None]:
        """Start an episode; its engine seed comes from our generator (``seed`` re-seeds it)."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        with _python_random_seeded(int(self._rng.integers(_SEED_RANGE))):
            if self._env is None:
                self._env = self._create()
            raw_obs = self._env.reset()
        self._scored = False
        obs, state = self._observe(raw_obs)
        return obs, state, None

    def step(self, actions: Sequence[Any]) -> EnvStep:
        chosen = []
        for i, action in enumerate(actions):
            value = int(np.asarray(action).reshape(-1)[0])
            if not 0 <= value < N_ACTIONS:
                raise ValueError(f"agent {i}: action {value} is outside Discrete({N_ACTIONS})")
            chosen.append(value)
        raw_obs, reward, done, info = self._env.step(chosen)
        player_rewards = np.asarray(reward, dtype=np.float32).reshape(-1)
        rewards = team_rewards(player_rewards, self.config.team_reward, self.n_agents)
        goal = info.get("score_reward", 0)  # +1: the left team scored, -1: the right team
        self._scored = self._scored or goal > 0
        obs, state = self._observe(raw_obs)
        terminated = truncated = False
        episode_info: dict[str, Any] = {}
        if done:
            # The time limit is the only end that leaves the state non-terminal; a goal on
            # the last step still ends the attack.
            out_of_time = self._env.unwrapped.observation()[0]["steps_left"] <= 0
            truncated = out_of_time and goal == 0
            terminated = not truncated
            episode_info = {"score": 1.0 if self._scored else 0.0}
        return EnvStep(obs, state, None, rewards, terminated, truncated, info=episode_info)

    def get_rng_state(self) -> dict[str, Any]:
        """The generator that picks each episode's engine seed."""
        return dict(self._rng.bit_generator.state)

    def set_rng_state(self, state: dict[str, Any]) -> None:
        self._rng.bit_generator.state = state

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


def make_football_env(config: FootballConfig) -> FootballEnv:
    """Build the env (gfootball itself is created at the first reset)."""
    return FootballEnv(config)


register("env", FootballConfig, make_football_env)
