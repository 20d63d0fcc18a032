"""MaMuJoCoEnv steps the robot directly; these tests pin it to gymnasium-robotics' parallel_env."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harl.envs.mamujoco import PARTITIONS, MaMuJoCoConfig, make_mamujoco_env, make_parallel_env
from harl.errors import MissingExtraError
from harl.settings import InvalidSetting

pytest.importorskip("gymnasium_robotics", reason='MaMuJoCo tests need harl[mamujoco]')
pytest.importorskip("mujoco", reason='MaMuJoCo tests need harl[mamujoco]')

CASES = [(scenario, conf) for scenario, confs in PARTITIONS.items() for conf in confs if conf != "NxK"]
CASES += [("ManySegmentSwimmer", "10x2"), ("ManySegmentAnt", "2x1")]
CASES = [(scenario, conf, 1) for scenario, conf in CASES]
CASES += [("HalfCheetah", "2x3", 0), ("Ant", "4x2", 0), ("Walker2d", "2x3", 2), ("Humanoid", "17x1", 0)]


def _config(scenario: str, conf: str, obsk: int = 1, **kwargs) -> MaMuJoCoConfig:
    return MaMuJoCoConfig(scenario=scenario, agent_conf=conf, agent_obsk=obsk, **kwargs)


@pytest.mark.parametrize(("scenario", "conf", "obsk"), CASES)
def test_spaces_and_trajectory_match_parallel_env(scenario: str, conf: str, obsk: int) -> None:
    """Spaces equal parallel_env's; same seed and actions give equal obs, state, rewards and ends."""
    config = _config(scenario, conf, obsk)
    env, reference = make_mamujoco_env(config), make_parallel_env(config)
    agents = reference.possible_agents
    assert env.n_agents == len(agents)
    assert [s.shape for s in env.observation_spaces] == [reference.observation_space(a).shape for a in agents]
    assert env.action_spaces == [reference.action_space(a) for a in agents]
    assert env.state_space.shape == reference.state().shape
    assert all(s.dtype == np.float32 for s in env.observation_spaces)

    rng = np.random.default_rng(0)
    obs, state, avail = env.reset(seed=5)
    ref_obs, _ = reference.reset(seed=5)
    ended = 0
    for _ in range(40):
        for i, agent in enumerate(agents):
            np.testing.assert_allclose(obs[i], ref_obs[agent].astype(np.float32), rtol=1e-6)
            assert obs[i].dtype == np.float32
        np.testing.assert_allclose(state, reference.state().astype(np.float32), rtol=1e-6)
        assert avail is None
        actions = [rng.uniform(s.low, s.high).astype(np.float32) for s in env.action_spaces]
        step = env.step(actions)
        ref_obs, ref_rewards, ref_term, ref_trunc, _ = reference.step(dict(zip(agents, actions)))
        obs, state, avail = step.obs, step.state, step.avail
        np.testing.assert_allclose(step.rewards, [ref_rewards[a] for a in agents], rtol=1e-5, atol=1e-6)
        assert step.terminated == ref_term[agents[0]]
        assert not step.truncated
        if step.terminated:
            ended += 1
            obs, state, avail = env.reset()
            ref_obs, _ = reference.reset()


def test_partition_sizes_differ_without_padding() -> None:
    """Hopper 3x1 and Humanoid 17x1 observation sizes follow the joint graph (agent_obsk = 1)."""
    hopper = make_mamujoco_env(_config("Hopper", "3x1"))
    assert [s.shape[0] for s in hopper.observation_spaces] == [8, 9, 8]
    humanoid = make_mamujoco_env(_config("Humanoid", "17x1"))
    sizes = [s.shape[0] for s in humanoid.observation_spaces]
    assert humanoid.n_agents == 17 and min(sizes) == 38 and max(sizes) == 92
    obs, _, _ = humanoid.reset(seed=0)
    assert [o.shape[0] for o in obs] == sizes


@pytest.mark.parametrize(("scenario", "conf", "n_agents"),
                         [("Walker2d", "6x1", 6), ("Humanoid", "17x1", 17), ("Ant", "8x1", 8),
                          ("HalfCheetah", "3x2", 3)])
def test_custom_factorisations_cover_each_actuator_once(scenario: str, conf: str, n_agents: int) -> None:
    """The partitions built here give every actuator to exactly one agent."""
    env = make_mamujoco_env(_config(scenario, conf))
    assert env.n_agents == n_agents
    assert sorted(env._act_ids.tolist()) == list(range(env._mujoco.action_space.shape[0]))
    assert sum(s.shape[0] for s in env.action_spaces) == env._mujoco.action_space.shape[0]


def test_truncation_and_termination_kept_apart() -> None:
    """HalfCheetah never terminates and is truncated at max_episode_steps; Hopper falls and terminates."""
    cheetah = make_mamujoco_env(_config("HalfCheetah", "2x3", max_episode_steps=5))
    cheetah.reset(seed=0)
    zero = [np.zeros(3, np.float32)] * 2
    flags = [cheetah.step(zero) for _ in range(5)]
    assert [(s.terminated, s.truncated) for s in flags] == [(False, False)] * 4 + [(False, True)]
    assert set(flags[-1].info) == {"x_velocity"} and flags[0].info == {}

    hopper = make_mamujoco_env(_config("Hopper", "3x1"))
    hopper.reset(seed=0)
    push = [np.ones(1, np.float32)] * 3
    steps = []
    while len(steps) < 1000 and not (steps and (steps[-1].terminated or steps[-1].truncated)):
        steps.append(hopper.step(push))
    assert steps[-1].terminated and not steps[-1].truncated and len(steps) < 1000
    assert isinstance(steps[-1].info["x_velocity"], float)


def test_actions_outside_the_box_are_clipped() -> None:
    """An action of 5 acts (and costs) like 1: clipped before the robot sees it."""
    a, b = (make_mamujoco_env(_config("HalfCheetah", "2x3")) for _ in range(2))
    a.reset(seed=1)
    b.reset(seed=1)
    big = a.step([np.full(3, 5.0, np.float32)] * 2)
    one = b.step([np.ones(3, np.float32)] * 2)
    np.testing.assert_array_equal(big.rewards, one.rewards)
    np.testing.assert_array_equal(big.state, one.state)


def test_config_validation() -> None:
    """Partitions are checked against the robot; the message lists the valid ones."""
    with pytest.raises(InvalidSetting, match='expected one of: 3x1 for Hopper; got "2x3"'):
        MaMuJoCoConfig(scenario="Hopper", agent_conf="2x3")
    with pytest.raises(InvalidSetting, match="NxK"):
        MaMuJoCoConfig(scenario="ManySegmentSwimmer", agent_conf="10")
    with pytest.raises(InvalidSetting, match="scenario"):
        MaMuJoCoConfig(scenario="Cheetah")


def test_missing_extra_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without gymnasium-robotics, building the env names the extra to install."""
    for name in [m for m in sys.modules if m.startswith("gymnasium_robotics")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "gymnasium_robotics", None)
    with pytest.raises(MissingExtraError) as caught:
        make_mamujoco_env(MaMuJoCoConfig())
    assert str(caught.value) == (
        'env kind "mamujoco" needs: pip install "harl[mamujoco]" '
        '(the optional package "gymnasium-robotics" is not installed)'
    )


def test_module_imports_without_the_extra() -> None:
    """harl.envs.mamujoco (and the registry) import without gymnasium-robotics or mujoco."""
    code = ("import sys; sys.modules['gymnasium_robotics'] = None; sys.modules['mujoco'] = None; "
            "import harl.envs.mamujoco, harl.envs.registry")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_rng_state_replays_an_unseeded_reset() -> None:
    """get_rng_state / set_rng_state let a resumed run begin an episode as it began."""
    env = make_mamujoco_env(_config("Hopper", "3x1"))
    env.reset(seed=4)
    saved = env.get_rng_state()
    _, first, _ = env.reset()
    env.set_rng_state(saved)
    _, again, _ = env.reset()
    np.testing.assert_array_equal(first, again)


def test_missing_mujoco_message() -> None:
    """Without mujoco (gymnasium-robotics present), the message names mujoco."""
    code = ("import sys; sys.modules['mujoco'] = None\n"
            "from harl.envs.mamujoco import MaMuJoCoConfig, make_mamujoco_env\n"
            "try:\n    make_mamujoco_env(MaMuJoCoConfig())\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         cwd=Path(__file__).parents[2]).stdout.strip()
    assert out == ('MissingExtraError env kind "mamujoco" needs: pip install "harl[mamujoco]" '
                   '(the optional package "mujoco" is not installed)')


def test_cli_reports_the_missing_extra() -> None:
    """harl check on a MaMuJoCo pipeline without the extra: one line, exit status 2, no traceback."""
    code = ("import sys; sys.modules['gymnasium_robotics'] = None\n"
            "from harl.cli import main\n"
            "sys.exit(main(['check', 'pipelines/happo_mamujoco_halfcheetah_2x3.toml']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).parents[2])
    assert done.returncode == 2
    assert done.stdout + done.stderr == (
        'harl: env kind "mamujoco" needs: pip install "harl[mamujoco]" (the optional package '
        '"gymnasium-robotics" is not installed)\n'
    )


def test_harls_observation_and_unclipped_actions() -> None:
    """observation = "harl": every agent sees the whole robot plus its one-hot id, each vector
    standardised on its own (HARL's get_obs/get_state); clip_actions = false hands MuJoCo the
    sample, whose control cost HARL charges unclipped."""
    import numpy as np

    from harl.envs.mamujoco import MaMuJoCoConfig, make_mamujoco_env

    env = make_mamujoco_env(MaMuJoCoConfig(scenario="HalfCheetah", agent_conf="2x3", observation="harl",
                                           clip_actions=False))
    local = make_mamujoco_env(MaMuJoCoConfig(scenario="HalfCheetah", agent_conf="2x3"))
    try:
        obs, state, _ = env.reset(seed=3)
        raw = env._mujoco._get_obs()
        assert [o.shape for o in obs] == [(19,), (19,)] and env.observation_spaces[0].shape == (19,)
        for i, o in enumerate(obs):
            x = np.concatenate([raw, np.eye(2)[i]])
            np.testing.assert_allclose(o, (x - x.mean()) / x.std(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(state, (raw - raw.mean()) / raw.std(), rtol=1e-5, atol=1e-6)
        local.reset(seed=3)
        big = [np.full(3, 3.0), np.full(3, -3.0)]
        unclipped, clipped = env.step(big), local.step(big)
        # the same torques (MuJoCo clamps), a control cost of 0.1 * sum(a^2): 5.4 against 0.6
        assert unclipped.rewards[0] == pytest.approx(clipped.rewards[0] - 4.8, abs=1e-4)
    finally:
        env.close()
        local.close()
