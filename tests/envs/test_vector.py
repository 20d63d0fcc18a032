"""Vector envs: per-agent stacking, auto-reset, episode accounting, crashes, seeding."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from harl.envs.mpe import MPEConfig
from harl.envs.vector import SubprocessVectorEnv, make_vector_env
from harl.errors import EnvCrashedError
from tests.fakes.counting import OBS_SIZES, STATE_SIZE, CountingConfig

BACKENDS = ("inline", "subprocess")


def _actions(n_envs: int) -> list[np.ndarray]:
    """Valid CountingEnv actions: Box (n, 2), Discrete as (n, 1) ints, MultiDiscrete (n, 2)."""
    return [
        np.zeros((n_envs, 2), dtype=np.float32),
        np.arange(n_envs).reshape(n_envs, 1) % 3,
        np.tile([1, 2], (n_envs, 1)),
    ]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def _make(config: CountingConfig, backend: str, n_envs: int = 3, seed: int = 0):
    return make_vector_env(config, n_envs=n_envs, backend=backend, workers=2, seed=seed)


def test_shapes_per_agent(backend: str) -> None:
    """Observations, avail masks, rewards and active are stacked per agent with the env axis first."""
    venv = _make(CountingConfig(), backend)
    try:
        assert venv.n_envs == 3 and venv.n_agents == 3
        assert [s.shape for s in venv.observation_spaces] == [(n,) for n in OBS_SIZES]
        obs, state, avail = venv.reset()
        assert [o.shape for o in obs] == [(3, n) for n in OBS_SIZES]
        assert state.shape == (3, STATE_SIZE)
        assert [a.shape for a in avail] == [(3, 0), (3, 4), (3, 5)]
        step = venv.step(_actions(3))
        assert [o.shape for o in step.obs] == [(3, n) for n in OBS_SIZES]
        assert all(o.dtype == np.float32 for o in step.obs)
        assert step.state.shape == step.final_state.shape == (3, STATE_SIZE)
        assert [a.shape for a in step.avail] == [(3, 0), (3, 4), (3, 5)]
        assert step.rewards.shape == (3, 3) and step.rewards.dtype == np.float32
        assert step.terminated.shape == step.truncated.shape == (3,)
        assert step.active.shape == (3, 3) and step.active.dtype == bool
    finally:
        venv.close()


def test_auto_reset_final_state_and_episode_infos(backend: str) -> None:
    """An ended episode is reset in place, keeps its last state in final_state and is reported once."""
    venv = _make(CountingConfig(episode_length=3), backend)
    try:
        venv.reset()
        first = venv.step(_actions(3))
        assert first.active.all()  # the env reported active=None
        np.testing.assert_array_equal(first.final_state, first.state)
        second = venv.step(_actions(3))
        assert second.active[:, :2].all() and not second.active[:, 2].any()
        assert second.episode_infos == []
        third = venv.step(_actions(3))
        assert third.truncated.all() and not third.terminated.any()
        assert third.final_state[:, 2].tolist() == [3, 3, 3]  # step counter of the ended episode
        assert third.state[:, 1].tolist() == [1, 1, 1]  # episode counter after the reset
        assert third.state[:, 2].tolist() == [0, 0, 0]
        assert third.obs[0][:, 0].tolist() == [100.0, 1100.0, 2100.0]  # seed*1000 + episode*100
        # Mean reward over agents after step t is t + 1: 2 + 3 + 4.
        assert third.episode_infos == [{"counter": 3.0, "return": 9.0, "length": 3}] * 3
        fourth = venv.step(_actions(3))
        assert not fourth.truncated.any() and fourth.episode_infos == []
    finally:
        venv.close()


def test_terminated_and_truncated_kept_apart(backend: str) -> None:
    """A terminal state sets only ``terminated``; a time limit sets only ``truncated``."""
    venv = _make(CountingConfig(episode_length=3, terminate_at=2), backend)
    try:
        venv.reset()
        venv.step(_actions(3))
        step = venv.step(_actions(3))
        assert step.terminated.all() and not step.truncated.any()
        assert [info["length"] for info in step.episode_infos] == [2, 2, 2]
    finally:
        venv.close()


def test_env_exception_raises_env_crashed(backend: str) -> None:
    """An exception inside an env surfaces as EnvCrashedError naming where it happened."""
    venv = _make(CountingConfig(crash_at=2), backend)
    try:
        venv.reset()
        venv.step(_actions(3))
        with pytest.raises(EnvCrashedError) as caught:
            venv.step(_actions(3))
    finally:
        venv.close()
    message = str(caught.value)
    assert "RuntimeError: counting env crashed at step 2 while stepping" in message
    if backend == "inline":
        assert message.startswith("Environment 0 raised")
        assert isinstance(caught.value.__cause__, RuntimeError)
    else:
        assert message.startswith("Environment worker 0 (hosting envs 0-1) raised")
        assert 'backend = "inline"' in message
        assert "Traceback" in str(caught.value.__cause__)


def test_dead_worker_raises_without_hanging() -> None:
    """A worker that exits mid-step is reported with its exit code within seconds."""
    venv = _make(CountingConfig(die_at=2), "subprocess")
    venv.reset()
    venv.step(_actions(3))
    started = time.monotonic()
    with pytest.raises(EnvCrashedError, match=r"worker 0 \(hosting envs 0-1\) died with exit code 3"):
        venv.step(_actions(3))
    assert time.monotonic() - started < 5.0
    venv.close()


def test_killed_worker_is_reported() -> None:
    """A worker killed by a signal is named with the signal, and the others are shut down."""
    venv = _make(CountingConfig(), "subprocess")
    assert isinstance(venv, SubprocessVectorEnv)
    venv.reset()
    processes = [worker.process for worker in venv._workers]
    os.kill(processes[1].pid, signal.SIGKILL)
    processes[1].join(5.0)
    with pytest.raises(EnvCrashedError, match=r"worker 1 \(hosting env 2\) was killed by SIGKILL"):
        venv.step(_actions(3))
    assert not any(p.is_alive() for p in processes)


def test_close_is_idempotent() -> None:
    """close() stops every worker, can be repeated, and later use is refused."""
    venv = _make(CountingConfig(), "subprocess")
    processes = [worker.process for worker in venv._workers]
    venv.close()
    venv.close()
    assert not any(p.is_alive() for p in processes)
    with pytest.raises(RuntimeError, match="closed"):
        venv.reset()


def test_seeding(backend: str) -> None:
    """Env k is seeded seed + k on the first reset, explicit seeds repeat, later resets continue."""
    venv = _make(CountingConfig(), backend, seed=5)
    try:
        _, state, _ = venv.reset()
        assert state[:, 0].tolist() == [5, 6, 7] and state[:, 1].tolist() == [0, 0, 0]
        _, state, _ = venv.reset()
        assert state[:, 0].tolist() == [5, 6, 7] and state[:, 1].tolist() == [1, 1, 1]
        _, state, _ = venv.reset(seed=20)
        assert state[:, 0].tolist() == [20, 21, 22] and state[:, 1].tolist() == [0, 0, 0]
    finally:
        venv.close()


def test_mpe_backends_agree() -> None:
    """simple_spread gives identical batches inline and across two worker processes."""
    config = MPEConfig(continuous_actions=False, max_episode_steps=4)
    rng = np.random.default_rng(0)
    actions = [[rng.integers(5, size=(4, 1)) for _ in range(3)] for _ in range(6)]
    results = []
    for backend in BACKENDS:
        venv = make_vector_env(config, n_envs=4, backend=backend, workers=2, seed=3)
        try:
            results.append((venv.reset(), [venv.step(a) for a in actions]))
        finally:
            venv.close()
    (inline_reset, inline_steps), (sub_reset, sub_steps) = results
    np.testing.assert_array_equal(inline_reset[1], sub_reset[1])
    for a, b in zip(inline_steps, sub_steps):
        np.testing.assert_array_equal(a.state, b.state)
        np.testing.assert_array_equal(a.final_state, b.final_state)
        np.testing.assert_array_equal(a.rewards, b.rewards)
        np.testing.assert_array_equal(a.truncated, b.truncated)
        for x, y in zip(a.obs, b.obs):
            np.testing.assert_array_equal(x, y)
        assert a.episode_infos == b.episode_infos
    assert len(inline_steps[3].episode_infos) == 4 and inline_steps[3].truncated.all()


def test_bad_backend() -> None:
    """An unknown backend name is rejected with the valid choices."""
    with pytest.raises(ValueError, match="inline, subprocess"):
        make_vector_env(CountingConfig(), n_envs=2, backend="threads")
