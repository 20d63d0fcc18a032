"""A sweep locally (``--jobs 2``) and on a two-node Ray cluster, then the same on Ray with
kill -9 of trials' Ray workers at random moments.

    python benchmarks/sweep_backends.py --steps 200_000 --kills 5

1. ``harl train PIPELINE --seeds 1-4 --grid updater.objective.lr=5e-4,1e-3 --jobs 2``
   and the same with ``--ray ADDRESS`` on a head and a worker node started on this machine
   (``ray start``, 1 CPU each, as in tests/ray_cluster.py): wall times side by side, and
   every trial's metrics.csv compared (wall-clock columns aside).  Each trial runs its envs
   inline (``--set collector.backend=inline``): one CPU per trial, in both sweeps alike.
2. The Ray sweep again (checkpoints every ``--checkpoint-every`` iterations), killing the
   Ray worker process of a running trial ``--kills`` times at random moments: each trial's
   ``started_at`` (trials.csv: the iteration each attempt resumed from) is printed, and its
   metrics are compared with the local run's.

Prints one JSON line per figure, with the 1-minute load average.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT))
from tests.ray_cluster import LocalCluster, local_cluster  # noqa: E402

WALL_CLOCK = ("wall_time", "steps_per_s")


def metrics(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "metrics.csv").open(newline="") as f:
        return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in csv.DictReader(f)]


def trials(sweep_dir: Path) -> list[dict[str, str]]:
    with (sweep_dir / "trials.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def sweep(args: argparse.Namespace, sweep_dir: Path, *backend: str,
          env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "harl", "train", args.pipeline, "--seeds", args.seeds, "--grid", args.grid,
           "--quiet", "--run-dir", str(sweep_dir), *backend,
           "--set", f"run.total_env_steps={args.steps}",
           "--set", f"checkpoint.every_iterations={args.checkpoint_every}",
           *(a for override in args.set for a in ("--set", override))]
    return subprocess.Popen(cmd, cwd=ROOT, text=True, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def finish(process: subprocess.Popen[str], what: str) -> str:
    out, _ = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"{what} failed (exit {process.returncode}):\n{out[-3000:]}")
    return out


def report(**figure: object) -> None:
    print(json.dumps({**figure, "load": round(os.getloadavg()[0], 2)}), flush=True)


def compare(local: Path, other: Path, what: str) -> int:
    """The number of trials whose metrics differ from the local run's (printed)."""
    differ = 0
    for row in trials(other):
        same = metrics(other / row["run_dir"]) == metrics(local / row["run_dir"])
        differ += not same
        report(case=what, trial=row["run_dir"], status=row["status"], retries=row["retries"],
               started_at=row["started_at"], eval_return=row["eval_return"], metrics_equal_local=same)
    return differ


def running_pids(sweep_dir: Path) -> list[tuple[str, int]]:
    """(trial, pid) of each trial whose latest attempt's process is alive (train.log's
    ``process PID on HOST`` line) and has not finished."""
    found = []
    for log in sorted(sweep_dir.glob("*/train.log")):
        lines = log.read_text(errors="replace").splitlines()
        starts = [line for line in lines if line.startswith("process ")]
        if not starts or any(line.startswith("finished") for line in lines[lines.index(starts[-1]):]):
            continue
        pid = int(starts[-1].split()[1])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        found.append((log.parent.name, pid))
    return found


def with_kills(args: argparse.Namespace, cluster: LocalCluster, sweep_dir: Path) -> list[str]:
    """Run the Ray sweep and kill -9 a running trial's worker ``args.kills`` times."""
    rng = random.Random(args.kill_seed)
    process = sweep(args, sweep_dir, "--ray", cluster.address, "--max-retries", str(args.kills),
                    env=cluster.env)
    killed: list[str] = []
    while len(killed) < args.kills and process.poll() is None:
        time.sleep(rng.uniform(args.kill_every / 2, args.kill_every * 1.5))
        candidates = running_pids(sweep_dir)
        if candidates:
            name, pid = rng.choice(candidates)
            os.kill(pid, signal.SIGKILL)
            killed.append(name)
            report(case="kill -9", trial=name, pid=pid)
    finish(process, "the Ray sweep with kills")
    return killed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pipeline", default="pipelines/happo_mpe_spread.toml")
    p.add_argument("--steps", type=lambda v: int(v.replace("_", "")), default=200_000)
    p.add_argument("--seeds", default="1-4")
    p.add_argument("--grid", default="updater.objective.lr=5e-4,1e-3")
    p.add_argument("--checkpoint-every", type=int, default=5)
    p.add_argument("--set", action="append", default=["collector.backend=inline"],
                   help="pipeline overrides for every trial (default: the envs inline, one CPU per trial, "
                        "as each node of the local cluster has one)")
    p.add_argument("--kills", type=int, default=5)
    p.add_argument("--kill-every", type=float, default=40.0, help="mean seconds between kills")
    p.add_argument("--kill-seed", type=int, default=0)
    p.add_argument("--out", help="keep the sweep directories here (default: a temporary directory)")
    args = p.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="sweep-backends-"))
    differ = 0
    t0 = time.perf_counter()
    finish(sweep(args, out / "local", "--jobs", "2"), "the local sweep")
    report(case="local --jobs 2", wall_s=round(time.perf_counter() - t0, 1))
    with local_cluster() as cluster:
        t0 = time.perf_counter()
        finish(sweep(args, out / "ray", "--ray", cluster.address, env=cluster.env), "the Ray sweep")
        report(case="ray, 2 nodes x 1 CPU", wall_s=round(time.perf_counter() - t0, 1))
        differ += compare(out / "local", out / "ray", "ray")
        if args.kills:
            t0 = time.perf_counter()
            killed = with_kills(args, cluster, out / "ray-kills")
            report(case="ray with kill -9", kills=len(killed), wall_s=round(time.perf_counter() - t0, 1))
            differ += compare(out / "local", out / "ray-kills", "ray with kill -9")
    report(case="summary", trials_differing_from_local=differ, dirs=str(out))
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
