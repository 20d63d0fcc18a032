"""A sweep's or suite's driver under signals: SIGTERM is Ctrl-C (the trials stop after their iteration
with a checkpoint, exit 143), a SIGINT sent to the driver alone reaches the trials (exit 130), a
driver killed with SIGKILL leaves no trial running, and a resume waits for (or names) a run another
process still writes instead of failing its trial and writing half-finished results as final."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harl.cli import main
from harl.rundir.lock import RunLockedError, take
from harl.rundir.signals import reset
from tests.fakes.bad_env import write_pipeline

ROOT = Path(__file__).resolve().parents[2]


def _until(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def _driver(*args: str) -> subprocess.Popen[str]:
    """``harl ARGS...`` in its own process (and session: the test's own group gets no signal)."""
    return subprocess.Popen([sys.executable, "-m", "harl", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def _checkpointed(*run_dirs: Path) -> bool:
    return all((d / "checkpoints").is_dir() and any((d / "checkpoints").glob("iter_*.pt")) for d in run_dirs)


def _pid(run_dir: Path) -> int:
    """The trial process's PID, from the first line of its train.log ("process PID on HOST")."""
    return int((run_dir / "train.log").read_text().split()[1])


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _free(run_dir: Path) -> bool:
    try:
        with take(run_dir):
            return True
    except RunLockedError:
        return False


def _statuses(sweep_dir: Path) -> list[str]:
    with (sweep_dir / "trials.csv").open(newline="") as f:
        return [row["status"] for row in csv.DictReader(f)]


def test_sigterm_to_a_jobs_driver_stops_its_trials_after_their_iteration(tmp_path: Path) -> None:
    """kill -TERM of harl train --seeds 1,2 --jobs 2: it exited -15 and its trials ran on; now each trial
    stops after its iteration with a checkpoint, none is left running, and the driver exits 143."""
    pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=20_000, env={"sleep": 0.01})
    sweep_dir = tmp_path / "sweep"
    runs = [sweep_dir / "run-s1", sweep_dir / "run-s2"]
    driver = _driver("train", str(pipeline), "--seeds", "1,2", "--jobs", "2", "--run-dir", str(sweep_dir))
    assert _until(lambda: _checkpointed(*runs), 180), driver.communicate()[0]
    pids = [_pid(d) for d in runs]
    driver.send_signal(signal.SIGTERM)
    out = driver.communicate(timeout=120)[0]
    assert driver.returncode == 143, out
    assert "SIGTERM: the running trials stop after their iteration, with a checkpoint" in " ".join(out.split())
    assert not any(_alive(pid) for pid in pids)
    assert _statuses(sweep_dir) == ["stopped", "stopped"]
    for run_dir in runs:
        log = (run_dir / "train.log").read_text()
        assert "SIGTERM: stopping after this iteration, with a checkpoint" in log and "stopped: " in log
    assert f"continue the sweep with: harl train --resume {sweep_dir.resolve()}" in out


def _suite(tmp_path: Path, steps: int) -> Path:
    pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=steps, env={"sleep": 0.01})
    path = tmp_path / "suite.toml"
    path.write_text(f'[suite]\nname = "s"\n\n[[entry]]\nname = "a"\npipeline = "{pipeline}"\nseeds = [1, 2]\n'
                    f'budget = {steps}\nmetric = "train_return"\n', encoding="utf-8")
    return path


def test_sigint_to_the_suite_driver_alone_reaches_its_trials(tmp_path: Path) -> None:
    """kill -INT of the suite's driver only (not its process group): it printed the Ctrl-C notice but its
    trials ran to their end and it exited 0; now they stop after their iteration, the driver exits 130
    and the results say incomplete, with no comparison or curves of half-finished runs."""
    out_dir = tmp_path / "out"
    runs = [out_dir / "a" / "run-s1", out_dir / "a" / "run-s2"]
    driver = _driver("suite", str(_suite(tmp_path, 20_000)), "--out", str(out_dir), "--jobs", "2")
    assert _until(lambda: _checkpointed(*runs), 180), driver.communicate()[0]
    os.kill(driver.pid, signal.SIGINT)
    out = driver.communicate(timeout=120)[0]
    assert driver.returncode == 130, out
    assert "Ctrl-C: the running trials stop after their iteration" in " ".join(out.split())
    assert _statuses(out_dir / "a") == ["stopped", "stopped"]
    results = json.loads((out_dir / "results.json").read_text())
    assert not results["passed"] and not results["complete"] and results["entries"][0]["verdict"] == "incomplete"
    assert not (out_dir / "curves").exists() and not (out_dir / "marl_eval.json").exists()
    assert "**Incomplete**: 2 runs have not finished" in (out_dir / "results.md").read_text()
    assert f"continue the suite with: harl suite --resume {out_dir.resolve()}" in out


@pytest.mark.slow
def test_a_driver_killed_with_sigkill_leaves_no_trial_and_the_resume_completes(tmp_path: Path) -> None:
    """kill -9 of a --jobs 2 suite driver: its trials (8 processes with their env workers) ran on as
    orphans and the resume failed both seeds on their locks; now each trial gets SIGTERM from the
    kernel, stops after its iteration with a checkpoint and frees its lock, and the resume completes."""
    out_dir = tmp_path / "out"
    runs = [out_dir / "a" / "run-s1", out_dir / "a" / "run-s2"]
    driver = _driver("suite", str(_suite(tmp_path, 1200)), "--out", str(out_dir), "--jobs", "2")
    assert _until(lambda: _checkpointed(*runs), 180), driver.communicate()[0]
    pids = [_pid(d) for d in runs]
    driver.kill()
    driver.communicate(timeout=60)
    assert _until(lambda: not any(_alive(pid) for pid in pids), 30), "a trial outlived its driver"
    assert all(_free(d) for d in runs)
    for run_dir in runs:
        assert "SIGTERM: stopping after this iteration" in (run_dir / "train.log").read_text()
    try:
        assert main(["suite", "--resume", str(out_dir), "--quiet", "--reps", "200"]) == 0
    finally:
        reset()
    results = json.loads((out_dir / "results.json").read_text())
    assert results["complete"] and [s["status"] for s in results["entries"][0]["per_seed"].values()] == [
        "finished", "finished"]
    assert all(s["env_steps"] == 1200 for s in results["entries"][0]["per_seed"].values())


def _stopped_sweep(tmp_path: Path) -> tuple[Path, Path]:
    """A finished 2-seed sweep whose seed 1 looks stopped after its first checkpoint."""
    pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=60)
    sweep_dir = tmp_path / "sweep"
    assert main(["train", str(pipeline), "--seeds", "1,2", "--run-dir", str(sweep_dir), "--quiet"]) == 0
    for late in ("iter_0000002.pt", "iter_0000003.pt"):
        (sweep_dir / "run-s1" / "checkpoints" / late).unlink()
    trials = sweep_dir / "trials.csv"
    trials.write_text(trials.read_text().replace(",1,finished,", ",1,stopped,"))
    return sweep_dir, sweep_dir / "run-s1"


def test_a_resume_waits_for_a_run_another_process_still_writes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A resume started while a trial of the killed driver still holds its run (finishing its iteration)
    waits for it and then resumes the run, where the trial met the lock and failed."""
    sweep_dir, run_dir = _stopped_sweep(tmp_path)
    held = take(run_dir)
    threading.Timer(2.0, held.release).start()
    capsys.readouterr()
    assert main(["train", "--resume", str(sweep_dir), "--quiet"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"seed 1: {run_dir.resolve()} is still written by PID {os.getpid()} " in out
    assert _statuses(sweep_dir) == ["finished", "finished"]


def test_a_resume_names_what_still_holds_a_run_and_writes_no_results(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A run still held after the wait: one paragraph naming the run and its writer, exit 2, nothing run
    and no results written (the suite's resume used to fail both seeds and write results.json from
    half-finished runs)."""
    import harl.sweep.local as local

    monkeypatch.setattr(local, "HELD_WAIT_S", 1.0)
    sweep_dir, run_dir = _stopped_sweep(tmp_path)
    with take(run_dir):
        assert main(["train", "--resume", str(sweep_dir), "--quiet"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith(f"harl: 1 run(s) are still written by another process after 1 s: {run_dir.resolve()} by "
                          f"PID {os.getpid()} on ")
    assert "Nothing was run: wait for that process to end" in err and "then run this --resume again" in err
    assert _statuses(sweep_dir) == ["stopped", "finished"]
    assert not (run_dir / "checkpoints" / "iter_0000002.pt").exists()
