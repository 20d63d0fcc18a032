"""Issue 38: an env stepped in this process (the inline backend) that hangs.  One SIGTERM (or
Ctrl-C) stops the run within seconds with the last whole iteration's checkpoint and 143 / 130;
``step_timeout_s`` applies to it as to a worker; a hang inside C code ends with the watchdog's
hard exit (the status the signal asked for, the newest checkpoint kept)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from harl.logging.csv_log import read_metrics
from harl.rundir.checkpoint import latest_checkpoint, load_checkpoint
from tests.fakes.hung_env import write_hung_pipeline
from tests.rundir.test_signals import finish, rows, start, wait_for_rows


def hung_run(tmp_path: Path, sig: int, factory: str = "", every: int = 1000) -> tuple[Path, float, int, str]:
    """A run whose envs hang at their 25th step (iteration 3), stopped with one ``sig``: (run dir,
    seconds from the signal to the exit, exit status, stderr)."""
    hang = tmp_path / "hang"
    hang.touch()
    pipeline = write_hung_pipeline(tmp_path / "p.toml", hang_at=25, hang_file=hang, total_env_steps=100,
                                   every=every, backend="inline")
    if factory:
        pipeline.write_text(pipeline.read_text().replace("tests.fakes.hung_env:make", factory))
    run_dir = tmp_path / "run"
    proc = start(["train", str(pipeline), "--run-dir", str(run_dir)])
    wait_for_rows(proc, run_dir, 2)
    time.sleep(1.0)  # iteration 3 steps each env a 25th time: hung from here on
    assert rows(run_dir) == 2
    proc.send_signal(sig)
    started = time.monotonic()
    code, _, err = finish(proc)
    return run_dir, time.monotonic() - started, code, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)])
def test_one_signal_stops_a_hung_inline_env(sig: int, tmp_path: Path) -> None:
    """One SIGTERM / Ctrl-C: stopped within 30 s (3 s of grace for a slow step, then the watchdog
    interrupts the call), exit 128 + signal, the last whole iteration saved; once fixed, resume goes on."""
    run_dir, seconds, code, err = hung_run(tmp_path, sig)
    assert code == 128 + sig, err
    assert seconds < 30
    assert "Traceback" not in err
    assert ('Environment 0 (python env "tests.fakes.hung_env:make") while stepping did not return within 3 s '
            "of the stop request; it was interrupted") in err
    assert load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"] == 2
    (tmp_path / "hang").unlink()
    code, _, err = finish(start(["train", "--resume", str(run_dir)]))
    assert code == 0, err
    assert [int(r["iteration"]) for r in read_metrics(run_dir / "metrics.csv")] == list(range(1, 6))


def test_step_timeout_applies_to_inline_envs(tmp_path: Path) -> None:
    """collector.step_timeout_s = 1 on the inline backend: exit 2 naming the env, the last whole iteration saved."""
    pipeline = write_hung_pipeline(tmp_path / "p.toml", hang_at=25, total_env_steps=100, backend="inline",
                                   step_timeout_s=1.0)
    run_dir = tmp_path / "run"
    started = time.monotonic()
    code, _, err = finish(start(["train", str(pipeline), "--run-dir", str(run_dir)]))
    assert code == 2, err
    assert time.monotonic() - started < 60
    assert err.startswith('harl: Environment 0 (python env "tests.fakes.hung_env:make") while stepping did not '
                          "return within 1 s"), err
    assert "raise [collector] step_timeout_s for a slow simulator (0: no limit)" in err
    assert load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"] == 2 == rows(run_dir)


@pytest.mark.slow
def test_a_hang_in_c_code_ends_with_the_hard_exit(tmp_path: Path) -> None:
    """A deadlock inside C code (no signal handler can run): the watchdog's hard exit, 143, one line,
    the newest checkpoint (iteration 2) kept."""
    run_dir, seconds, code, err = hung_run(tmp_path, signal.SIGTERM, "tests.fakes.c_hung_env:make", every=1)
    assert code == 143, err
    assert seconds < 30
    assert "nor when interrupted (a hang inside C code, which Python cannot interrupt); exiting with 143" in err
    assert load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"] == 2
