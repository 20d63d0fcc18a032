"""Training speed against PKU-MARL/HARL, side by side in one run: HAPPO on MPE simple_spread.

Each case is a whole training process (start-up, collection, updates, HARL's and harl's own
evaluations) for the same number of env steps; the cases run interleaved, ``--rounds`` times,
so a change in the machine's load hits every case alike.  Reported per case: env steps per
wall-clock second, CPU seconds (the process and its env workers) per 1,000 env steps, and the
load average at the end of each run.

    python benchmarks/harl_speed.py --harl-dir ~/HARL --harl-python ~/harl-venv/bin/python \\
        --steps 200_000 --rounds 2

HARL: ``examples/train.py --algo happo --env pettingzoo_mpe --cuda False --torch_threads 1``
(its tuned simple_spread config: 20 env processes x 200 steps).  harl: the shipped
``happo_mpe_spread.toml`` (mpe2, the same hyper-parameters, subprocess env workers), the same
file on the torch MPE (``env.kind = "mpe_torch"``), and ``happo_mpe_torch_spread.toml`` (tuned
for many envs), as shipped (``compile = "auto"``: eager until the eager time has paid for a compile)
and with its collection and update compiled from the start (``"on"``; a warm inductor cache makes
that a load of a few seconds, a cold one a compile of a minute or more).  Without HARL installed (see ``harl_parity.py``) its case is skipped with the
reason printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harl_parity import _harl_missing  # noqa: E402

ROOT = Path(__file__).parent.parent
HARL_CASES = {  # name: (pipeline, extra overrides)
    "harl mpe2 (shipped happo_mpe_spread)": ("pipelines/happo_mpe_spread.toml", []),
    "harl mpe_torch, HARL's settings": ("pipelines/happo_mpe_spread.toml", ["env.kind=mpe_torch"]),
    "harl mpe_torch, tuned (happo_mpe_torch_spread)": ("pipelines/happo_mpe_torch_spread.toml", []),
    "harl mpe_torch, tuned, compiled": ("pipelines/happo_mpe_torch_spread.toml",
                                        ["collector.compile=on", "updater.compile=on"]),
}


def timed(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree) of one run; its output is discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def commands(args: argparse.Namespace, scratch: Path) -> dict[str, tuple[list[str], Path]]:
    out: dict[str, tuple[list[str], Path]] = {}
    harl_dir = Path(args.harl_dir).expanduser()
    if why := _harl_missing(harl_dir, args.harl_python):
        print(f"HARL skipped: {why}")
    else:
        out["HARL (PKU-MARL/HARL, pettingzoo 1.22 MPE)"] = (
            [args.harl_python, "examples/train.py", "--algo", "happo", "--env", "pettingzoo_mpe",
             "--exp_name", "speed", "--seed", "1", "--num_env_steps", str(args.steps), "--cuda", "False",
             "--torch_threads", "1", "--log_dir", str(scratch / "HARL")], harl_dir)
    for i, (name, (pipeline, overrides)) in enumerate(HARL_CASES.items()):
        if args.cases and not any(c in name for c in args.cases):
            continue
        sets = [f"run.total_env_steps={args.steps}", *overrides]
        cmd = [sys.executable, "-m", "harl", "train", pipeline, "--quiet", "--run-dir", str(scratch / f"harl-{i}")]
        out[name] = ([*cmd, *(a for s in sets for a in ("--set", s))], ROOT)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--harl-dir", default="HARL")
    p.add_argument("--harl-python", default="python")
    p.add_argument("--steps", type=lambda v: int(v.replace("_", "")), default=200_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--cases", nargs="+", default=None,
                   help="run only the harl cases whose names contain one of these (HARL's always runs)")
    args = p.parse_args()
    results: dict[str, list[tuple[float, float, str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, (cmd, cwd) in commands(args, Path(tmp) / f"round-{r + 1}").items():
                wall, cpu = timed(cmd, cwd)
                load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                results.setdefault(name, []).append((wall, cpu, load))
                print(json.dumps({"round": r + 1, "case": name, "env_steps": args.steps, "wall_s": round(wall, 1),
                                  "env_steps_per_s": round(args.steps / wall), "cpu_s_per_1k_steps": round(1000 * cpu / args.steps, 3),
                                  "load": load}), flush=True)
    base = next((name for name in results if name.startswith("HARL")), None)
    print("\n| case | env-steps/s per round | CPU-s per 1k steps | vs HARL |\n|---|---|---|---|")
    for name, runs in results.items():
        rates = [args.steps / w for w, _, _ in runs]
        ratio = "" if base is None else f"{sum(rates) / sum(args.steps / w for w, _, _ in results[base]):.1f}x"
        print(f"| {name} | {', '.join(f'{x:,.0f}' for x in rates)} | "
              f"{sum(c for _, c, _ in runs) / len(runs) * 1000 / args.steps:.2f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
