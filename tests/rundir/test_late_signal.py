"""A stop signal that lands after the command is done (its run finished and closed, ``main`` returned,
Python shutting down) leaves the process's exit status the command's: never -2 (killed by SIGINT)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harl.rundir import signals

ROOT = Path(__file__).parents[2]
LATE = """
import os, signal, sys
sys.argv = ["harl", *sys.argv[1:]]
from harl.cli import main
status = main()
os.kill(os.getpid(), signal.{name})  # after the run: a Ctrl-C (or SIGTERM) before the process is gone
print("status", status, flush=True)
sys.exit(status)
"""


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_signal_after_a_finished_run_keeps_exit_0(tmp_path: Path, name: str) -> None:
    pytest.importorskip("mpe2")
    pipeline = ROOT / "pipelines" / "happo_mpe_spread.toml"
    args = [str(pipeline), "--set", "run.total_env_steps=40", "--set", "collector.n_envs=2", "--set",
            "collector.rollout_length=10", "--set", "collector.backend=inline", "--set", "evaluator.episodes=1",
            "--set", "evaluator.n_envs=1", "--set", "logging.progress=false", "--run-dir", str(tmp_path / "run")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", LATE.format(name=name), "train", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "status 0" in done.stdout and "Traceback" not in done.stderr


def test_ignore_until_exit_is_undone_by_reset() -> None:
    before = {s: signal.getsignal(s) for s in signals.STOP_SIGNALS}
    try:
        signals.ignore_until_exit()
        assert all(signal.getsignal(s) is signal.SIG_IGN for s in signals.STOP_SIGNALS)
        signals.reset()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
