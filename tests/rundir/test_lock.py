"""One writer per run directory: a live writer's lock refuses a second, a dead one's never blocks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import harl
from harl.cli import main
from harl.rundir.lock import RunLockedError, take
from tests.api.test_api import ROOT, TABLES

HOLD = "import sys, time; from pathlib import Path; from harl.rundir.lock import take; " \
       "lock = take(Path(sys.argv[1])); print('held', flush=True); time.sleep(120)"


def test_a_second_lock_in_one_process_is_refused_until_released(tmp_path: Path) -> None:
    """The message names this process and host; after release the directory can be taken again."""
    lock = take(tmp_path)
    with pytest.raises(RunLockedError) as error:
        take(tmp_path)
    assert f"is being written by PID {os.getpid()} on {socket.gethostname()};" in str(error.value)
    lock.release()
    take(tmp_path).release()


def test_a_live_writer_in_another_process_refuses_train_and_resume(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """While another process holds D: train --run-dir D and --resume D exit 2 naming its PID; eval reads D.
    Once that process is killed (-9, its lock file left behind), resume goes ahead."""
    run = tmp_path / "run"
    harl.train(TABLES, run_dir=run, max_iterations=1)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        capsys.readouterr()
        assert main(["train", "--resume", str(run)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"harl: {run}: this run is being written by PID {holder.pid} on ")
        (tmp_path / "p.toml").write_text("")
        assert main(["train", str(tmp_path / "p.toml"), "--run-dir", str(run)]) == 2
        assert f"is being written by PID {holder.pid} on " in capsys.readouterr().err
        assert main(["eval", str(run), "--episodes", "1"]) == 0  # readers never take the lock
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (run / ".lock").is_file()  # stale: its holder is dead
    assert main(["train", "--resume", str(run)]) == 0
    assert [r["iteration"] for r in harl.read_metrics(run)] == [1, 2, 3]
