"""The subprocess backend and an env whose ``step()`` never returns: the step timeout, restarting
a dead or hung worker (``restart_workers``), and a stop request that wakes the wait."""

from __future__ import annotations

import os
import signal
import time
import warnings
from collections.abc import Iterator

import numpy as np
import pytest

from harl.envs.python_env import PythonEnvConfig
from harl.envs.vector import SubprocessVectorEnv, make_vector_env
from harl.envs.vector.chunks import STEP_TIMEOUT_S
from harl.errors import EnvCrashedError
from harl.rundir import signals
from tests.fakes.counting import CountingConfig


def hung(hang_at: int) -> PythonEnvConfig:
    return PythonEnvConfig(factory="tests.fakes.hung_env:make", kwargs={"hang_at": hang_at})


def actions(n: int = 2) -> list[np.ndarray]:
    return [np.zeros((n, 1), np.float32), np.zeros((n, 1), np.float32)]


def counting_actions(n: int) -> list[np.ndarray]:
    return [np.zeros((n, 2), np.float32), np.zeros((n, 1), np.float32), np.tile([1.0, 2.0], (n, 1)).astype(np.float32)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"


@pytest.fixture
def no_signals() -> Iterator[None]:
    signals.reset()
    yield
    signals.reset()


def test_default_timeout_is_several_minutes() -> None:
    """Without the setting a call may take 300 s (the Ray backend's limit too); 0 means no limit."""
    venv = make_vector_env(CountingConfig(), 2, "subprocess", workers=1)
    unlimited = make_vector_env(CountingConfig(), 2, "subprocess", workers=1, step_timeout_s=0)
    try:
        assert STEP_TIMEOUT_S == 300.0 and venv.step_timeout_s == 300.0 and unlimited.step_timeout_s is None
    finally:
        venv.close()
        unlimited.close()


def test_hung_step_is_named_and_killed() -> None:
    """A step that never returns: after the timeout, EnvCrashedError names the worker, its envs and the
    factory and says how to fix it; every worker is gone."""
    venv = make_vector_env(hung(hang_at=2), 4, "subprocess", workers=2, step_timeout_s=1.0)
    assert isinstance(venv, SubprocessVectorEnv)
    pids = [w.process.pid for w in venv._workers]
    venv.reset(seed=0)
    venv.step(actions(4))
    started = time.monotonic()
    with pytest.raises(EnvCrashedError) as caught:
        venv.step(actions(4))
    assert time.monotonic() - started < 8.0
    assert str(caught.value) == (
        'Environment worker 0 (hosting envs 0-1) did not answer within 1 s while stepping (python env '
        '"tests.fakes.hung_env:make"); it was killed. An env call should never take this long: raise [collector] '
        "step_timeout_s for a slow simulator (0: no limit), or set [collector] restart_workers = true to restart "
        "the worker and go on.")
    assert not any(alive(pid) for pid in pids)


class TestRestartWorkers:
    def test_hung_worker_is_restarted(self) -> None:
        """restart_workers: the hung worker is killed and started again, its envs reset with fresh seeds; the
        step in flight for them shows as a time limit with reward 0 at their last state; stepping goes on."""
        venv = make_vector_env(hung(hang_at=3), 2, "subprocess", workers=2, step_timeout_s=1.0,
                               restart_workers=True)
        assert isinstance(venv, SubprocessVectorEnv)
        try:
            venv.reset(seed=0)
            old = [w.process.pid for w in venv._workers]
            last = venv.step(actions())
            venv_step = venv.step(actions())
            assert venv_step.state.tolist() == [[2.0] * 4] * 2  # the second step ran
            with pytest.warns(RuntimeWarning, match=r"Environment worker 0 \(hosting env 0; pid \d+\) did not "
                              r"answer within 1 s while stepping .*restarted it as pid \d+ and reset its envs: "
                              r"1 env steps lost"):
                cut = venv.step(actions())
            assert cut.truncated.tolist() == [True, True] and cut.terminated.tolist() == [False, False]
            assert cut.rewards.tolist() == [[0.0, 0.0]] * 2 and cut.episode_infos == []
            np.testing.assert_array_equal(cut.final_state, venv_step.state)
            assert cut.state.tolist() == [[0.0] * 4] * 2  # fresh episodes
            assert venv.restarts == 2 and venv.lost_steps == 2
            assert not any(alive(pid) for pid in old) and last is not None
            assert venv.step(actions()).state.tolist() == [[1.0] * 4] * 2
        finally:
            venv.close()

    def test_killed_between_steps_is_restarted_at_the_next_call(self) -> None:
        """A worker killed outside a step (during an update): the next call (here a checkpoint's
        episode_starts) restarts it, and the next step cuts its old episodes short without stepping it."""
        venv = make_vector_env(CountingConfig(), 3, "subprocess", workers=2, restart_workers=True)
        assert isinstance(venv, SubprocessVectorEnv)
        try:
            venv.reset(seed=0)
            before = venv.step(counting_actions(3))
            os.kill(venv._workers[1].process.pid, signal.SIGKILL)
            venv._workers[1].process.join(5)
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                assert len(venv.episode_starts()) == 3
            assert "was killed by SIGKILL while reporting its episodes" in str(seen[0].message)
            step = venv.step(counting_actions(3))
            assert step.truncated.tolist() == [False, False, True] and step.rewards[2].tolist() == [0, 0, 0]
            np.testing.assert_array_equal(step.final_state[2], before.state[2])
            assert venv.lost_steps == 1 and venv.restarts == 1
        finally:
            venv.close()

    def test_an_env_that_raises_is_not_restarted(self) -> None:
        """An exception in the env is a bug to fix, reported as before, even with restart_workers."""
        venv = make_vector_env(CountingConfig(crash_at=2), 2, "subprocess", workers=1, restart_workers=True)
        try:
            venv.reset()
            venv.step(counting_actions(2))
            with pytest.raises(EnvCrashedError, match="counting env crashed at step 2"):
                venv.step(counting_actions(2))
        finally:
            venv.close()


def test_a_stop_request_wakes_the_wait(no_signals: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Waiting on a hung worker when a stop is requested (Ctrl-C, SIGTERM): the wait gives up STOP_WAIT_S
    later with StopNow (a KeyboardInterrupt, which the Trainer handles as a second Ctrl-C), long before the
    step timeout, and every worker is gone."""
    monkeypatch.setattr(signals, "STOP_WAIT_S", 0.5)
    venv = make_vector_env(hung(hang_at=1), 2, "subprocess", workers=2, step_timeout_s=60.0)
    assert isinstance(venv, SubprocessVectorEnv)
    pids = [w.process.pid for w in venv._workers]
    venv.reset(seed=0)
    signals._note(signal.SIGTERM, request=True)
    started = time.monotonic()
    with pytest.raises(signals.StopNow, match=r"Environment worker 0 \(hosting env 0\) did not answer within "):
        venv.step(actions())
    assert time.monotonic() - started < 6.0
    assert not any(alive(pid) for pid in pids)
    assert isinstance(signals.StopNow(), KeyboardInterrupt)
