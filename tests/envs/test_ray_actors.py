"""The ray backend: env workers as Ray actors, against the inline backend, with dead and restarted actors."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import numpy as np
import pytest

from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.envs.vector import make_vector_env, ray_actors
from harl.errors import ConfigError, EnvCrashedError, HarlError, MissingExtraError
from harl.logging.csv_log import read_metrics
from harl.run.lifecycle import start_run
from harl.rundir.checkpoint import latest_checkpoint, load_checkpoint
from tests.envs.test_vector import _actions
from tests.fakes.bad_env import write_pipeline
from tests.fakes.counting import CountingConfig
from tests.ray_cluster import ENV as CLUSTER_ENV
from tests.ray_cluster import OBJECT_STORE_BYTES, LocalCluster, needs_ray, ray_cluster  # noqa: F401

ROOT = Path(__file__).parents[2]
WALL_CLOCK = ("wall_time", "steps_per_s")


def test_missing_ray_names_the_key_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Ray, backend = "ray" is a user error (exit 2) naming the key and the extra."""
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(MissingExtraError) as caught:
        make_vector_env(CountingConfig(), n_envs=2, backend="ray")
    assert str(caught.value) == ('[collector] backend = "ray" needs: pip install "harl[ray]" '
                                 '(the optional package "ray" is not installed)')


def test_restart_workers_needs_worker_processes() -> None:
    """restart_workers with inline envs would do nothing: refused with the fix."""
    with pytest.raises(ConfigError) as caught:
        structure_pipeline({"env": {"kind": "counting"}, "collector": {"restart_workers": True}}, "x.toml")
    assert str(caught.value) == ('x.toml: collector.restart_workers: applies to backend = "subprocess" or "ray", '
                                 'but backend = "inline"; remove the key or set backend = "subprocess"')




def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def gone(pids: list[int], within: float = 10.0) -> bool:
    """Every process in ``pids`` has exited within ``within`` seconds."""
    deadline = time.monotonic() + within
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(alive(p) for p in pids)


@pytest.fixture(scope="module", autouse=True)
def no_token_auth() -> Iterator[None]:
    """Every Ray of this module runs as tests/ray_cluster.py's do, without token authentication:
    a process keeps the mode of its first ``ray.init``, and the cluster's must match it."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in CLUSTER_ENV.items():
            patch.setenv(name, value)
        yield


@needs_ray
def test_starts_a_local_ray_and_stops_it() -> None:
    """Without RAY_ADDRESS, a local Ray with one CPU per actor is started, and close stops it and the actors."""
    import ray

    if ray.is_initialized() or os.environ.get("RAY_ADDRESS"):
        pytest.skip("this process is already connected to Ray")
    venv = make_vector_env(CountingConfig(), n_envs=3, backend="ray", workers=2)
    try:
        assert ray.cluster_resources()["CPU"] == 2
        pids = venv.worker_pids
        assert all(alive(p) for p in pids)
    finally:
        venv.close()
    assert not ray.is_initialized()
    assert gone(pids)


@needs_ray
def test_actors_on_two_nodes(ray_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """With RAY_ADDRESS, the actors go to the cluster (one per 1-CPU node here), give inline's batches,
    a killed one is restarted there, and close leaves the cluster running without them."""
    import ray

    if ray.is_initialized():
        pytest.skip("this process is already connected to another Ray")
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster.address)
    inline = make_vector_env(CountingConfig(episode_length=3), n_envs=3, backend="inline", seed=4)
    venv = make_vector_env(CountingConfig(episode_length=3), n_envs=3, backend="ray", workers=2, seed=4,
                           restart_workers=True)
    try:
        assert len(set(venv.worker_nodes)) == 2
        assert same(run(inline, 4), run(venv, 4))
        os.kill(venv.worker_pids[0], signal.SIGKILL)
        with pytest.warns(RuntimeWarning, match=r"worker 0 \(hosting envs 0-1.*2 env steps lost"):
            step = venv.step(_actions(3))
        assert step.truncated.tolist() == [True, True, False] and len(set(venv.worker_nodes)) == 2
    finally:
        pids = venv.worker_pids
        venv.close()
        inline.close()
    assert gone(pids) and not ray.is_initialized()
    assert ray_cluster.processes()  # the cluster itself is still up: close only disconnected


@pytest.fixture(scope="module")
def local_ray() -> Iterator[object]:
    """One local Ray for the tests below (started once: it takes seconds)."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, object_store_memory=OBJECT_STORE_BYTES, include_dashboard=False,
                 logging_level="WARNING")
    yield ray
    if started:
        ray.shutdown()


def run(venv: object, n_steps: int) -> list[object]:
    """Reset, ``n_steps`` steps, the episode starts, RNG states and a restart: what a vector env hands out."""
    out: list[object] = [venv.reset()]
    out += [venv.step(_actions(venv.n_envs)) for _ in range(n_steps)]
    starts = venv.episode_starts()
    out += [starts, venv.get_rng_state(), venv.restart(starts)]
    return out


def same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if attrs.has(type(a)):
        return type(a) is type(b) and same(attrs.asdict(a, recurse=False), attrs.asdict(b, recurse=False))
    return a == b


@needs_ray
@pytest.mark.usefixtures("local_ray")
class TestOnLocalRay:
    def test_same_batches_as_inline(self) -> None:
        """Chunks of 2 and 1 envs in two actors give inline's batches, episode starts and restarts."""
        results = []
        for backend in ("inline", "ray"):
            venv = make_vector_env(CountingConfig(episode_length=3), n_envs=3, backend=backend, workers=2, seed=4)
            try:
                results.append(run(venv, 4))
            finally:
                venv.close()
        inline, on_ray = results
        assert same(inline, on_ray)
        assert on_ray[3].episode_infos == [{"counter": 3.0, "return": 9.0, "length": 3}] * 3

    def test_env_exception_names_worker_and_env(self) -> None:
        """An env raising inside an actor: which worker, which envs, the exception; all actors closed."""
        venv = make_vector_env(CountingConfig(crash_at=2), n_envs=3, backend="ray", workers=2)
        venv.reset()
        venv.step(_actions(3))
        pids = venv.worker_pids
        with pytest.raises(EnvCrashedError) as caught:
            venv.step(_actions(3))
        assert str(caught.value) == (
            f"Environment worker 0 (hosting envs 0-1; Ray actor pid {pids[0]} on {os.uname().nodename}) raised "
            'RuntimeError: counting env crashed at step 2 while stepping. Try [collector] backend = "inline" '
            "to see the full traceback.")
        assert gone(pids)

    def test_env_that_cannot_be_built(self) -> None:
        """An env constructor that fails inside an actor: its harl message, not Ray's "creation task" one."""
        from harl.envs.python_env import PythonEnvConfig

        config = PythonEnvConfig(factory="tests.fakes.bad_env:make", kwargs={"mode": "ctor_raises"})
        with pytest.raises(EnvCrashedError) as caught:
            make_vector_env(config, n_envs=2, backend="ray", workers=2)
        assert str(caught.value) == (
            'Environment worker 0 (hosting env 0; Ray actor being started) reported: env.factory: '
            '"tests.fakes.bad_env:make" raised ValueError: unknown map \'x\' while building the environment. '
            'Try [collector] backend = "inline" to see the full traceback.')

    def test_killed_actor_is_reported_without_hanging(self) -> None:
        """An actor killed by a signal: the worker and its envs are named within seconds, no actor is left."""
        venv = make_vector_env(CountingConfig(), n_envs=3, backend="ray", workers=2)
        venv.reset()
        pids = venv.worker_pids
        os.kill(pids[1], signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(EnvCrashedError) as caught:
            venv.step(_actions(3))
        assert time.monotonic() - started < 30.0
        message = str(caught.value)
        assert message.startswith(f"Environment worker 1 (hosting env 2; Ray actor pid {pids[1]} on ")
        assert " died while stepping (" in message
        assert message.endswith("[collector] restart_workers = true restarts a dead worker instead of stopping.")
        assert gone(pids)
        with pytest.raises(RuntimeError, match="closed"):
            venv.step(_actions(3))

    def test_restart_workers_resets_the_dead_workers_envs(self) -> None:
        """With restart_workers, a killed actor is replaced: its envs start fresh, the lost step is counted."""
        venv = make_vector_env(CountingConfig(episode_length=5), n_envs=3, backend="ray", workers=2, seed=10,
                               restart_workers=True)
        try:
            venv.reset()
            before = venv.step(_actions(3))
            old = venv.worker_pids
            os.kill(old[1], signal.SIGKILL)
            with pytest.warns(RuntimeWarning, match=r"worker 1 \(hosting env 2.*restarted it as pid .*: 1 env "
                                                    r"steps lost \(the step in flight\), 1 episodes cut short"):
                step = venv.step(_actions(3))
            assert venv.restarts == 1 and venv.lost_steps == 1
            assert venv.worker_pids[0] == old[0] and venv.worker_pids[1] != old[1]
            # Envs 0 and 1 went on; env 2 ended its episode at its last state with reward 0 and began anew.
            assert step.truncated.tolist() == [False, False, True] and not step.terminated.any()
            assert step.state[:2, 2].tolist() == [2, 2] and step.rewards[2].tolist() == [0, 0, 0]
            np.testing.assert_array_equal(step.final_state[2], before.state[2])
            np.testing.assert_array_equal(step.final_obs[0][2], before.obs[0][2])
            assert step.state[2].tolist()[:3] == [12 + 1_000_003, 0, 0]  # seed + k + restarts * 1_000_003
            assert step.episode_infos == []
            after = venv.step(_actions(3))
            assert after.state[:, 2].tolist() == [3, 3, 1]
            assert gone(old[1:])
        finally:
            pids = venv.worker_pids
            venv.close()
        assert gone(pids)

    def test_an_actor_that_dies_between_steps_cuts_its_episodes_at_the_next_step(self) -> None:
        """Killed before ``episode_starts`` (as after a rollout): the call is answered by the restarted
        actor, and the next step ends the old episodes (the collector still holds their observations)
        as a time limit and begins the fresh ones, instead of mixing two episodes in one transition."""
        venv = make_vector_env(CountingConfig(episode_length=5), n_envs=3, backend="ray", workers=2, seed=10,
                               restart_workers=True)
        try:
            venv.reset()
            before = venv.step(_actions(3))
            os.kill(venv.worker_pids[1], signal.SIGKILL)
            with pytest.warns(RuntimeWarning, match="episodes are cut short at the next step"):
                starts = venv.episode_starts()
            assert len(starts) == 3 and venv.restarts == 1 and venv.lost_steps == 0
            step = venv.step(_actions(3))
            assert venv.lost_steps == 1
            assert step.truncated.tolist() == [False, False, True] and step.rewards[2].tolist() == [0, 0, 0]
            np.testing.assert_array_equal(step.final_state[2], before.state[2])
            assert step.state[:2, 2].tolist() == [2, 2] and step.state[2].tolist()[:3] == [12 + 1_000_003, 0, 0]
            assert venv.step(_actions(3)).state[:, 2].tolist() == [3, 3, 1]
        finally:
            venv.close()

    def test_hung_actor_is_reported(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An env step that never returns (here: longer than a shortened timeout) is reported, and its
        actor killed, instead of the run hanging."""
        from harl.envs.python_env import PythonEnvConfig

        monkeypatch.setattr(ray_actors, "TIMEOUT_S", 1.0)
        config = PythonEnvConfig(factory="tests.fakes.bad_env:make", kwargs={"sleep": 30.0})
        venv = make_vector_env(config, n_envs=2, backend="ray", workers=2)
        venv.reset()
        pids = venv.worker_pids
        started = time.monotonic()
        with pytest.raises(EnvCrashedError, match=r"worker 0 \(hosting env 0; .*\) did not answer within 1 s while "
                                                  r"stepping"):
            venv.step([np.zeros((2, 1), np.float32), np.zeros((2, 1), np.int64)])
        assert gone(pids) and time.monotonic() - started < 15.0

    def test_actors_that_cannot_be_placed(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """More actors than the cluster has CPUs: a clear error after the start-up timeout, not a hang."""
        monkeypatch.setattr(ray_actors, "START_TIMEOUT_S", 3.0)
        with pytest.raises(EnvCrashedError) as caught:
            make_vector_env(CountingConfig(), n_envs=3, backend="ray", workers=3)
        assert str(caught.value).startswith("Environment worker ")
        assert str(caught.value).endswith(
            "was not running within 3 s (each env worker needs 1 CPU; the Ray cluster has 0 of 2 free). "
            "Lower [collector] workers, or add CPUs (nodes) to the Ray cluster.")

    def test_close_is_idempotent_and_render_is_refused(self) -> None:
        """close() can be repeated; render is refused with the reason and the way to render."""
        venv = make_vector_env(CountingConfig(), n_envs=2, backend="ray", workers=2)
        with pytest.raises(HarlError, match="its envs live in Ray actors, possibly on other machines"):
            venv.render()
        venv.close()
        venv.close()
        with pytest.raises(RuntimeError, match="closed"):
            venv.reset()

    @pytest.mark.parametrize("pipeline", ["happo_mpe_spread", "hasac_mpe_spread"])
    def test_same_metrics_as_inline(self, pipeline: str, tmp_path: Path) -> None:
        """Two iterations of an on- and an off-policy pipeline write inline's metrics.csv (wall clock aside)."""
        pytest.importorskip("mpe2", reason="this run uses MPE (pip install harl[mpe])")
        overrides = ["collector.n_envs=3", "collector.workers=2", "evaluator.episodes=2", "evaluator.n_envs=1",
                     "policy.hidden_sizes=[16]", "critic.hidden_sizes=[16]", "logging.progress=false"]
        overrides += (["collector.rollout_length=30", "updater.objective.epochs=1"] if pipeline.startswith("happo")
                      else ["collector.rollout_length=13", "collector.warmup_steps=39",
                            "collector.updates_per_round=2", "buffer.batch_size=16"])
        rows = []
        for backend in ("inline", "ray"):
            run_dir = tmp_path / backend
            trainer, _ = start_run(ROOT / "pipelines" / f"{pipeline}.toml",
                                   [*overrides, f"collector.backend={backend}"], run_dir=run_dir)
            with trainer:
                trainer.train(quiet=True, max_iterations=2)
            rows.append([{k: v for k, v in r.items() if k not in WALL_CLOCK}
                         for r in read_metrics(run_dir / "metrics.csv")])
        assert len(rows[0]) == 2 and rows[0][-1]["train_return"]  # an episode (of 25 steps) ended
        assert rows[1] == rows[0]

    @pytest.mark.parametrize("restart", [False, True])
    def test_dead_actor_in_a_run(self, restart: bool, tmp_path: Path) -> None:
        """An actor killed after two iterations: the third collect stops the run with the env-crash error
        and the exit checkpoint holds the last whole iteration; with restart_workers the run goes on to
        its end, one env step lost."""
        pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=100, every=100, backend="ray", workers=2,
                                  restart_workers=restart)
        trainer, _ = start_run(pipeline, [], tmp_path / "run")
        venv = trainer.stages.venv
        collector, pids = trainer.stages.collector, venv.worker_pids
        collect = collector.collect

        def third_collect_kills(buffer: object) -> object:
            if trainer.counters.iteration == 2 and alive(pids[1]):
                os.kill(pids[1], signal.SIGKILL)
            return collect(buffer)

        collector.collect = third_collect_kills
        try:
            if restart:
                with pytest.warns(RuntimeWarning, match="1 env steps lost"):
                    assert trainer.train(quiet=True).counters.iteration == 5
                assert venv.lost_steps == 1 and len(read_metrics(tmp_path / "run" / "metrics.csv")) == 5
            else:
                with pytest.raises(EnvCrashedError, match=r"worker 1 \(hosting env 1; Ray actor pid \d+ on .*\) died"):
                    trainer.train(quiet=True)
                assert load_checkpoint(latest_checkpoint(tmp_path / "run"))["counters"]["iteration"] == 2
        finally:
            pids = venv.worker_pids
            trainer.stages.close()
        assert gone(pids)


@needs_ray
def test_pipeline_builds_the_ray_backend(local_ray: object) -> None:
    """[collector] backend = "ray" reaches the vector env, restart_workers included."""
    from tests.fakes import counting

    spec = structure_pipeline({"env": {"kind": counting.CountingConfig().kind},
                               "collector": {"n_envs": 2, "backend": "ray", "workers": 2, "restart_workers": True},
                               "policy": {"hidden_sizes": [8]}, "critic": {"hidden_sizes": [8]}}, "x.toml")
    stages = build_stages(spec)
    try:
        assert type(stages.venv).__name__ == "RayVectorEnv" and stages.venv.restart_workers
        assert len(stages.venv.worker_pids) == 2
    finally:
        stages.close()
