"""The subprocess backend's shared memory: same numbers as inline, segments released, errors named."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harl.cli import main
from harl.envs.vector import SubprocessVectorEnv, make_vector_env
from harl.envs.vector.shared import remove_stale
from harl.errors import EnvCrashedError
from harl.logging.csv_log import read_metrics
from tests.fakes.counting import CountingConfig

ROOT = Path(__file__).parents[2]
SHM = Path("/dev/shm")
pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="needs /dev/shm (Linux)")


def _segment(venv: SubprocessVectorEnv) -> Path:
    return SHM / venv._segments[0].name.lstrip("/")


def _actions(n_envs: int, dtype: type) -> list[np.ndarray]:
    """CountingEnv actions; float32 rows travel in the segment, other dtypes in the message."""
    return [np.zeros((n_envs, 2), np.float32), (np.arange(n_envs).reshape(n_envs, 1) % 3).astype(dtype),
            np.tile([1, 2], (n_envs, 1)).astype(dtype)]


def test_steps_match_inline_with_actions_in_the_segment_or_the_message() -> None:
    """Every field of every step (finals, masks, flags, episode infos) equals the inline backend's,
    whether the actions came through the segment (float32) or the pipe (int64); a step's arrays
    are its own (the next step leaves them be)."""
    config = CountingConfig(episode_length=3, terminate_at=2)
    venvs = [make_vector_env(config, 5, backend, workers=2, seed=4) for backend in ("inline", "subprocess", "subprocess")]
    ended, previous = 0, None
    try:
        for venv in venvs:
            venv.reset()
        for _ in range(7):
            inline, shared, piped = (venv.step(_actions(5, np.float32 if k < 2 else np.int64))
                                     for k, venv in enumerate(venvs))
            for step in (shared, piped):
                for field in ("state", "final_state", "rewards", "terminated", "truncated", "active"):
                    np.testing.assert_array_equal(getattr(step, field), getattr(inline, field), err_msg=field)
                for field in ("obs", "final_obs", "avail", "final_avail"):
                    for a, b in zip(getattr(step, field), getattr(inline, field)):
                        np.testing.assert_array_equal(a, b, err_msg=field)
                assert step.episode_infos == inline.episode_infos
            ended += len(inline.episode_infos)
            if previous is not None:
                np.testing.assert_array_equal(previous[0].obs[0], previous[1])
            previous = shared, shared.obs[0].copy()
        assert ended == 15  # every env ended 3 episodes
    finally:
        for venv in venvs:
            venv.close()


def test_no_masks_gives_none() -> None:
    """An env without action masks (MPE, continuous) gives avail None, as inline does."""
    pytest.importorskip("mpe2")
    from harl.envs.mpe import MPEConfig

    venv = make_vector_env(MPEConfig(), 2, "subprocess", workers=2)
    try:
        venv.reset()
        step = venv.step([np.full((2, 5), 0.5, np.float32)] * 3)
        assert step.avail is None and step.final_avail is None
    finally:
        venv.close()


class TestSegmentReleased:
    def test_on_close(self) -> None:
        """close() removes the /dev/shm entry."""
        venv = make_vector_env(CountingConfig(), 3, "subprocess", workers=2)
        segment = _segment(venv)
        assert segment.exists()
        venv.close()
        assert not segment.exists()

    def test_after_a_worker_crash(self) -> None:
        """A worker that dies mid-step: the error names it, and the segment is gone."""
        venv = make_vector_env(CountingConfig(die_at=2), 3, "subprocess", workers=2)
        segment = _segment(venv)
        venv.reset()
        venv.step(_actions(3, np.float32))
        with pytest.raises(EnvCrashedError, match="died with exit code 3"):
            venv.step(_actions(3, np.float32))
        assert not segment.exists()

    @pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
    def test_when_the_parent_is_killed(self, signum: int) -> None:
        """A parent ended by a signal it does not handle: its workers exit, nothing warns of a leaked
        shared_memory object (the segment is not the resource tracker's), and the next subprocess env
        built on this machine removes the dead parent's segment."""
        script = ("import sys, time\n"
                  "from harl.envs.vector import make_vector_env\n"
                  "from tests.fakes.counting import CountingConfig\n"
                  "venv = make_vector_env(CountingConfig(), 3, 'subprocess', workers=2)\n"
                  "print(venv._segments[0].name, flush=True)\n"
                  "time.sleep(60)\n")
        proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            name = proc.stdout.readline().strip().lstrip("/")  # type: ignore[union-attr]
            assert name.startswith(f"harl_{proc.pid}_")
            segment = SHM / name
            assert segment.exists()
            proc.send_signal(signum)
            _, err = proc.communicate(timeout=15)  # stderr closes once the workers (and any tracker) are gone
            assert "leaked" not in err and "resource_tracker" not in err, err
            venv = make_vector_env(CountingConfig(), 2, "subprocess", workers=1)
            venv.close()
            assert not segment.exists()
        finally:
            proc.kill()
            proc.wait()

    def test_a_live_processs_segment_is_kept(self) -> None:
        """Only dead processes' harl_<pid>_ segments are stale: another live run's segment stays."""
        first = make_vector_env(CountingConfig(), 2, "subprocess", workers=1)
        try:
            assert remove_stale() == []
            assert _segment(first).exists()
        finally:
            first.close()


def test_error_names_the_worker_and_the_env() -> None:
    """An exception in env 4 alone (worker 1 hosts envs 3-5) names both; the worker's traceback is chained."""
    venv = make_vector_env(CountingConfig(), 6, "subprocess", workers=2)
    try:
        venv.reset()
        actions = _actions(6, np.float32)
        actions[1][4] = 3  # agent 1's forbidden action, in env 4 only
        with pytest.raises(EnvCrashedError) as caught:
            venv.step(actions)
    finally:
        venv.close()
    assert str(caught.value) == (
        "Environment worker 1 (hosting envs 3-5) raised ValueError: agent 1 took its forbidden action "
        'while stepping env 4. Try [collector] backend = "inline" to see the full traceback.')
    assert "Traceback" in str(caught.value.__cause__)


def _train(pipeline: str, run_dir: Path, backend: str, settings: dict[str, object]) -> list[dict[str, str]]:
    values = {"collector.backend": backend, "collector.workers": 2, "logging.progress": "false", **settings}
    args = [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]
    assert main(["train", str(ROOT / "pipelines" / pipeline), *args, "--run-dir", str(run_dir)]) == 0
    return [{k: v for k, v in row.items() if k not in ("wall_time", "steps_per_s")}
            for row in read_metrics(run_dir / "metrics.csv")]


@pytest.mark.parametrize(("pipeline", "settings"), [
    ("happo_mpe_spread.toml", {"collector.n_envs": 4, "collector.rollout_length": 25, "run.total_env_steps": 300,
                               "evaluator.every_iterations": 2, "evaluator.episodes": 2, "evaluator.n_envs": 2,
                               "policy.hidden_sizes": "[16]", "critic.hidden_sizes": "[16]",
                               "updater.objective.epochs": 1, "critic.epochs": 1}),
    ("hatd3_mpe_spread.toml", {"collector.n_envs": 4, "collector.rollout_length": 10, "collector.warmup_steps": 80,
                               "collector.updates_per_round": 2, "run.total_env_steps": 200,
                               "evaluator.every_iterations": 2, "evaluator.episodes": 2, "evaluator.n_envs": 2,
                               "policy.hidden_sizes": "[16]", "critic.hidden_sizes": "[16]"}),
])
def test_same_seed_same_metrics_inline_and_subprocess(tmp_path: Path, pipeline: str, settings: dict[str, object]) -> None:
    """One pipeline and seed write the same metrics.csv on both backends, wall-clock columns aside."""
    pytest.importorskip("mpe2")
    inline = _train(pipeline, tmp_path / "inline", "inline", settings)
    shared = _train(pipeline, tmp_path / "subprocess", "subprocess", settings)
    assert len(inline) >= 3 and any(row.get("eval_return") for row in inline)
    assert shared == inline


def test_uint8_images_travel_as_uint8_and_match_inline() -> None:
    """Image observations and an image state keep their dtype through the segment (a quarter of
    float32's bytes), with the inline backend's values; a vector state stays float32."""
    from tests.fakes.images import ImagesConfig

    for config in (ImagesConfig(), ImagesConfig(state="vector")):
        inline, sub = (make_vector_env(config, 4, backend, workers=2, seed=3) for backend in ("inline", "subprocess"))
        try:
            assert sub._layout.fields["obs0"].dtype == "uint8"
            assert sub._layout.fields["state"].dtype == ("uint8" if config.state == "image" else "float32")
            for a, b in zip(inline.reset(seed=3), sub.reset(seed=3)):
                if a is not None:
                    for x, y in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b]):
                        assert np.asarray(y).dtype == np.asarray(x).dtype
                        np.testing.assert_array_equal(y, x)
            actions = [np.ones((4, 1), np.float32), np.zeros((4, 1), np.float32)]
            s1, s2 = inline.step(actions), sub.step(actions)
            for x, y in zip([*s1.obs, s1.state], [*s2.obs, s2.state]):
                assert y.dtype == x.dtype
                np.testing.assert_array_equal(y, x)
        finally:
            inline.close()
            sub.close()


def test_no_room_for_the_segment_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """/dev/shm full: the message names the key and the fixes, and no worker is left running."""
    from multiprocessing import shared_memory

    from harl.errors import HarlError

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shared_memory, "SharedMemory", full)
    started: list[SubprocessVectorEnv] = []
    real_init = SubprocessVectorEnv.__init__

    def init(self: SubprocessVectorEnv, *args: object, **kwargs: object) -> None:
        started.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(SubprocessVectorEnv, "__init__", init)
    with pytest.raises(HarlError, match=r'backend = "subprocess": cannot create the [\d,]+-byte shared-memory '
                                        r".*No space left on device.*lower \[collector\] n_envs"):
        make_vector_env(CountingConfig(), 4, "subprocess", workers=2, seed=0)
    assert not any(w.process.is_alive() for w in started[0]._workers)
