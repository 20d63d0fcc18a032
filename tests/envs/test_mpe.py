"""MPEEnv drives mpe2's internals; these tests pin it to mpe2's public parallel API."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from harl.envs.mpe import MPEConfig, make_mpe_env
from harl.errors import MissingExtraError
from harl.settings import InvalidSetting

pytest.importorskip("mpe2")

SCENARIOS = ("simple_spread", "simple_reference", "simple_speaker_listener",
             "simple_tag", "simple_adversary", "simple_push", "simple_world_comm")
CASES = [(scenario, continuous) for scenario in SCENARIOS for continuous in (True, False)]


def _parallel_env(config: MPEConfig):
    from pettingzoo.utils.env_logger import EnvLogger

    EnvLogger.suppress_output()  # out-of-bounds actions are clipped on purpose below
    module = importlib.import_module(
        {
            "simple_spread": "mpe2.simple_spread_v3",
            "simple_reference": "mpe2.simple_reference_v3",
            "simple_speaker_listener": "mpe2.simple_speaker_listener_v4",
            "simple_tag": "mpe2.simple_tag_v3",
            "simple_adversary": "mpe2.simple_adversary_v3",
            "simple_push": "mpe2.simple_push_v3",
            "simple_world_comm": "mpe2.simple_world_comm_v3",
        }[config.scenario]
    )
    kwargs = {"max_cycles": config.max_episode_steps, "continuous_actions": config.continuous_actions}
    if config.scenario in ("simple_spread", "simple_reference"):
        kwargs["local_ratio"] = config.local_ratio
    if config.scenario == "simple_spread":
        kwargs["N"] = config.n_agents
    return module.parallel_env(**kwargs)


def _random_actions(env, rng: np.random.Generator) -> list[np.ndarray]:
    """Continuous actions partly out of [0, 1] (to exercise clipping); discrete as (1,) ints."""
    actions = []
    for space in env.action_spaces:
        if hasattr(space, "n"):
            actions.append(rng.integers(space.n, size=1))
        else:
            actions.append(rng.uniform(-0.5, 1.5, size=space.shape).astype(np.float32))
    return actions


@pytest.mark.parametrize(("scenario", "continuous"), CASES)
def test_spaces_match_parallel_env(scenario: str, continuous: bool) -> None:
    """Per-agent observation/action spaces and the state space equal mpe2's parallel_env's."""
    config = MPEConfig(scenario=scenario, continuous_actions=continuous, local_ratio=0.3)
    env, reference = make_mpe_env(config), _parallel_env(config)
    agents = reference.possible_agents
    assert env.n_agents == len(agents)
    assert env.observation_spaces == [reference.observation_space(a) for a in agents]
    assert env.action_spaces == [reference.action_space(a) for a in agents]
    assert env.state_space == reference.state_space


@pytest.mark.parametrize(("scenario", "continuous"), CASES)
def test_trajectory_matches_parallel_env(scenario: str, continuous: bool) -> None:
    """Same seed and actions over 30 steps (crossing a reset) give equal obs, rewards and state."""
    config = MPEConfig(scenario=scenario, continuous_actions=continuous, local_ratio=0.3,
                       team_reward=False)
    env, reference = make_mpe_env(config), _parallel_env(config)
    agents = reference.possible_agents
    rng = np.random.default_rng(0)

    obs, state, avail = env.reset(seed=11)
    ref_obs, _ = reference.reset(seed=11)
    for t in range(1, 31):
        for i, agent in enumerate(agents):
            np.testing.assert_array_equal(obs[i], ref_obs[agent])
            assert obs[i].dtype == np.float32
        np.testing.assert_array_equal(state, reference.state())
        if continuous:
            assert avail is None
        else:
            assert [a.tolist() for a in avail] == [[1.0] * s.n for s in env.action_spaces]

        actions = _random_actions(env, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref_actions = {a: (x.item() if x.shape == (1,) else x) for a, x in zip(agents, actions)}
            ref_obs, ref_rewards, ref_term, ref_trunc, _ = reference.step(ref_actions)
        step = env.step(actions)
        obs, state, avail = step.obs, step.state, step.avail

        assert step.rewards.dtype == np.float32 and step.rewards.shape == (len(agents),)
        np.testing.assert_array_equal(
            step.rewards, np.array([ref_rewards[a] for a in agents], dtype=np.float32)
        )
        assert step.truncated == (t == 25) == all(ref_trunc.values())
        assert not step.terminated and not any(ref_term.values())
        assert step.active is None
        if step.truncated:
            obs, state, avail = env.reset()
            ref_obs, _ = reference.reset()


def test_team_reward_gives_every_agent_the_sum() -> None:
    """With team_reward (the default, HARL's convention) each agent gets the sum of mpe2's rewards."""
    own = make_mpe_env(MPEConfig(team_reward=False))
    team = make_mpe_env(MPEConfig())
    own.reset(seed=3)
    team.reset(seed=3)
    actions = [np.full(5, 0.7, np.float32)] * 3
    individual = own.step(actions).rewards
    np.testing.assert_allclose(team.step(actions).rewards, np.full(3, individual.sum()), rtol=1e-6)


def test_truncates_at_max_episode_steps() -> None:
    """The episode is truncated (not terminated) exactly at ``max_episode_steps``."""
    env = make_mpe_env(MPEConfig(max_episode_steps=4, continuous_actions=False))
    env.reset(seed=0)
    flags = [env.step([np.array([0])] * env.n_agents) for _ in range(4)]
    assert [(s.terminated, s.truncated) for s in flags] == [(False, False)] * 3 + [(False, True)]


def test_discrete_action_out_of_range_is_rejected() -> None:
    """A discrete action outside the space raises instead of silently wrapping around."""
    env = make_mpe_env(MPEConfig(continuous_actions=False))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="outside Discrete"):
        env.step([np.array([5])] * env.n_agents)


def test_render_rgb_array() -> None:
    """With render_mode="rgb_array", render() returns an RGB frame; without it, it refuses."""
    env = make_mpe_env(MPEConfig(), render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.ndim == 3 and frame.shape[2] == 3 and frame.dtype == np.uint8
    env.close()
    with pytest.raises(RuntimeError, match="render_mode"):
        make_mpe_env(MPEConfig()).render()


def test_config_validation() -> None:
    """Out-of-range settings are rejected with the field name."""
    with pytest.raises(InvalidSetting, match="scenario"):
        MPEConfig(scenario="simple_tagg")
    with pytest.raises(InvalidSetting, match="num_good"):
        MPEConfig(scenario="simple_tag", num_good=-2)
    with pytest.raises(InvalidSetting, match="local_ratio"):
        MPEConfig(local_ratio=1.5)
    with pytest.raises(InvalidSetting, match="max_episode_steps"):
        MPEConfig(max_episode_steps=0)


def test_missing_mpe2_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without mpe2, building the env names the extra to install."""
    for name in [m for m in sys.modules if m == "mpe2" or m.startswith("mpe2.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "mpe2", None)
    with pytest.raises(MissingExtraError) as caught:
        make_mpe_env(MPEConfig())
    assert str(caught.value) == (
        'env kind "mpe" needs: pip install "harl[mpe]" '
        '(the optional package "mpe2" is not installed)'
    )


def test_modules_import_without_mpe2() -> None:
    """harl.envs.mpe, registry and vector import without mpe2 (it is loaded lazily)."""
    code = (
        "import sys; sys.modules['mpe2'] = None; "
        "import harl.envs.mpe, harl.envs.registry, harl.envs.vector; "
        "assert 'pygame' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_a_discrete_action_given_as_a_whole_float_is_taken() -> None:
    """An off-policy buffer stores categories as floats: 2.0 is category 2 (speaker_listener's
    speaker indexes its communication channel with it); 2.5 is refused."""
    import numpy as np
    import pytest

    from harl.envs.mpe import MPEConfig, make_mpe_env

    env = make_mpe_env(MPEConfig(scenario="simple_speaker_listener", continuous_actions=False))
    env.reset(seed=1)
    env.step([np.array([2.0], np.float32), np.array([4.0], np.float32)])
    with pytest.raises(ValueError, match="outside Discrete"):
        env.step([np.array([2.5], np.float32), np.array([1.0], np.float32)])
    env.close()
