"""The "pettingzoo" env kind: any PettingZoo parallel env as a MultiAgentEnv, bad inputs named."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from gymnasium import spaces  # noqa: E402

from harl.config.loading import structure_pipeline  # noqa: E402
from harl.envs.pettingzoo import PettingZooConfig, make_pettingzoo_env  # noqa: E402
from harl.envs.vector import make_vector_env  # noqa: E402
from harl.errors import ConfigError, EnvCrashedError  # noqa: E402
from tests.fakes import pettingzoo_fake  # noqa: E402

FAKE = "tests.fakes.pettingzoo_fake:make"


def _fake(**kwargs: object) -> object:
    return make_pettingzoo_env(PettingZooConfig(factory=FAKE, kwargs=dict(kwargs)))


def _actions(walker: float = 0.25, picker: int = 1) -> list[np.ndarray]:
    return [np.array([walker, 0.0], np.float32), np.array([picker]), np.array([1, 2])]


class TestFakeEnv:
    def test_spaces(self) -> None:
        """Box kept, Dict split into observation + mask, Discrete one-hot; actions as the env has them."""
        env = _fake()
        assert env.n_agents == 3
        assert [s.shape for s in env.observation_spaces] == [(3,), (4,), (5,)]
        assert [type(s).__name__ for s in env.action_spaces] == ["Box", "Discrete", "MultiDiscrete"]
        assert env.state_space.shape == (2,) and env.summary == "state: env.state() (2,)"

    def test_reset_observations_masks_and_state(self) -> None:
        """The picker's action_mask becomes its avail row; the others have none."""
        env = _fake()
        obs, state, avail = env.reset(seed=3)
        offset = float(np.random.default_rng(3).integers(100))
        np.testing.assert_array_equal(obs[0], [offset] * 3)
        np.testing.assert_array_equal(obs[2], [1, 0, 0, 0, 0])  # Discrete(5) observation 0, one-hot
        assert avail[0] is None and avail[2] is None
        np.testing.assert_array_equal(avail[1], [0, 1, 1])  # step 0: action 0 forbidden
        np.testing.assert_array_equal(state, [0, offset])

    def test_actions_converted(self) -> None:
        """Box clipped, Discrete shifted by its start, MultiDiscrete as integers."""
        env = _fake()
        env.reset(seed=0)
        step = env.step([np.array([3.0, -3.0], np.float32), np.array([2]), np.array([1, 2])])
        sent = env._env.received[0]
        np.testing.assert_array_equal(sent["walker"], [1.0, -1.0])
        assert sent["picker"] == 3  # Discrete(3, start=1): harl's action 2 is the env's 3
        np.testing.assert_array_equal(sent["counter"], [1, 2])
        np.testing.assert_array_equal(step.rewards, [1.5, 3.0, 1.0])
        np.testing.assert_array_equal(step.avail[1], [1, 0, 1])

    def test_leaving_agent_is_inactive(self) -> None:
        """counter leaves after step 2: inactive, zero observation and reward, sent no action."""
        env = _fake(leave_at=2, max_steps=4)
        env.reset(seed=0)
        steps = [env.step(_actions()) for _ in range(4)]
        assert [s.active.tolist() for s in steps] == [[True] * 3, [True, True, False], [True, True, False],
                                                      [False] * 3]
        assert [sorted(a) for a in env._env.received] == [sorted(pettingzoo_fake.AGENTS)] * 2 + [
            ["picker", "walker"]] * 2
        assert steps[2].rewards[2] == 0.0 and not steps[2].obs[2].any()
        assert steps[1].obs[2].tolist() == [0, 0, 1, 0, 0]  # its last observation (step 2) is given

    def test_truncated_and_terminated_kept_apart(self) -> None:
        """A time limit truncates (bootstrap); the env's terminations terminate."""
        for end, flags in (("truncate", (False, True)), ("terminate", (True, False))):
            env = _fake(max_steps=3, end=end)
            env.reset(seed=0)
            steps = [env.step(_actions()) for _ in range(3)]
            assert [(s.terminated, s.truncated) for s in steps] == [(False, False)] * 2 + [flags]

    def test_state_from_observations(self) -> None:
        """Without env.state() (or with state = "observations") the observations go side by side."""
        for config in (PettingZooConfig(factory=FAKE, kwargs={"has_state": False}),
                       PettingZooConfig(factory=FAKE, state="observations")):
            env = make_pettingzoo_env(config)
            obs, state, _ = env.reset(seed=0)
            assert env.state_space.shape == (12,)
            np.testing.assert_array_equal(state, np.concatenate(obs))
            assert env.summary.startswith("state: the agents' observations side by side (12,)")

    def test_vector_env_auto_resets_with_active_masks(self) -> None:
        """Through the inline vector env: active per agent, auto-reset, truncation bootstraps."""
        venv = make_vector_env(PettingZooConfig(factory=FAKE, kwargs={"max_steps": 3}), 2, seed=5)
        venv.reset()
        steps = [venv.step([np.zeros((2, 2), np.float32), np.zeros((2, 1)), np.zeros((2, 2))]) for _ in range(3)]
        assert steps[1].active.tolist() == [[True, True, False]] * 2
        assert steps[2].truncated.tolist() == [True, True] and not steps[2].terminated.any()
        # Mean reward per step: (0.5 + 1 + 1) / 3 twice, then (0.5 + 1 + 0) / 3.
        assert [i["return"] for i in steps[2].episode_infos] == pytest.approx([(2.5 * 2 + 1.5) / 3] * 2)
        venv.close()


def _message(env: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        structure_pipeline({"env": {"kind": "pettingzoo", **env}}, "p.toml")
    return str(caught.value)


class TestBadInputs:
    def test_unknown_module(self) -> None:
        """A module that does not exist is named, with its nearest sibling."""
        assert _message({"env": "pettingzoo.sisl.pursuit_v4"}) == (
            'p.toml: env.env: cannot import module "pettingzoo.sisl.pursuit_v4" (No module named '
            "'pettingzoo.sisl.pursuit_v4'); did you mean \"pettingzoo.sisl.pursuit_v5\"?")

    def test_module_that_is_not_pettingzoo(self) -> None:
        """A module without parallel_env / env, and a factory that makes something else."""
        assert _message({"env": "json"}) == (
            'p.toml: env.env: module "json" has neither parallel_env() nor env(), so it is not a PettingZoo '
            'env module (e.g. "pettingzoo.sisl.multiwalker_v9"); for an env made another way, use factory '
            '= "module:callable"')
        assert _message({"factory": "tests.fakes.pettingzoo_fake:not_an_env"}) == (
            'p.toml: env.factory: "tests.fakes.pettingzoo_fake:not_an_env" made dict, which is not a '
            "PettingZoo env (neither a ParallelEnv nor an AECEnv); harl's other env kinds: gym, gymma, python")

    def test_space_harl_cannot_handle(self) -> None:
        """A MultiBinary action space is named with the agent."""
        assert _message({"factory": FAKE, "kwargs": {"action_space": "MultiBinary"}}) == (
            'p.toml: env.factory: "tests.fakes.pettingzoo_fake:make": agent \'walker\' has action space '
            "MultiBinary(2); harl's actors support Box, Discrete and MultiDiscrete")

    def test_turn_based_aec(self) -> None:
        """Tic-tac-toe (one agent moves at a time) is refused with the reason."""
        message = _message({"env": "pettingzoo.classic.tictactoe_v3"})
        assert message == (
            'p.toml: env.env: "pettingzoo.classic.tictactoe_v3.env" is a turn-based AEC env (its metadata has '
            "no is_parallelizable: one agent acts at a time, as in board and card games), and harl's "
            "collectors step all agents at once; only AEC envs whose agents can act simultaneously are "
            "converted (pettingzoo.utils.aec_to_parallel)")
        assert "turn-based" in _message({"factory": "tests.fakes.pettingzoo_fake:turn_based"})

    def test_env_and_factory_exclusive_and_state_needs_env_state(self) -> None:
        """Exactly one of env / factory; state = "env" needs an env with a state."""
        assert _message({}).startswith("p.toml: env.env: name the env module")
        assert _message({"factory": FAKE, "state": "env", "kwargs": {"has_state": False}}) == (
            'p.toml: env.state: "tests.fakes.pettingzoo_fake:make" has no state_space / state(); use state = '
            "\"observations\" (the agents' observations side by side)")

    @pytest.mark.extra("pettingzoo")  # supersuit's wrappers
    def test_bad_wrapper(self) -> None:
        """A wrapper path that does not resolve names its entry."""
        message = _message({"factory": FAKE, "wrappers": [{"wrapper": "supersuit:no_such_v0"}]})
        assert message.startswith('p.toml: env.wrappers[0].wrapper: module "supersuit" has no attribute')


@pytest.mark.extra("pettingzoo")  # Box2D (pettingzoo[sisl])
class TestSisl:
    def test_multiwalker_matches_pettingzoo_and_walkers_fall(self) -> None:
        """Continuous actions; the same seed and actions give PettingZoo's own observations; a fall terminates."""
        from pettingzoo.sisl import multiwalker_v9

        env = make_pettingzoo_env(PettingZooConfig(env="pettingzoo.sisl.multiwalker_v9"))
        reference = multiwalker_v9.parallel_env()
        assert env.n_agents == 3 and env.action_spaces[0] == spaces.Box(-1, 1, (4,), np.float32)
        obs, state, avail = env.reset(seed=2)
        ref_obs, _ = reference.reset(seed=2)
        np.testing.assert_array_equal(obs[1], ref_obs["walker_1"])
        np.testing.assert_array_equal(state, reference.state())
        assert avail is None
        push = np.array([1.0, -1.0, 1.0, -1.0], np.float32)  # legs thrashing: the walkers fall
        length = 0
        while length < 500:
            step = env.step([push] * 3)
            length += 1
            ref = reference.step({name: push for name in reference.agents})
            np.testing.assert_allclose(step.rewards, [ref[1][f"walker_{i}"] for i in range(3)], rtol=1e-6)
            if step.terminated or step.truncated:
                break
        assert step.terminated and not step.truncated and length < 500 and not step.active.any()
        assert step.rewards.max() <= -100.0 + 10  # the fall penalty

    def test_parallelizable_aec_env_is_converted(self) -> None:
        """A factory returning multiwalker's AEC env gets PettingZoo's aec_to_parallel."""
        env = make_pettingzoo_env(PettingZooConfig(factory="pettingzoo.sisl.multiwalker_v9:env"))
        assert type(env._env).__name__ == "aec_to_parallel_wrapper" and env.n_agents == 3
        obs, _, _ = env.reset(seed=0)
        assert env.step([np.zeros(4, np.float32)] * 3).obs[0].shape == obs[0].shape == (31,)

    def test_pursuit_eight_agents_flattened(self) -> None:
        """8 pursuers with Discrete(5) actions; images flattened on request, the state too."""
        config = PettingZooConfig(env="pettingzoo.sisl.pursuit_v5", kwargs={"max_cycles": 5}, flatten=True)
        env = make_pettingzoo_env(config)
        assert env.n_agents == 8 and env.action_spaces == [spaces.Discrete(5)] * 8
        assert env.observation_spaces[0].shape == (147,) and env.state_space.shape == (768,)
        env.reset(seed=0)
        steps = [env.step([np.array([k % 5]) for k in range(8)]) for _ in range(5)]
        assert steps[-1].truncated and not steps[-1].terminated
        assert steps[0].obs[0].shape == (147,) and steps[0].state.shape == (768,)


def test_image_env_through_a_resize_wrapper() -> None:
    """cooperative_pong's 280x480 frames, resized by supersuit: uint8 images, state stacked as channels.

    It draws its screen only with a render mode (black observations without one)."""
    pytest.importorskip("supersuit")
    config = PettingZooConfig(
        env="pettingzoo.butterfly.cooperative_pong_v6", kwargs={"max_cycles": 10, "render_mode": "rgb_array"},
        state="observations",
        wrappers=[{"wrapper": "supersuit:resize_v1", "kwargs": {"x_size": 16, "y_size": 12}}])
    env = make_pettingzoo_env(config)
    assert env.observation_spaces[0] == spaces.Box(0, 255, (12, 16, 3), np.uint8)
    assert env.state_space.shape == (12, 16, 6) and env.state_space.dtype == np.uint8
    obs, state, _ = env.reset(seed=0)
    import supersuit
    from pettingzoo.butterfly import cooperative_pong_v6

    reference = supersuit.resize_v1(cooperative_pong_v6.parallel_env(max_cycles=10, render_mode="rgb_array"),
                                    x_size=16, y_size=12)
    ref_obs, _ = reference.reset(seed=0)
    assert obs[0].dtype == np.uint8 and obs[0].max() > 0
    np.testing.assert_array_equal(obs[0], ref_obs["paddle_0"])
    np.testing.assert_array_equal(state[..., 3:], obs[1])
    for _ in range(10):
        step = env.step([np.array([1]), np.array([2])])
        if step.terminated or step.truncated:
            break
    assert step.terminated or step.truncated


def test_magent2_many_agents() -> None:
    """magent2's battle on a 12x12 map: two teams of 2, agents that die become inactive."""
    pytest.importorskip("magent2")
    env = make_pettingzoo_env(PettingZooConfig(env="magent2.environments.battle_v4",
                                               kwargs={"map_size": 12, "max_cycles": 20}))
    assert env.n_agents == 4 and env.observation_spaces[0].shape == (13, 13, 5)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(20):
        step = env.step([np.array([rng.integers(21)]) for _ in range(4)])
        if step.terminated or step.truncated:
            break
    assert step.truncated or step.terminated


def test_state_failure_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """An env.state() that raises mid-episode says to use the observations instead."""
    env = _fake()
    env.reset(seed=0)
    monkeypatch.setattr(env._env, "state", lambda: 1 / 0)
    with pytest.raises(EnvCrashedError, match='set \\[env\\] state = "observations"'):
        env.step(_actions())


@pytest.mark.extra("pettingzoo")
def test_harl_check_names_the_state_source(capsys: pytest.CaptureFixture[str]) -> None:
    """harl check's env row says where the global state comes from."""
    from harl.cli import main

    pipeline = "pipelines/happo_pettingzoo_multiwalker.toml"
    small = ["--set", "collector.n_envs=2", "--set", "collector.backend=inline", "--set", "evaluator.n_envs=1"]
    assert main(["check", pipeline, *small]) == 0
    assert "3 agents, 2 envs, state: env.state() (75,)" in capsys.readouterr().out
