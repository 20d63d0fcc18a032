"""harl train --seeds/--grid --ray on a real local Ray: in this process, and on a two-node
cluster of ``ray start`` processes where a killed worker's trial resumes from its checkpoint."""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harl.cli import main
from harl.logging.csv_log import read_metrics
from tests.fakes.bad_env import write_pipeline
from tests.ray_cluster import LocalCluster, needs_ray, ray_cluster, ray_local  # noqa: F401

pytestmark = needs_ray
WALL_CLOCK = ("wall_time", "steps_per_s")
ROOT = Path(__file__).parents[2]


def rows(run_dir: Path) -> list[dict[str, str]]:
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in read_metrics(run_dir / "metrics.csv")]


def trials_csv(sweep_dir: Path) -> list[dict[str, str]]:
    with (sweep_dir / "trials.csv").open() as f:
        return list(csv.DictReader(f))


def local_sweep(pipeline: Path, sweep_dir: Path, *args: str) -> Path:
    """The same sweep in this process, for comparison."""
    assert main(["train", str(pipeline), *args, "--run-dir", str(sweep_dir), "--quiet"]) in (0, 1)
    return sweep_dir


def test_in_process_ray_writes_the_local_metrics(ray_local: None, tmp_path: Path,  # noqa: F811
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """With Ray already initialised (2 CPUs) the sweep uses it and leaves it connected; each trial
    writes the metrics of the local run; a harl error is reported with its message, not retried."""
    import ray

    pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=60, env={"at": 25})
    grid = ["--grid", "env.kwargs.mode=ok,nan_reward", "--seeds", "1"]
    assert main(["train", str(pipeline), *grid, "--ray", "--run-dir", str(tmp_path / "ray"), "--quiet"]) == 1
    assert ray.is_initialized()
    out = capsys.readouterr().out
    assert "Ray: 1 node(s), 2 CPUs, 0 GPUs" in out
    assert 'seed 1 (mode=nan_reward) failed: python env "tests.fakes.bad_env:make", environment 0' in out
    found = trials_csv(tmp_path / "ray")
    assert [(r["status"], r["retries"]) for r in found] == [("finished", "0"), ("failed", "0")]
    local = local_sweep(pipeline, tmp_path / "local", *grid)
    for name in (r["run_dir"] for r in found):
        assert rows(tmp_path / "ray" / name) == rows(local / name)
    log = (tmp_path / "ray" / found[0]["run_dir"] / "train.log").read_text()
    assert re.match(r"process \d+ on .+\nstarting .+\nfinished: 3 iterations, 60 env steps in \d+ s\n$", log)


def _sweep_process(pipeline: Path, cluster: LocalCluster, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "harl", "train", str(pipeline), "--seeds", "1,2", "--ray",
                             cluster.address, "--quiet", *args], cwd=ROOT, text=True, env=cluster.env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _wait_for_checkpoint(run_dir: Path, iteration: int, process: subprocess.Popen[str], timeout: float = 120) -> None:
    """Until the run has a checkpoint at ``iteration`` or later (older ones are pruned as it goes on)."""
    deadline = time.monotonic() + timeout

    def reached() -> bool:
        return any(int(p.stem[5:]) >= iteration for p in (run_dir / "checkpoints").glob("iter_*.pt"))

    while not reached():
        assert process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline, f"no checkpoint {iteration} in {timeout} s"
        time.sleep(0.1)


@pytest.mark.slow
def test_two_nodes_a_killed_worker_resumes_from_its_checkpoint(ray_cluster: LocalCluster,  # noqa: F811
                                                               tmp_path: Path) -> None:
    """Two trials on a head and a worker node (1 CPU each); kill -9 of one trial's Ray worker after
    its checkpoint 2: the trial runs again from that checkpoint, and both trials end with the
    metrics of the uninterrupted local runs."""
    # 0.03 s per env step: a trial lasts ~10 s, so both are still running when Ctrl-C comes
    # (at 0.01 a loaded CI machine once saw both trials finish while the test waited for the later one)
    pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=300, env={"sleep": 0.03})
    sweep_dir = tmp_path / "ray"
    process = _sweep_process(pipeline, ray_cluster, "--run-dir", str(sweep_dir))
    victim = sweep_dir / "run-s1"
    _wait_for_checkpoint(victim, 2, process)
    pid = int((victim / "train.log").read_text().split()[1])
    os.kill(pid, signal.SIGKILL)
    out, _ = process.communicate(timeout=240)
    assert process.returncode == 0, out
    assert "Ray: 2 node(s), 2 CPUs, 0 GPUs" in out
    assert re.search(r"seed 1: its Ray worker died \(\w+\); retry 1/2 resumes at iteration [2-9]", out), out
    found = trials_csv(sweep_dir)
    assert [(r["seed"], r["status"], r["retries"]) for r in found] == [("1", "finished", "1"), ("2", "finished", "0")]
    started = [int(i) for i in found[0]["started_at"].split(";")]
    assert started[0] == 0 and started[1] >= 2
    assert f"resuming {victim} at iteration {started[1]}" in (victim / "train.log").read_text()
    local = local_sweep(pipeline, tmp_path / "local", "--seeds", "1,2")
    for name in ("run-s1", "run-s2"):
        assert rows(sweep_dir / name) == rows(local / name)


@pytest.mark.slow
def test_two_nodes_ctrl_c_then_resume_the_sweep(ray_cluster: LocalCluster, tmp_path: Path) -> None:  # noqa: F811
    """Ctrl-C stops the running trials after their iteration with a checkpoint (exit 130);
    the same command with --resume SWEEP_DIR finishes them with the uninterrupted metrics."""
    # 0.03 s per env step: a trial lasts ~10 s, so both are still running when Ctrl-C comes
    # (at 0.01 a loaded CI machine once saw both trials finish while the test waited for the later one)
    pipeline = write_pipeline(tmp_path / "p.toml", total_env_steps=300, env={"sleep": 0.03})
    sweep_dir = tmp_path / "ray"
    process = _sweep_process(pipeline, ray_cluster, "--run-dir", str(sweep_dir))
    for name in ("run-s1", "run-s2"):  # Ray may start one trial later than the other
        _wait_for_checkpoint(sweep_dir / name, 2, process)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 130, out
    assert f"continue the sweep with: harl train --resume {sweep_dir.resolve()}" in out
    stopped = trials_csv(sweep_dir)
    assert {r["status"] for r in stopped} == {"stopped"}
    assert all(15 > int(r["env_steps"]) // 20 >= 2 for r in stopped)
    resumed = _sweep_process(pipeline, ray_cluster, "--resume", str(sweep_dir))
    out, _ = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, out
    assert [r["status"] for r in trials_csv(sweep_dir)] == ["finished", "finished"]
    local = local_sweep(pipeline, tmp_path / "local", "--seeds", "1,2")
    for name in ("run-s1", "run-s2"):
        assert rows(sweep_dir / name) == rows(local / name)
