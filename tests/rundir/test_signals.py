"""harl.rundir.signals and the Trainer's exits, met as a user meets them: a real ``harl train``
process, a scheduler's SIGTERM, a double Ctrl-C, an env worker killed with SIGKILL."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harl.logging.csv_log import read_metrics
from harl.rundir import signals
from harl.rundir.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint
from harl.rundir.signals import exit_status
from tests.fakes.bad_env import write_pipeline
from tests.fakes.hung_env import write_hung_pipeline
from tests.procs import group, workers

ROOT = Path(__file__).parents[2]
TIMEOUT = 120


def start(args: list[str]) -> subprocess.Popen[str]:
    """``harl ARGS`` in its own session (so its workers can be found and signalled as a group)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "harl", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def rows(run_dir: Path) -> int:
    path = run_dir / "metrics.csv"
    return len(read_metrics(path)) if path.is_file() else 0


def wait_for_rows(proc: subprocess.Popen[str], run_dir: Path, n: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while rows(run_dir) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run did not reach its iterations in time"
        time.sleep(0.05)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=TIMEOUT)
    return proc.returncode, out, err


def no_leftovers(pgid: int) -> None:
    deadline = time.monotonic() + 10
    while group(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group(pgid) == []


@pytest.fixture
def slow_pipeline(tmp_path: Path) -> Path:
    """Subprocess workers, 20 ms per env step: an iteration takes about 0.2 s; no scheduled checkpoints."""
    return write_pipeline(tmp_path / "slow.toml", total_env_steps=4000, every=1000,
                          env={"sleep": 0.02}, backend="subprocess", workers=2)


def test_exit_status() -> None:
    """128 + the signal number: 130 for Ctrl-C, 143 for SIGTERM, 138 for SIGUSR1."""
    assert [exit_status(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)] == [130, 143, 138]


class TestRealRun:
    """Real runs; the first (one SIGTERM) stays in the default run, the rest are slow."""

    def test_sigterm_finishes_the_iteration_and_checkpoints(self, slow_pipeline: Path, tmp_path: Path) -> None:
        """SIGTERM (Slurm, Kubernetes, timeout) acts like one Ctrl-C: exact checkpoint, exit 143, no leftovers."""
        run_dir = tmp_path / "run"
        proc = start(["train", str(slow_pipeline), "--run-dir", str(run_dir)])
        wait_for_rows(proc, run_dir, 2)
        proc.send_signal(signal.SIGTERM)
        code, out, err = finish(proc)
        assert code == 143, err
        assert "Traceback" not in err
        assert "SIGTERM: stopping after this iteration, with a checkpoint" in out + err
        done = rows(run_dir)
        assert load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"] == done
        no_leftovers(proc.pid)

    @pytest.mark.slow
    def test_sigterm_to_the_whole_group(self, slow_pipeline: Path, tmp_path: Path) -> None:
        """SIGTERM to every process of the job (scancel): workers leave stopping to the trainer."""
        run_dir = tmp_path / "run"
        proc = start(["train", str(slow_pipeline), "--run-dir", str(run_dir)])
        wait_for_rows(proc, run_dir, 1)
        os.killpg(proc.pid, signal.SIGTERM)
        code, _, err = finish(proc)
        assert code == 143, err
        assert load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"] == rows(run_dir)
        no_leftovers(proc.pid)

    @pytest.mark.slow
    def test_double_ctrl_c_mid_step_then_resume(self, slow_pipeline: Path, tmp_path: Path) -> None:
        """Two Ctrl-C to the group while steps are in flight: exit 130, no traceback, a checkpoint of the
        last whole iteration, and the run resumes (no desynchronised pipes: the exit-save asks no worker)."""
        run_dir = tmp_path / "run"
        proc = start(["train", str(slow_pipeline), "--run-dir", str(run_dir)])
        wait_for_rows(proc, run_dir, 2)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)  # a third one, during shutdown: only a message
        code, _, err = finish(proc)
        assert code == 130, err
        assert "Traceback" not in err and "Error" not in err
        saved = load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"]
        assert saved in (rows(run_dir), rows(run_dir) - 1) and saved >= 2
        no_leftovers(proc.pid)
        pipeline = run_dir / "pipeline.toml"
        pipeline.write_text(re.sub(r"total_env_steps = [0-9_]+", f"total_env_steps = {(saved + 1) * 20}", pipeline.read_text()))
        resumed = start(["train", "--resume", str(run_dir)])
        code, out, err = finish(resumed)
        assert code == 0, err
        assert f"at iteration {saved} " in out
        assert [int(r["iteration"]) for r in read_metrics(run_dir / "metrics.csv")] == list(range(1, saved + 2))

    @pytest.mark.slow
    def test_worker_killed_keeps_the_work_done(self, slow_pipeline: Path, tmp_path: Path) -> None:
        """An env worker killed with SIGKILL: the real message, exit 2, and a checkpoint of the last whole
        iteration although none was scheduled; resume continues from it."""
        run_dir = tmp_path / "run"
        proc = start(["train", str(slow_pipeline), "--run-dir", str(run_dir)])
        wait_for_rows(proc, run_dir, 3)
        os.kill(workers(proc.pid)[-1], signal.SIGKILL)
        code, _, err = finish(proc)
        assert code == 2, err
        assert "Traceback" not in err and "vector env is closed" not in err
        assert "was killed by SIGKILL while stepping" in err
        saved = load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"]
        assert saved == rows(run_dir) >= 3
        no_leftovers(proc.pid)
        assert len(list_checkpoints(run_dir)) == 1

    @pytest.mark.slow
    def test_env_raising_in_a_worker(self, tmp_path: Path) -> None:
        """A custom env that raises inside a worker: its message, exit 2, the iterations done are saved."""
        pipeline = write_pipeline(tmp_path / "raises.toml", "raises", total_env_steps=400, every=1000,
                                  env={"at": 45}, backend="subprocess", workers=2)
        run_dir = tmp_path / "run"
        code, _, err = finish(start(["train", str(pipeline), "--run-dir", str(run_dir)]))
        assert code == 2
        assert "raised RuntimeError: the simulator lost its licence while stepping" in err
        assert "Traceback" not in err
        assert load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"] == rows(run_dir) == 4


def test_worker_dies_during_the_update_before_a_scheduled_save(tmp_path: Path) -> None:
    """A worker that dies while the networks update: the scheduled checkpoint's query of the envs fails,
    and the exit-save takes the state of the last whole collect instead of asking the closed env."""
    from harl.errors import EnvCrashedError
    from harl.run.lifecycle import start_run

    pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=200, every=2, backend="subprocess", workers=2)
    trainer, _ = start_run(pipeline, [], tmp_path / "run")
    update = trainer.stages.updater.update
    calls = []

    def update_then_kill(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            pid = trainer.stages.venv._workers[1].process.pid
            os.kill(pid, signal.SIGKILL)
            trainer.stages.venv._workers[1].process.join(5)
        return update(*args, **kwargs)

    trainer.stages.updater.update = update_then_kill
    try:
        with pytest.raises(EnvCrashedError, match=r"worker 1 \(hosting env 1\) was killed by SIGKILL"):
            trainer.train(quiet=True)
    finally:
        trainer.stages.close()
    saved = load_checkpoint(latest_checkpoint(tmp_path / "run"))
    assert saved["counters"]["iteration"] == 2
    assert [s["seed"] for s in saved["collector"]["episode_starts"]] == [None, None]


class TestNoRace:
    """After a first stop signal, no later one can kill the process before it exits with the first's status."""

    @pytest.fixture(autouse=True)
    def clean(self) -> Iterator[None]:
        signals.reset()
        yield
        signals.reset()

    def test_a_signal_after_the_block_is_ignored(self) -> None:
        """A SIGTERM, then a SIGINT and a SIGTERM after the handlers' block ended: ignored (SIG_IGN, which
        survives Python's shutdown), no KeyboardInterrupt, the SIGTERM stays the first (what the process
        exits with); a later block (the exit-save) still handles them with a message."""
        said: list[str] = []
        with signals.GracefulStop(said.append) as stop:
            os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested and stop.signum == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert signals.first_signal() == signal.SIGTERM
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN and signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        with stop:
            stop.shutting_down()
            os.kill(os.getpid(), signal.SIGINT)
        assert said[-1].startswith("Ctrl-C: already stopping")
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN

    def test_without_a_signal_the_previous_handlers_come_back(self) -> None:
        """A block that saw no signal puts the handlers back as they were (pytest's own, here)."""
        before = signal.getsignal(signal.SIGINT)
        with signals.GracefulStop(print):
            pass
        assert signal.getsignal(signal.SIGINT) is before

    def test_stop_now_only_once(self) -> None:
        """The second signal stops at once (KeyboardInterrupt); a third one, landing in the exit that follows,
        only prints a message."""
        said: list[str] = []
        with pytest.raises(KeyboardInterrupt), signals.GracefulStop(said.append):
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        with signals.GracefulStop(said.append) as stop:  # the trainer's exit-save re-enters its block
            stop.shutting_down()
            os.kill(os.getpid(), signal.SIGINT)
        assert said[-1].startswith("Ctrl-C: already stopping")

    def test_stop_waiting(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A wait gives up only once a stop was requested STOP_WAIT_S ago and the wait itself lasted that long."""
        assert not signals.stop_waiting(1e9)
        signals._note(signal.SIGTERM, request=True)
        assert not signals.stop_waiting(10.0)  # requested just now
        monkeypatch.setattr(signals, "_requested_at", time.monotonic() - 10)
        assert signals.stop_waiting(signals.STOP_WAIT_S) and not signals.stop_waiting(0.5)


@pytest.mark.parametrize(("first", "gap"), [
    pytest.param(signal.SIGINT, 0.01, marks=pytest.mark.slow), (signal.SIGINT, 0.3),
    pytest.param(signal.SIGTERM, 0.05, marks=pytest.mark.slow), pytest.param(signal.SIGTERM, 0.5, marks=pytest.mark.slow),
])
def test_two_signals_exit_with_the_first_ones_status(first: int, gap: float, tmp_path: Path) -> None:
    """Two signals GAP s apart (then SIGINT, as an impatient Ctrl-C) to a real run: exit 130 or 143 for the
    first one, never killed by the second (-2, -15), a loadable checkpoint, no leftovers."""
    pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=4000, every=1000, env={"sleep": 0.02},
                              backend="subprocess", workers=2)
    run_dir = tmp_path / "run"
    proc = start(["train", str(pipeline), "--run-dir", str(run_dir)])
    wait_for_rows(proc, run_dir, 1)
    os.killpg(proc.pid, first)
    time.sleep(gap)
    os.killpg(proc.pid, signal.SIGINT)
    code, _, err = finish(proc)
    assert code == exit_status(first), err
    assert "Traceback" not in err
    load_checkpoint(latest_checkpoint(run_dir))
    no_leftovers(proc.pid)


class TestHungWorker:
    def test_one_sigterm_stops_a_run_waiting_on_a_hung_worker(self, tmp_path: Path) -> None:
        """An env whose step() never returns (default 300 s timeout): one SIGTERM stops the run within seconds,
        exit 143, a checkpoint of the last whole iteration, no leftovers; once the env is fixed, --resume goes on."""
        hang = tmp_path / "hang"
        hang.touch()
        pipeline = write_hung_pipeline(tmp_path / "p.toml", hang_at=25, hang_file=hang, total_env_steps=100)
        run_dir = tmp_path / "run"
        proc = start(["train", str(pipeline), "--run-dir", str(run_dir)])
        wait_for_rows(proc, run_dir, 2)
        time.sleep(1.0)  # iteration 3 steps each env a 25th time: hung from here on
        assert rows(run_dir) == 2
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        code, out, err = finish(proc)
        assert time.monotonic() - started < 15
        assert code == 143, err
        assert "Traceback" not in err
        assert load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"] == 2
        no_leftovers(proc.pid)
        hang.unlink()
        code, out, err = finish(start(["train", "--resume", str(run_dir)]))
        assert code == 0, err
        assert [int(r["iteration"]) for r in read_metrics(run_dir / "metrics.csv")] == list(range(1, 6))

    @pytest.mark.slow
    def test_timeout_checkpoints_the_last_whole_iteration(self, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
        """The step timeout expires ([collector] step_timeout_s = 1 here): exit 2 naming the worker, its envs and
        the factory, and a checkpoint of the last whole iteration although none was scheduled."""
        from harl.cli import main

        pipeline = write_hung_pipeline(tmp_path / "p.toml", hang_at=25, total_env_steps=100, step_timeout_s=1.0)
        run_dir = tmp_path / "run"
        assert main(["train", str(pipeline), "--run-dir", str(run_dir), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.startswith('harl: Environment worker 0 (hosting env 0) did not answer within 1 s while stepping '
                              '(python env "tests.fakes.hung_env:make"); it was killed.')
        assert load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"] == 2
        assert rows(run_dir) == 2
