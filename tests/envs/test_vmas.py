"""VMASVectorEnv: one VMAS batch as a VectorEnv, pinned to VMAS's own API."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harl.envs.registry import make_env
from harl.envs.vector import make_vector_env
from harl.envs.vmas_env import SCENARIOS, VMASConfig, VMASVectorEnv
from harl.errors import ConfigError, MissingExtraError

vmas = pytest.importorskip("vmas", reason="VMAS tests need harl[vmas]")
torch = pytest.importorskip("torch")


def _reference(config: VMASConfig, n_envs: int, seed: int):
    return vmas.make_env(config.scenario, num_envs=n_envs, device="cpu", max_steps=config.max_steps,
                         continuous_actions=config.continuous_actions, seed=seed, clamp_actions=True,
                         terminated_truncated=True, **config.kwargs)


def _actions(venv: VMASVectorEnv, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for space in venv.action_spaces:
        if hasattr(space, "n"):
            out.append(rng.integers(space.n, size=(venv.n_envs, 1)).astype(np.float32))
        else:
            out.append(rng.uniform(space.low, space.high, (venv.n_envs, *space.shape)).astype(np.float32))
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_spaces_match_vmas(scenario: str) -> None:
    """Per-agent spaces equal VMAS's (as gymnasium spaces); the state concatenates the observations."""
    config = VMASConfig(scenario=scenario)
    venv = make_vector_env(config, n_envs=4, seed=0)
    reference = _reference(config, 4, 0)
    assert isinstance(venv, VMASVectorEnv) and venv.n_envs == 4
    assert venv.n_agents == reference.n_agents
    for ours, theirs in zip(venv.observation_spaces, reference.observation_space.spaces):
        assert ours.shape == theirs.shape and ours.dtype == np.float32
    for ours, theirs in zip(venv.action_spaces, reference.action_space.spaces):
        np.testing.assert_array_equal(ours.low, theirs.low)
        np.testing.assert_array_equal(ours.high, theirs.high)
    assert venv.state_space.shape == (sum(s.shape[0] for s in venv.observation_spaces),)


@pytest.mark.parametrize(("scenario", "continuous"), [(s, True) for s in SCENARIOS] + [("balance", False)])
def test_trajectory_matches_vmas_across_truncation(scenario: str, continuous: bool) -> None:
    """Same seed and actions give VMAS's observations and rewards, through a synchronous time limit."""
    config = VMASConfig(scenario=scenario, continuous_actions=continuous, max_steps=4)
    rng = np.random.default_rng(0)
    venv = make_vector_env(config, n_envs=3, seed=7)
    actions = [_actions(venv, rng) for _ in range(6)]
    obs, state, avail = venv.reset()
    ours = [(obs, state)]
    steps = [venv.step(a) for a in actions]

    reference = _reference(config, 3, 7)
    ref_obs = reference.reset(seed=7)  # as the vector env's first reset
    np.testing.assert_array_equal(obs[0], ref_obs[0].numpy())
    np.testing.assert_array_equal(ours[0][1], torch.cat(ref_obs, 1).numpy())
    assert avail is None
    for t, (a, step) in enumerate(zip(actions, steps), start=1):
        batch = [torch.as_tensor(x).long() if not continuous else torch.as_tensor(x) for x in a]
        ref_obs, ref_rew, ref_term, ref_trunc, _ = reference.step(batch)
        np.testing.assert_array_equal(step.final_state, torch.cat(ref_obs, 1).numpy())
        np.testing.assert_array_equal(step.rewards, torch.stack(ref_rew, 1).numpy())
        assert step.truncated.tolist() == [t == 4] * 3
        assert not step.terminated.any() or scenario == "balance"
        if t == 4:
            assert [info["length"] for info in step.episode_infos] == [4, 4, 4]
            ref_obs = reference.reset()
        for i in range(venv.n_agents):
            np.testing.assert_array_equal(step.obs[i], ref_obs[i].numpy())
            assert step.obs[i].dtype == np.float32
        np.testing.assert_array_equal(step.state, torch.cat(ref_obs, 1).numpy())


def test_terminated_env_resets_alone() -> None:
    """A balance env whose package falls is terminated (not truncated) and reset by itself."""
    venv = make_vector_env(VMASConfig(scenario="balance", max_steps=100), n_envs=16, seed=0)
    venv.reset()
    rng = np.random.default_rng(0)
    steps = []
    while len(steps) < 99 and not (steps and steps[-1].terminated.any()):
        steps.append(venv.step(_actions(venv, rng)))
    step, t = steps[-1], len(steps)
    assert step.terminated.any() and not step.truncated.any() and t < 99
    ended = np.flatnonzero(step.terminated)
    assert [info["length"] for info in step.episode_infos] == [t] * len(ended)
    assert not np.array_equal(step.final_state[ended], step.state[ended])
    kept = np.flatnonzero(~step.terminated)
    np.testing.assert_array_equal(step.final_state[kept], step.state[kept])
    for i in range(venv.n_agents):
        np.testing.assert_array_equal(step.final_obs[i][kept], step.obs[i][kept])
    assert step.active.shape == (16, venv.n_agents) and step.active.all()


def test_returns_are_mean_agent_rewards() -> None:
    """An episode's return is the sum over its steps of the agents' mean reward."""
    venv = make_vector_env(VMASConfig(scenario="navigation", max_steps=3), n_envs=2, seed=1)
    venv.reset()
    rng = np.random.default_rng(1)
    total = np.zeros(2)
    for _ in range(3):
        step = venv.step(_actions(venv, rng))
        total += step.rewards.mean(axis=1)
    np.testing.assert_allclose([info["return"] for info in step.episode_infos], total, rtol=1e-5)


def test_one_simulator_whatever_the_backend() -> None:
    """make_vector_env builds VMAS natively even when asked for worker processes; make_env refuses."""
    venv = make_vector_env(VMASConfig(), n_envs=5, backend="subprocess", workers=2)
    assert isinstance(venv, VMASVectorEnv) and venv.n_envs == 5
    with pytest.raises(TypeError, match='"vmas" is vectorised natively'):
        make_env(VMASConfig())


def test_unknown_scenario() -> None:
    """A scenario VMAS does not have is a ConfigError naming env.scenario."""
    with pytest.raises(ConfigError, match='env.scenario: VMAS has no scenario "balanse"'):
        make_vector_env(VMASConfig(scenario="balanse"), n_envs=1)


def test_missing_extra_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without vmas, building the env names the extra to install."""
    monkeypatch.setitem(sys.modules, "vmas", None)
    with pytest.raises(MissingExtraError) as caught:
        make_vector_env(VMASConfig(), n_envs=2)
    assert str(caught.value) == (
        'env kind "vmas" needs: pip install "harl[vmas]" (the optional package "vmas" is not installed)'
    )


def test_module_imports_without_vmas() -> None:
    """harl.envs.vmas_env imports without vmas (and without torch work at import)."""
    code = "import sys; sys.modules['vmas'] = None; import harl.envs.vmas_env, harl.envs.vector"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
