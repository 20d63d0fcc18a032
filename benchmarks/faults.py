"""Fault battery: stop real ``harl train`` runs at random instants and check what survives.

    python benchmarks/faults.py [--trials 20] [--faults kill9,sigterm,ctrlc2,worker9,...] [--out DIR]

Each trial starts ``python -m harl train`` on a tiny pipeline (the test env of
``tests/fakes/bad_env.py``, 2 subprocess env workers, about 0.1 s per iteration,
a checkpoint every 2 iterations), waits for its first iteration, then after a random
0-1.5 s delivers one fault:

- ``kill9``: SIGKILL to the trainer (its workers must notice and exit);
- ``sigterm``: SIGTERM to the trainer (a scheduler's stop);
- ``ctrlc2``: SIGINT to the process group twice, 0-0.3 s apart (an impatient Ctrl-C);
- ``worker9``: SIGKILL to one env worker (an env crash);
- ``hung``: an env whose ``step()`` never returns from a random step of iteration 2-5 on
  (``tests/fakes/hung_env.py``), with a 2 s step timeout (``[collector] step_timeout_s``):
  exit 2 naming the worker expected;
- ``hungterm``: the same env with the default 300 s timeout, and one SIGTERM once the run
  hangs: exit 143 within seconds expected;
- ``diskfull``: the run on its own small tmpfs, filled at a random instant up to a random
  4-40 KB (room for metrics rows, not for a 52 KB checkpoint), so the next checkpoint
  fails inside ``torch.save``; where no tmpfs can be mounted, ``torch.save`` is patched
  to fail as torch's zip writer does on a full disk, at a random call ("patched" in the
  table).  Exit 2 expected; the iterations since the last checkpoint are lost by design
  (no write after a failed one);
- ``int2`` / ``term2``: two signals to the process group (SIGINT then SIGINT, SIGTERM then
  SIGINT), 0.01, 0.05, 0.1, 0.3 or 0.5 s apart (trial k takes the k-th gap, cyclically):
  exit 130 / 143 expected, never -2 or -15;
- ``writers2``: two ``harl train`` on one run directory at once; needs ``harl.rundir.lock``
  (the run-directory lock) and is skipped, with the reason, where it is absent.

The faults of issue 38:

- ``hunginl``: ``hungterm`` with ``collector.backend = "inline"`` (the env hangs in the
  trainer's own process): one SIGTERM, exit 143 within 30 s expected;
- ``exact2``: ``int2`` (even trials) or ``term2`` (odd ones) on a run of 30 iterations, resumed to its end and compared with an
  uninterrupted run of the same pipeline, row for row, wall-clock columns aside ("exact");
- ``ckpt0``: SIGKILL while the first checkpoint is written (``torch.save`` patched to write
  a few bytes and stall): ``--resume`` must start the run again in place (exit 0, rows 1..3);
- ``rmcsv``: ``metrics.csv`` removed at a random instant of a 30-iteration run: exit 0, a
  warning line, and all 30 rows in the file at the end.

Then it reads the newest checkpoint, counts the iterations in metrics.csv that it does
not hold (iterations lost; the iteration running when the fault hit is not counted,
it was never finished), looks for processes left in the run's process group, greps
stderr for tracebacks, and resumes the run in this process for one more iteration
(resumed-ok: exit 0 and metrics.csv holds iterations 1..n exactly once).  "leaked"
counts stderr lines of multiprocessing's resource tracker about leaked shared memory.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
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
from harl.rundir.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint  # noqa: E402
from tests.fakes.bad_env import write_pipeline  # noqa: E402
from tests.fakes.hung_env import write_hung_pipeline  # noqa: E402
from tests.procs import group, workers  # noqa: E402

FAULTS = ("kill9", "sigterm", "ctrlc2", "worker9", "hung", "hungterm", "diskfull", "int2", "term2", "writers2",
          "hunginl", "exact2", "ckpt0", "rmcsv")
FINITE = 30
"""Iterations of the ``exact2`` and ``rmcsv`` runs (20 env steps each)."""
WALL_CLOCK = ("wall_time", "steps_per_s")
_STALL = """
import torch, time
_save = torch.save
def _stall(obj, f, *a, **k):
    f.write(b"PK")
    f.flush()
    time.sleep(60)
torch.save = _stall
"""
EVERY = 2
"""Checkpoint interval of the battery's pipeline (kill -9 may lose up to EVERY - 1 iterations)."""
GAPS = (0.01, 0.05, 0.1, 0.3, 0.5)
"""Seconds between the two signals of ``int2`` and ``term2``."""
HUNG_TIMEOUT_S = 2.0
DISK = "2m"
"""Size of a ``diskfull`` trial's tmpfs."""
_ZIP_FULL = """
import errno, torch
_save, _calls = torch.save, [0]
def _full(obj, f, *a, **k):
    _calls[0] += 1
    if _calls[0] >= {at}:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534") from None
    return _save(obj, f, *a, **k)
torch.save = _full
"""


def rows(run_dir: Path) -> list[int]:
    path = run_dir / "metrics.csv"
    return [int(r["iteration"]) for r in read_metrics(path)] if path.is_file() else []


def mount(disk: Path) -> bool:
    disk.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(disk)],
                          capture_output=True, check=False).returncode == 0


def fill_but(disk: Path, free: int) -> None:
    """Fill ``disk``, then give ``free`` bytes back."""
    filler = disk / "filler"
    with filler.open("wb") as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    with contextlib.suppress(OSError):
        os.truncate(filler, max(0, filler.stat().st_size - free))


def start(argv: list[str], prelude: str = "") -> subprocess.Popen[str]:
    """``harl ARGV`` in its own session; ``prelude``: Python run before harl's main (a patch)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "harl", *argv] if not prelude else [
        sys.executable, "-c", f"{prelude}\nimport sys\nfrom harl.cli import main\nsys.exit(main({argv!r}))"]
    return subprocess.Popen(command, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True,
                            # a battery started in the background inherits SIGINT ignored, which
                            # harl keeps ignored: give the trainer Python's default back
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler))


def wait_rows(proc: subprocess.Popen[str], run_dir: Path, n: int = 1) -> None:
    deadline = time.monotonic() + 120
    while len(rows(run_dir)) < n and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)


def full_rows(run_dir: Path) -> list[dict[str, str]]:
    path = run_dir / "metrics.csv"
    return [{c: v for c, v in r.items() if c not in WALL_CLOCK} for r in read_metrics(path)] if path.is_file() else []


def finite(out: Path) -> Path:
    return write_pipeline(out / "finite.toml", total_env_steps=FINITE * 20, every=EVERY, env={"sleep": 0.01},
                          backend="subprocess", workers=2)


def reference(out: Path) -> list[dict[str, str]]:
    """The rows of an uninterrupted run of ``finite``'s pipeline (computed once)."""
    run_dir = out / "reference"
    if not (run_dir / "metrics.csv").is_file():
        proc = start(["train", str(finite(out)), "--run-dir", str(run_dir), "--quiet"])
        proc.communicate(timeout=600)
    return full_rows(run_dir)


def trial(fault: str, out: Path, k: int, pipeline: Path, rng: random.Random) -> dict[str, Any]:
    """One run, one fault; what survived (see the module docstring)."""
    run_dir, prelude, disk, hang, extra = out / f"{fault}-{k:02d}", "", None, None, ""
    if fault in ("hung", "hungterm", "hunginl"):
        hang = out / f"{fault}-{k:02d}.hang"
        hang.touch()
        pipeline = write_hung_pipeline(out / f"{fault}-{k:02d}.toml", hang_at=rng.randint(15, 45), hang_file=hang,
                                       total_env_steps=100_000, every=EVERY, sleep=0.01,
                                       **({"backend": "inline"} if fault == "hunginl" else {}),
                                       **({"step_timeout_s": HUNG_TIMEOUT_S} if fault == "hung" else {}))
    if fault == "diskfull":
        disk = out / f"{fault}-{k:02d}.disk"
        if mount(disk):
            run_dir = disk / "run"
            extra = "tmpfs"
        else:
            prelude = _ZIP_FULL.format(at=rng.randint(1, 4))
            extra = "patched"
    if fault == "writers2":
        return two_writers(pipeline, run_dir)
    if fault in ("exact2", "rmcsv"):
        pipeline = finite(out)
    if fault == "ckpt0":
        prelude = _STALL
    proc = start(["train", str(pipeline), "--run-dir", str(run_dir), "--quiet"], prelude)
    wait_rows(proc, run_dir)
    started = time.monotonic()
    if fault in ("hungterm", "hunginl"):  # wait until the rows stop coming (the env hangs), then one SIGTERM
        last, since = rows(run_dir), time.monotonic()
        while proc.poll() is None and time.monotonic() - since < 2.0 and time.monotonic() - started < 60:
            time.sleep(0.1)
            if rows(run_dir) != last:
                last, since = rows(run_dir), time.monotonic()
    elif fault == "ckpt0":  # until the first checkpoint's temp file is there, then kill -9
        while proc.poll() is None and not list((run_dir / "checkpoints").glob(".iter_*.tmp")) \
                and time.monotonic() - started < 60:
            time.sleep(0.02)
    elif fault not in ("hung",):
        time.sleep(rng.uniform(0, 1.5))
    if proc.poll() is None:
        if fault in ("kill9", "ckpt0"):
            proc.send_signal(signal.SIGKILL)
        elif fault in ("sigterm", "hungterm", "hunginl"):
            proc.send_signal(signal.SIGTERM)
        elif fault == "rmcsv":
            with contextlib.suppress(OSError):
                (run_dir / "metrics.csv").unlink()
        elif fault == "ctrlc2":
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(rng.uniform(0, 0.3))
            os.killpg(proc.pid, signal.SIGINT)
        elif fault in ("int2", "term2", "exact2"):
            first = signal.SIGINT if fault == "int2" or (fault == "exact2" and k % 2 == 0) else signal.SIGTERM
            os.killpg(proc.pid, first)
            time.sleep(GAPS[k % len(GAPS)])
            os.killpg(proc.pid, signal.SIGINT)
        elif fault == "worker9":
            found = workers(proc.pid)
            if found:
                os.kill(rng.choice(found), signal.SIGKILL)
        elif fault == "diskfull" and extra == "tmpfs":
            fill_but(disk, rng.randint(4, 40) * 1024)  # type: ignore[arg-type]
    signalled = time.monotonic()
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
                              "resumed": None, "leaked": "leaked shared_memory" in err, "extra": extra,
                              "stop_s": time.monotonic() - signalled,
                              "failed": ("checkpoint" if "cannot write the checkpoint" in err else
                                         "metrics" if "cannot write the metrics" in err else ""),
                              "err": err.strip().splitlines()[-1:] if err.strip() else []}
    if hang is not None:
        hang.unlink()
    if disk is not None:
        with contextlib.suppress(OSError):
            (disk / "filler").unlink()
    if fault in ("exact2", "rmcsv", "ckpt0"):
        return finish_check(fault, out, run_dir, result, err)
    try:
        return resume_check(run_dir, result, done)
    finally:
        if extra == "tmpfs":
            subprocess.run(["umount", "-l", str(disk)], check=False)


def resume_check(run_dir: Path, result: dict[str, Any], done: list[int]) -> dict[str, Any]:
    """Load the newest checkpoint, count the iterations it lacks, resume it for one more iteration."""
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


def finish_check(fault: str, out: Path, run_dir: Path, result: dict[str, Any], err: str) -> dict[str, Any]:
    """``exact2``: resume to the end, compare with the reference; ``rmcsv``: every row there;
    ``ckpt0``: a resume starts the run again in place."""
    if list_checkpoints(run_dir):
        with contextlib.suppress(HarlError):
            result["saved"] = load_checkpoint(latest_checkpoint(run_dir))["counters"]["iteration"]
            result["lost"] = max(rows(run_dir), default=0) - result["saved"]
    if fault == "rmcsv":
        result["resumed"] = result["code"] == 0 and rows(run_dir) == list(range(1, FINITE + 1))
        result["extra"] = "warned" if "written again whole" in err else ("not removed" if result["code"] == 0 else "")
        return result
    if fault == "ckpt0":
        pipeline_file = run_dir / "pipeline.toml"
        pipeline_file.write_text(re.sub(r"total_env_steps = [0-9_]+", "total_env_steps = 60",
                                        pipeline_file.read_text()))
        said = io.StringIO()
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(io.StringIO()):
            code = main(["train", "--resume", str(run_dir), "--quiet"])
        result["resumed"] = code == 0 and rows(run_dir) == [1, 2, 3]
        result["extra"] = "restarted" if "starting the run again from the beginning" in said.getvalue() else ""
        return result
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["train", "--resume", str(run_dir), "--quiet"])
    result["resumed"] = code == 0 and rows(run_dir) == list(range(1, FINITE + 1))
    result["extra"] = "exact" if full_rows(run_dir) == reference(out) else "DIFFERS"
    return result


def two_writers(pipeline: Path, run_dir: Path) -> dict[str, Any]:
    """Two ``harl train --run-dir D`` at once: one must refuse (exit 2, naming the other's PID)."""
    if importlib.util.find_spec("harl.rundir.lock") is None:
        return {"skipped": "harl.rundir.lock is not on this branch (the run-directory lock is on branch api)"}
    procs = [start(["train", str(pipeline), "--run-dir", str(run_dir), "--quiet"]) for _ in range(2)]
    deadline = time.monotonic() + 120  # until the writer (whichever got the lock) has 3 rows
    while len(rows(run_dir)) < 3 and any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    outs = [proc.communicate(timeout=60) for proc in procs]
    time.sleep(0.5)
    codes = sorted(proc.returncode for proc in procs)
    errs = "".join(err for _, err in outs)
    result: dict[str, Any] = {"code": ",".join(map(str, codes)), "traceback": "Traceback" in errs, "hung": False,
                              "left": sum(len(group(p.pid)) for p in procs), "rows": len(rows(run_dir)),
                              "corrupt": False, "saved": None, "resumed": None, "leaked": "leaked" in errs,
                              "extra": "", "err": errs.strip().splitlines()[-1:],
                              "refused": codes[0] == 2 or codes[-1] == 2}
    return resume_check(run_dir, result, rows(run_dir))


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
    if "exact2" in args.faults:
        reference(out)
    for fault in args.faults.split(","):
        if fault not in FAULTS:
            parser.error(f"--faults: unknown fault {fault!r} (expected some of: {', '.join(FAULTS)})")
        for k in range(args.trials):
            results[fault].append(trial(fault, out, k, pipeline, rng))
            if "skipped" in results[fault][-1]:
                break
    print(f"{args.trials} trials per fault, checkpoint every {EVERY} iterations, "
          f"{time.monotonic() - started:.0f} s; load: {os.getloadavg()[0]:.2f}")
    print(f"{'fault':8} {'exit codes':22} {'resumed-ok':>10} {'no ckpt':>7} {'corrupt':>7} {'lost (max)':>10} "
          f"{'traceb.':>7} {'left':>4} {'hung':>4} {'leaked':>6}  notes")
    for fault, trials in results.items():
        if "skipped" in trials[0]:
            print(f"{fault:8} skipped: {trials[0]['skipped']}")
            continue
        codes = ",".join(f"{c}x{n}" for c, n in sorted(_count(t["code"] for t in trials).items(), key=str))
        lost = [t["lost"] for t in trials if t.get("lost") is not None]
        notes = ",".join(f"{e}x{n}" for e, n in _count(t["extra"] for t in trials if t["extra"]).items())
        if fault == "diskfull":
            notes += " failed writing: " + ",".join(
                f"{e}x{n}" for e, n in _count(t.get("failed") or "nothing" for t in trials).items())
        if fault in ("hungterm", "int2", "term2", "sigterm", "hunginl", "exact2"):
            notes += f" stop in {max(t['stop_s'] for t in trials):.1f} s at most"
        print(f"{fault:8} {codes:22} {sum(bool(t['resumed']) for t in trials):>10} "
              f"{sum(t['saved'] is None and not t['corrupt'] for t in trials):>7} "
              f"{sum(t['corrupt'] for t in trials):>7} {f'{sum(lost)} ({max(lost, default=0)})':>10} "
              f"{sum(t['traceback'] for t in trials):>7} {sum(t['left'] for t in trials):>4} "
              f"{sum(t['hung'] for t in trials):>4} {sum(t['leaked'] for t in trials):>6}  {notes}")
    for fault, trials in results.items():
        for k, t in enumerate(trials):
            if "skipped" not in t and (t["traceback"] or t["corrupt"] or t["left"] or t["hung"] or t["leaked"]
                                       or t["resumed"] is False):
                print(f"  {fault} #{k}: {t}")


def _count(values: Any) -> dict[Any, int]:
    counts: dict[Any, int] = defaultdict(int)
    for v in values:
        counts[v] += 1
    return dict(counts)


if __name__ == "__main__":
    main_()
