"""Fault battery: stop real ``harl train`` runs at random instants and check what survives.

    python benchmarks/faults.py [--trials 20] [--faults kill9,sigterm,ctrlc2,worker9] [--out DIR]

Each trial starts ``python -m harl train`` on a tiny pipeline (the test env of
``tests/fakes/bad_env.py``, 2 subprocess env workers, about 0.1 s per iteration,
a checkpoint every 2 iterations), waits for its first iteration, then after a random
0-1.5 s delivers one fault:

- ``kill9``: SIGKILL to the trainer (its workers must notice and exit);
- ``sigterm``: SIGTERM to the trainer (a scheduler's stop);
- ``ctrlc2``: SIGINT to the process group twice, 0-0.3 s apart (an impatient Ctrl-C);
- ``worker9``: SIGKILL to one env worker (an env crash).

Then it reads the newest checkpoint, counts the iterations in metrics.csv that it does
not hold (iterations lost; the iteration running when the fault hit is not counted,
it was never finished), looks for processes left in the run's process group, greps
stderr for tracebacks, and resumes the run in this process for one more iteration
(resumed-ok: exit 0 and metrics.csv holds iterations 1..n exactly once).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from harl.cli import main  # noqa: E402
from harl.errors import HarlError  # noqa: E402
from harl.logging.csv_log import read_metrics  # noqa: E402
from harl.run.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint  # noqa: E402
from tests.fakes.bad_env import write_pipeline  # noqa: E402
from tests.procs import group, workers  # noqa: E402

FAULTS = ("kill9", "sigterm", "ctrlc2", "worker9")
EVERY = 2
"""Checkpoint interval of the battery's pipeline (kill -9 may lose up to EVERY - 1 iterations)."""


def rows(run_dir: Path) -> list[int]:
    path = run_dir / "metrics.csv"
    return [int(r["iteration"]) for r in read_metrics(path)] if path.is_file() else []


def trial(fault: str, pipeline: Path, run_dir: Path, rng: random.Random) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "harl", "train", str(pipeline), "--run-dir", str(run_dir),
                             "--quiet"], cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            # a battery started in the background inherits SIGINT ignored, which
                            # harl keeps ignored: give the trainer Python's default back
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler))
    deadline = time.monotonic() + 120
    while not rows(run_dir) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(rng.uniform(0, 1.5))
    if proc.poll() is None:
        if fault == "kill9":
            proc.send_signal(signal.SIGKILL)
        elif fault == "sigterm":
            proc.send_signal(signal.SIGTERM)
        elif fault == "ctrlc2":
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(rng.uniform(0, 0.3))
            os.killpg(proc.pid, signal.SIGINT)
        else:
            found = workers(proc.pid)
            if found:
                os.kill(rng.choice(found), signal.SIGKILL)
    try:
        _, err = proc.communicate(timeout=60)
        hung = False
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        hung = True
    time.sleep(0.5)  # workers of a killed trainer see EOF and exit; give them a moment
    left = group(proc.pid)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    done = rows(run_dir)
    result: dict[str, Any] = {"code": proc.returncode, "traceback": "Traceback" in err, "hung": hung,
                              "left": len(left), "rows": len(done), "corrupt": False, "saved": None,
                              "resumed": None, "err": err.strip().splitlines()[-1:] if err.strip() else []}
    if not list_checkpoints(run_dir):
        return result
    try:
        saved = load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"]
    except HarlError:
        result["corrupt"] = True
        return result
    result["saved"] = saved
    result["lost"] = max(done, default=0) - saved
    pipeline_file = run_dir / "pipeline.toml"
    pipeline_file.write_text(re.sub(r"total_env_steps = [0-9_]+", f"total_env_steps = {(saved + 1) * 20}",
                                    pipeline_file.read_text()))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["train", "--resume", str(run_dir), "--quiet"])
    result["resumed"] = code == 0 and rows(run_dir) == list(range(1, saved + 2))
    return result


def main_(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temp dir)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    out = args.out or Path(tempfile.mkdtemp(prefix="harl-faults-"))
    out.mkdir(parents=True, exist_ok=True)
    pipeline = write_pipeline(out / "faults.toml", total_env_steps=100_000, every=EVERY,
                              env={"sleep": 0.01}, backend="subprocess", workers=2)
    results: dict[str, list[dict[str, Any]]] = defaultdict(list)
    started = time.monotonic()
    for fault in args.faults.split(","):
        for k in range(args.trials):
            results[fault].append(trial(fault, pipeline, out / f"{fault}-{k:02d}", rng))
    print(f"{args.trials} trials per fault, checkpoint every {EVERY} iterations, "
          f"{time.monotonic() - started:.0f} s; load: {os.getloadavg()[0]:.2f}")
    print(f"{'fault':8} {'exit codes':22} {'resumed-ok':>10} {'no ckpt':>7} {'corrupt':>7} {'lost (max)':>10} "
          f"{'traceb.':>7} {'left':>4} {'hung':>4}")
    for fault, trials in results.items():
        codes = ",".join(f"{c}x{n}" for c, n in sorted(_count(t["code"] for t in trials).items()))
        lost = [t["lost"] for t in trials if t.get("lost") is not None]
        print(f"{fault:8} {codes:22} {sum(bool(t['resumed']) for t in trials):>10} "
              f"{sum(t['saved'] is None and not t['corrupt'] for t in trials):>7} "
              f"{sum(t['corrupt'] for t in trials):>7} {f'{sum(lost)} ({max(lost, default=0)})':>10} "
              f"{sum(t['traceback'] for t in trials):>7} {sum(t['left'] for t in trials):>4} "
              f"{sum(t['hung'] for t in trials):>4}")
    for fault, trials in results.items():
        for k, t in enumerate(trials):
            if t["traceback"] or t["corrupt"] or t["left"] or t["hung"] or t["resumed"] is False:
                print(f"  {fault} #{k}: {t}")


def _count(values: Any) -> dict[Any, int]:
    counts: dict[Any, int] = defaultdict(int)
    for v in values:
        counts[v] += 1
    return dict(counts)


if __name__ == "__main__":
    main_()
