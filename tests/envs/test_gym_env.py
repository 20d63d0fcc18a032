"""The "gym" env kind: a registered single-agent gymnasium env as a team of one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from harl.envs.actions import env_action
from harl.envs.gym_env import GymConfig, make_gym_env
from harl.envs.vector import make_vector_env
from harl.errors import ConfigError


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1", "FrozenLake-v1"])
def test_spaces_and_trajectory_match_gymnasium(env_id: str) -> None:
    """One agent whose observation and state are gymnasium's observation (flattened, float32)."""
    env = make_gym_env(GymConfig(id=env_id))
    reference = gymnasium.make(env_id)
    assert env.n_agents == 1 and env.action_spaces == [reference.action_space]
    size = gymnasium.spaces.flatdim(reference.observation_space)
    assert env.observation_spaces[0].shape == env.state_space.shape == (size,)
    obs, state, avail = env.reset(seed=3)
    ref_obs, _ = reference.reset(seed=3)
    flat = lambda o: gymnasium.spaces.flatten(reference.observation_space, o).astype(np.float32)  # noqa: E731
    np.testing.assert_array_equal(obs[0], flat(ref_obs))
    np.testing.assert_array_equal(state, obs[0])
    assert avail is None and obs[0].dtype == np.float32
    rng = np.random.default_rng(0)
    for _ in range(30):
        space = env.action_spaces[0]
        action = (rng.uniform(space.low, space.high).astype(np.float32) if hasattr(space, "low")
                  else np.array([rng.integers(space.n)]))
        step = env.step([action])
        ref_action = action if hasattr(space, "low") else int(action[0])
        ref_obs, ref_reward, ref_term, ref_trunc, _ = reference.step(ref_action)
        np.testing.assert_array_equal(step.obs[0], flat(ref_obs))
        assert step.rewards.tolist() == [np.float32(ref_reward)]
        assert (step.terminated, step.truncated) == (ref_term, ref_trunc and not ref_term)
        if step.terminated or step.truncated:
            env.reset()
            reference.reset()


def test_terminated_and_truncated_kept_apart() -> None:
    """CartPole falls over (terminated); Pendulum hits its time limit (truncated)."""
    cartpole = make_gym_env(GymConfig(id="CartPole-v1"))
    cartpole.reset(seed=0)
    steps = []
    while len(steps) < 100 and not (steps and (steps[-1].terminated or steps[-1].truncated)):
        steps.append(cartpole.step([np.array([0.0])]))
    assert steps[-1].terminated and not steps[-1].truncated and len(steps) < 100
    pendulum = make_gym_env(GymConfig(id="Pendulum-v1", max_episode_steps=3))
    pendulum.reset(seed=0)
    flags = [pendulum.step([np.zeros(1, np.float32)]) for _ in range(3)]
    assert [(s.terminated, s.truncated) for s in flags] == [(False, False), (False, False), (False, True)]


def test_vector_env_auto_resets_across_the_boundary() -> None:
    """In a vector env, the truncated episode is reported once with its length and return."""
    venv = make_vector_env(GymConfig(id="Pendulum-v1", max_episode_steps=4), n_envs=2, seed=0)
    venv.reset()
    steps = [venv.step([np.zeros((2, 1), np.float32)]) for _ in range(4)]
    assert steps[-1].truncated.all() and not any(s.terminated.any() for s in steps)
    assert [info["length"] for info in steps[-1].episode_infos] == [4, 4]
    returns = sum(s.rewards[:, 0].astype(np.float64) for s in steps)
    np.testing.assert_allclose([info["return"] for info in steps[-1].episode_infos], returns, rtol=1e-6)


def test_box_actions_are_clipped_and_discrete_start_honoured() -> None:
    """Gaussian samples outside the Box act as its bound; Discrete(n, start) actions are shifted."""
    a, b = make_gym_env(GymConfig(id="Pendulum-v1")), make_gym_env(GymConfig(id="Pendulum-v1"))
    a.reset(seed=1)
    b.reset(seed=1)
    assert a.step([np.array([7.0], np.float32)]).rewards == b.step([np.array([2.0], np.float32)]).rewards
    assert env_action(gymnasium.spaces.Discrete(3, start=5), np.array([1.0])) == 6


def test_kwargs_reach_gymnasium_make() -> None:
    """[env.kwargs] are passed to gymnasium.make (here Pendulum's gravity)."""
    env = make_gym_env(GymConfig(id="Pendulum-v1", kwargs={"g": 0.0}))
    assert env._env.unwrapped.g == 0.0


def test_unknown_id() -> None:
    """An id gymnasium does not know is a ConfigError naming env.id, with gymnasium's suggestion."""
    with pytest.raises(ConfigError, match=r"env.id: Environment `Pendulumm` doesn't exist. Did you mean: `Pendulum`\?"):
        make_gym_env(GymConfig(id="Pendulumm-v1"))


def test_mujoco_id_without_mujoco() -> None:
    """HalfCheetah-v5 without mujoco names the harl extra to install."""
    code = ("import sys; sys.modules['mujoco'] = None\n"
            "from harl.envs.gym_env import GymConfig, make_gym_env\n"
            "try:\n    make_gym_env(GymConfig(id='HalfCheetah-v5'))\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         cwd=Path(__file__).parents[2]).stdout.strip()
    assert out == ('MissingExtraError env kind "gym" (id "HalfCheetah-v5") needs: pip install '
                   '"harl[mujoco]" (the optional package "mujoco" is not installed)')


def test_halfcheetah_v5() -> None:
    """A MuJoCo robot through the gym kind: 17 observations, 6 Box actions, a team of one."""
    pytest.importorskip("mujoco", reason='HalfCheetah-v5 needs harl[mujoco]')
    env = make_gym_env(GymConfig(id="HalfCheetah-v5", max_episode_steps=2))
    assert env.observation_spaces[0].shape == (17,) and env.action_spaces[0].shape == (6,)
    env.reset(seed=0)
    steps = [env.step([np.zeros(6, np.float32)]) for _ in range(2)]
    assert [s.truncated for s in steps] == [False, True]


def test_rng_state_replays_an_unseeded_reset() -> None:
    """get_rng_state / set_rng_state let a resumed run begin an episode as it began."""
    env = make_gym_env(GymConfig(id="Pendulum-v1"))
    env.reset(seed=4)
    saved = env.get_rng_state()
    first, _, _ = env.reset()
    env.set_rng_state(saved)
    again, _, _ = env.reset()
    np.testing.assert_array_equal(first[0], again[0])
