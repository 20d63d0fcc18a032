"""The football adapter: its own logic against a fake ``gfootball.env``, then the real engine.

gfootball compiles a C++ engine when installed (``nox -s football``), so CI never has it.
The first half installs a small fake of ``gfootball.env`` into ``sys.modules``: it returns
what gfootball documents (``create_environment`` -> an env whose ``reset`` gives an
``(n_players, 115)`` float32 simple115v2 array, whose ``step`` gives that array, a float32
reward per player, ``done`` and ``info["score_reward"]``, and whose
``unwrapped.observation()`` gives one raw dict per player), scripted step by step, so the
adapter's state assembly, reward, episode ends, score and seeding are checked everywhere.
The second half runs the real engine and skips, with the reason, where it is absent.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import types
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from gymnasium import spaces

from harl.envs.football import ACTIVE, SCENARIOS, FootballConfig, make_football_env
from harl.envs.registry import make_env
from harl.envs.vector import make_vector_env
from harl.errors import MissingExtraError
from harl.evaluator import summarize_episodes
from harl.settings import InvalidSetting
from tests.train_briefly import train_briefly

ROOT = Path(__file__).parent.parent.parent
HAS_GFOOTBALL = importlib.util.find_spec("gfootball") is not None
NO_ENGINE = "gfootball is not installed (its engine compiles from source: nox -s football)"


# --------------------------------------------------------------------------- the fake


@attrs.define
class Script:
    """What the fake returns at one step: per-player rewards, info["score_reward"], done, steps_left."""

    rewards: list[float] | float
    """One per controlled player, or one value for all of them."""
    score_reward: int = 0
    done: bool = False
    steps_left: int = 100


def _simple115v2(raw: dict[str, Any]) -> np.ndarray:
    """gfootball's documented simple115v2 layout, from one raw observation dict."""
    o: list[float] = []
    for name in ("left_team", "left_team_direction", "right_team", "right_team_direction"):
        values = np.asarray(raw[name], dtype=np.float32).reshape(-1).tolist()
        o.extend(values + [-1.0] * (22 - len(values)))
    o.extend(raw["ball"])
    o.extend(raw["ball_direction"])
    o.extend([1.0 * (raw["ball_owned_team"] == t) for t in (-1, 0, 1)])
    active = [0.0] * 11
    active[raw["active"]] = 1.0
    o.extend(active)
    mode = [0.0] * 7
    mode[raw["game_mode"]] = 1.0
    o.extend(mode)
    return np.array(o, dtype=np.float32)


class FakeFootball:
    """A scripted stand-in for ``gfootball.env.create_environment(...)``'s env."""

    def __init__(self, module: FakeModule, kwargs: dict[str, Any]) -> None:
        self.module = module
        self.kwargs = kwargs
        self.n = kwargs["number_of_left_players_agent_controls"]
        self.observation_space = spaces.Box(-np.inf, np.inf, (self.n, 115) if self.n > 1 else (115,), np.float32)
        self.action_space = spaces.MultiDiscrete([19] * self.n)
        self.unwrapped = self
        self.closed = False
        self._raw: list[dict[str, Any]] = []
        self._reset_raw()  # gfootball's constructor starts an episode too

    def _reset_raw(self) -> None:
        # gfootball draws an episode's engine seed from Python's global random when none is set.
        rng = np.random.default_rng(random.randint(0, 2_000_000_000))
        players = min(self.n + 1, 11)  # a keeper besides the controlled players, where there is room
        base = {
            "left_team": rng.uniform(-1, 1, (players, 2)), "left_team_direction": np.zeros((players, 2)),
            "right_team": rng.uniform(-1, 1, (2, 2)), "right_team_direction": np.zeros((2, 2)),
            "ball": list(rng.uniform(-1, 1, 3)), "ball_direction": [0.0, 0.0, 0.0], "ball_owned_team": 0,
            "game_mode": 0, "score": [0, 0], "steps_left": 400,
        }
        self._raw = [{**base, "active": players - self.n + i, "designated": 1, "sticky_actions": np.zeros(10)}
                     for i in range(self.n)]

    def _obs(self) -> np.ndarray:
        obs = np.stack([_simple115v2(raw) for raw in self._raw])
        return obs if self.n > 1 else obs[0]

    def reset(self) -> np.ndarray:
        self._reset_raw()
        return self._obs()

    def step(self, action: Any) -> tuple[np.ndarray, np.ndarray, bool, dict[str, Any]]:
        self.module.actions.append(action)
        script = self.module.script.pop(0)
        for raw in self._raw:
            raw["ball"] = [raw["ball"][0] + 0.01, *raw["ball"][1:]]
            raw["steps_left"] = script.steps_left
        rewards = script.rewards if isinstance(script.rewards, list) else [script.rewards] * self.n
        reward = np.array(rewards, dtype=np.float32)
        return self._obs(), reward if self.n > 1 else reward[0], script.done, {"score_reward": script.score_reward}

    def observation(self) -> list[dict[str, Any]]:
        return self._raw

    def close(self) -> None:
        self.closed = True


class FakeModule(types.ModuleType):
    """The fake ``gfootball.env`` module: ``create_environment`` plus what the tests inspect."""

    def __init__(self) -> None:
        super().__init__("gfootball.env")
        self.created: list[FakeFootball] = []
        self.actions: list[Any] = []
        self.script: list[Script] = []

    def create_environment(self, **kwargs: Any) -> FakeFootball:
        env = FakeFootball(self, kwargs)
        self.created.append(env)
        return env


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeModule:
    module = FakeModule()
    monkeypatch.setitem(sys.modules, "gfootball.env", module)
    return module


def _env(**kwargs: Any):
    return make_football_env(FootballConfig(**kwargs))


# --------------------------------------------------------------------------- adapter logic


class TestConfig:
    def test_defaults_are_harls(self) -> None:
        """The default config is HARL's: simple115v2, scoring + checkpoints, the first player's reward."""
        config = FootballConfig()
        assert (config.scenario, config.representation, config.rewards, config.team_reward) == (
            "academy_3_vs_1_with_keeper", "simple115v2", "scoring,checkpoints", "first")

    def test_unknown_scenario_is_refused(self) -> None:
        """A scenario outside SCENARIOS names the valid ones."""
        with pytest.raises(InvalidSetting) as info:
            FootballConfig(scenario="11_vs_11_stochastic")
        assert str(info.value) == "scenario: expected one of: " + ", ".join(SCENARIOS) + '; got "11_vs_11_stochastic"'

    @pytest.mark.parametrize(("key", "value"), [("representation", "pixels"), ("rewards", "checkpoints"),
                                                ("team_reward", "max")])
    def test_other_choices_are_checked(self, key: str, value: str) -> None:
        """Representation, rewards and team_reward accept only the listed values."""
        with pytest.raises(InvalidSetting, match=f"^{key}: expected one of: "):
            FootballConfig(**{key: value})

    def test_missing_gfootball_says_how_to_install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without gfootball the factory raises MissingExtraError naming the extra and the build."""
        monkeypatch.setitem(sys.modules, "gfootball.env", None)  # import raises ImportError
        with pytest.raises(MissingExtraError) as info:
            make_env(FootballConfig())
        assert 'pip install "harl[football]"' in str(info.value)
        assert "nox -s football" in str(info.value)


class TestWithFake:
    @pytest.mark.parametrize("scenario", list(SCENARIOS))
    def test_spaces_state_and_creation_arguments(self, fake: FakeModule, scenario: str) -> None:
        """HARL's agent count, 115-float obs, Discrete(19), state = agent 0's obs + the others' one-hots."""
        env = _env(scenario=scenario)
        n = SCENARIOS[scenario]
        assert env.n_agents == n
        assert env.observation_spaces == [spaces.Box(-np.inf, np.inf, (115,), np.float32)] * n
        assert env.action_spaces == [spaces.Discrete(19)] * n
        assert env.state_space.shape == (115 + 11 * (n - 1),)
        assert fake.created == []  # gfootball is created at the first reset
        obs, state, avail = env.reset(seed=3)
        assert fake.created[0].kwargs == {
            "env_name": scenario, "representation": "simple115v2", "rewards": "scoring,checkpoints",
            "stacked": False, "number_of_left_players_agent_controls": n,
            "number_of_right_players_agent_controls": 0, "render": False}
        assert avail is None and len(obs) == n
        assert all(o.shape == (115,) and o.dtype == np.float32 for o in obs)
        assert state.shape == env.state_space.shape and state.dtype == np.float32
        np.testing.assert_array_equal(state[:115], obs[0])
        for i in range(1, n):
            np.testing.assert_array_equal(state[115 + 11 * (i - 1):115 + 11 * i], obs[i][ACTIVE])
        assert len({int(o[ACTIVE].argmax()) for o in obs}) == n  # each agent its own player

    @pytest.mark.parametrize(("how", "expected"), [("first", 0.1), ("sum", 0.4), ("mean", 0.4 / 3)])
    def test_team_reward(self, fake: FakeModule, how: str, expected: float) -> None:
        """Every agent gets the first player's reward, or the players' sum or mean."""
        env = _env(team_reward=how)
        env.reset(seed=0)
        fake.script = [Script([0.1, 0.3, 0.0])]
        step = env.step([np.array(1), np.array(2), np.array(18)])
        np.testing.assert_allclose(step.rewards, [expected] * 3, rtol=1e-6)
        assert step.rewards.dtype == np.float32
        assert fake.actions == [[1, 2, 18]]

    def test_actions_outside_the_action_set_are_refused(self, fake: FakeModule) -> None:
        """An action index of 19 or more is an error, not a silent wrap."""
        env = _env()
        env.reset(seed=0)
        with pytest.raises(ValueError, match=r"^agent 2: action 19 is outside Discrete\(19\)$"):
            env.step([0, 0, 19])

    @pytest.mark.parametrize(("script", "terminated", "truncated", "score"), [
        (Script([1.0, 1.0, 1.0], score_reward=1, done=True, steps_left=350), True, False, 1.0),    # goal
        (Script([0.0, 0.0, 0.0], done=True, steps_left=350), True, False, 0.0),                     # ball lost / out
        (Script([-1.0, -1.0, -1.0], score_reward=-1, done=True, steps_left=350), True, False, 0.0),  # conceded
        (Script([0.0, 0.0, 0.0], done=True, steps_left=0), False, True, 0.0),                       # time limit
        (Script([1.0, 1.0, 1.0], score_reward=1, done=True, steps_left=0), True, False, 1.0),      # goal at the limit
    ], ids=["goal", "lost", "conceded", "time-limit", "goal-at-limit"])
    def test_episode_ends_and_score(self, fake: FakeModule, script: Script, terminated: bool,
                                    truncated: bool, score: float) -> None:
        """Goal / ball lost / conceded end the episode (terminated); only the time limit truncates."""
        env = _env()
        env.reset(seed=0)
        fake.script = [Script([0.1, 0.0, 0.0]), script]
        first = env.step([0, 0, 0])
        assert (first.terminated, first.truncated, first.info) == (False, False, {})
        last = env.step([0, 0, 0])
        assert (last.terminated, last.truncated) == (terminated, truncated)
        assert last.info == {"score": score}

    def test_score_counts_a_goal_before_the_end(self, fake: FakeModule) -> None:
        """An episode in which the left team scored has score 1 even if it ends later; a reset clears it."""
        env = _env(scenario="academy_pass_and_shoot_with_keeper")
        env.reset(seed=0)
        fake.script = [Script([1.0, 1.0], score_reward=1), Script([0.0, 0.0], done=True, steps_left=0),
                       Script([0.0, 0.0], done=True, steps_left=10)]
        env.step([0, 0])
        assert env.step([0, 0]).info == {"score": 1.0}
        env.reset()
        assert env.step([0, 0]).info == {"score": 0.0}

    def test_seeding_is_reproducible_and_leaves_python_random_alone(self, fake: FakeModule) -> None:
        """Equal seeds give equal episodes; the caller's random stream is not consumed or reseeded."""
        random.seed(123)
        expected_draw = random.random()
        random.seed(123)
        a, b = _env(), _env()
        first_a = [a.reset(seed=7)[1], a.reset()[1], a.reset()[1]]
        first_b = [b.reset(seed=7)[1], b.reset()[1], b.reset()[1]]
        assert random.random() == expected_draw
        for sa, sb in zip(first_a, first_b):
            np.testing.assert_array_equal(sa, sb)
        assert not np.array_equal(first_a[1], first_a[2])  # episodes differ within a stream
        assert not np.array_equal(_env().reset(seed=8)[1], first_a[0])

    def test_rng_state_replays_an_episode_start(self, fake: FakeModule) -> None:
        """get_rng_state before a reset and set_rng_state later begin the same episode again."""
        env = _env()
        env.reset(seed=1)
        saved = env.get_rng_state()
        state = env.reset()[1]
        env.reset()
        env.set_rng_state(saved)
        np.testing.assert_array_equal(env.reset()[1], state)
        env.close()
        assert fake.created[0].closed

    def test_evaluator_reports_the_score_rate(self, fake: FakeModule) -> None:
        """Episode scores reach VectorStep.episode_infos and become the evaluator's 'score' metric."""
        venv = make_vector_env(FootballConfig(scenario="academy_pass_and_shoot_with_keeper"), 2, "inline", seed=0)
        venv.reset()
        fake.script = [Script([1.0, 1.0], score_reward=1, done=True), Script([0.0, 0.0], done=True, steps_left=0)]
        step = venv.step([np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64)])
        assert list(step.terminated) == [True, False] and list(step.truncated) == [False, True]
        stats = summarize_episodes(step.episode_infos + [{"return": 0.0, "length": 1, "score": 1.0}])
        assert stats.metrics == {"score": pytest.approx(2 / 3)}


class ScriptedForever(list):
    """An endless script for pipeline runs: small rewards, a goal every 7th step, a time limit every 11th."""

    t = 0

    def pop(self, index: int = -1) -> Script:
        self.t += 1
        if self.t % 7 == 0:
            return Script(1.0, score_reward=1, done=True, steps_left=300)
        if self.t % 11 == 0:
            return Script(0.0, done=True, steps_left=0)
        return Script(0.01)


@pytest.mark.parametrize("path", sorted(ROOT.glob("pipelines/happo_football_*.toml")), ids=lambda p: p.stem)
def test_shipped_pipeline_trains_on_the_fake(fake: FakeModule, path: Path, tmp_path: Path) -> None:
    """Each football pipeline builds and trains two iterations (fake engine, fewer envs and steps)."""
    fake.script = ScriptedForever()
    overrides = ["logging.progress=false", "collector.n_envs=2", "collector.rollout_length=20",
                 "evaluator.episodes=2", "evaluator.n_envs=2", "updater.objective.epochs=1", "critic.epochs=1"]
    result, rows = train_briefly(path, overrides, tmp_path / "run")
    assert result.counters.env_steps == 2 * 2 * 20
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    assert float(rows[-1]["eval_score"]) in {0.0, 0.5, 1.0}  # 2 episodes: a score rate


# --------------------------------------------------------------------------- the real engine

real = pytest.mark.skipif(not HAS_GFOOTBALL, reason=NO_ENGINE)


@real
@pytest.mark.parametrize("scenario", ["academy_3_vs_1_with_keeper", "academy_counterattack_easy",
                                      "academy_pass_and_shoot_with_keeper"])
def test_engine_spaces_and_state(scenario: str) -> None:
    """The engine's spaces are the adapter's; obs differ only in the controlled-player one-hot."""
    env = _env(scenario=scenario)
    n = env.n_agents
    obs, state, _ = env.reset(seed=0)
    engine = env._env
    assert engine.observation_space.shape == (n, 115)
    assert list(engine.action_space.nvec) == [19] * n
    active = [int(o[ACTIVE].argmax()) for o in obs]
    assert all(o[ACTIVE].sum() == 1 for o in obs) and len(set(active)) == n
    outside = np.ones(115, dtype=bool)
    outside[ACTIVE] = False
    for o in obs[1:]:
        np.testing.assert_array_equal(o[outside], obs[0][outside])
    np.testing.assert_array_equal(state[:115], obs[0])
    assert state.shape == env.state_space.shape
    env.close()


@real
def test_engine_episode_boundary_and_seeding() -> None:
    """Random play ends episodes (goal, ball lost or time limit) and resets; a seed replays an episode."""
    def play(seed: int, steps: int) -> tuple[list[np.ndarray], list[tuple[bool, bool, dict]]]:
        env = _env()
        rng = np.random.default_rng(0)
        states, ends = [env.reset(seed=seed)[1]], []
        for _ in range(steps):
            step = env.step(list(rng.integers(0, 19, env.n_agents)))
            states.append(step.state)
            if step.terminated or step.truncated:
                ends.append((step.terminated, step.truncated, step.info))
                assert step.terminated != step.truncated
                assert set(step.info) == {"score"}
                states.append(env.reset()[1])
        env.close()
        return states, ends

    states, ends = play(5, 150)
    assert ends, "random play in 3 vs 1 loses the ball or scores well within 150 steps"
    replay, replay_ends = play(5, 150)
    assert replay_ends == ends
    for a, b in zip(states, replay):
        np.testing.assert_array_equal(a, b)


@real
def test_engine_pipeline_two_iterations(tmp_path: Path) -> None:
    """The shipped 3 vs 1 pipeline trains two iterations on the real engine and logs eval_score."""
    overrides = ["logging.progress=false", "collector.n_envs=2", "collector.rollout_length=50",
                 "evaluator.episodes=2", "evaluator.n_envs=2"]
    result, rows = train_briefly(ROOT / "pipelines/happo_football_3v1.toml", overrides, tmp_path / "run")
    assert result.counters.env_steps == 2 * 2 * 50
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    assert 0.0 <= float(rows[-1]["eval_score"]) <= 1.0
