"""JaxMARL's IPPO baseline and harl's pipeline with its settings, one after the other, same machine.

    python benchmarks/jaxmarl_side_by_side.py --jaxmarl-file JaxMARL/baselines/IPPO/ippo_ff_mpe.py \\
        --steps 2_000_000 --rounds 2
    python benchmarks/jaxmarl_side_by_side.py --jaxmarl-file ... --harl-variant run.torch_threads=2 \\
        --harl-variant policy.compile=true

JaxMARL side: its own baseline file, unmodified, with its ``config/ippo_ff_mpe.yaml`` (read next to
it) and ``TOTAL_TIMESTEPS`` set to ``--steps``, one seed (``NUM_SEEDS`` is vmapped in its ``main``;
this runs ``make_train`` once, as its main does for one seed).  The only change is to logging: the
file's ``wandb.log`` callback, called once per update from inside the compiled program, is a stub
that records the wall time and the update's env steps (``NUM_ENVS x NUM_STEPS``); ``hydra``
and ``omegaconf`` get stubs too (used only by its ``main``, which is not run).  It needs jaxmarl
and what its baseline imports: jax, flax, optax, distrax, gymnax (its ``MPELogWrapper`` module
imports gymnax), pyyaml, matplotlib (``pip install jaxmarl distrax gymnax``; harl's venv holds
jaxmarl 0.2.0 without its dependencies, so give ``--jaxmarl-python`` a venv that has them); XLA
uses every core.

harl side: ``harl train pipelines/ippo_mpe_spread_jaxmarl.toml`` in a fresh process, evaluation off
by default (JaxMARL's file evaluates nothing), its ``metrics.csv`` giving each iteration's wall time.

Figures per run: ``whole_s`` (the process, start-up, compile and exit included),
``startup_s`` (process start to the end of the first update), ``steady_env_steps_per_s``
(between the end of the first quarter of the updates and the last), the last logged training
return (JaxMARL: ``returned_episode_returns`` of its log wrapper, the agents' summed return per
agent; harl: ``train_return``, the team's), and the 1-minute load average after the run.  The
rounds interleave the runs; the table prints medians.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

DRIVER = r'''
import importlib.util, json, sys, time, types
t0 = time.time()
path, steps, out = sys.argv[1], int(float(sys.argv[2])), sys.argv[3]
records = []

def log(metric):  # the baseline's wandb.log, called once per update from its io_callback
    records.append((time.time(), {k: float(v) for k, v in metric.items()
                                  if k in ("returned_episode_returns", "total_loss")}))

stub = types.ModuleType("wandb"); stub.log = log; stub.init = lambda *a, **k: None
sys.modules["wandb"] = stub
hydra = types.ModuleType("hydra"); hydra.main = lambda *a, **k: (lambda f: f); sys.modules["hydra"] = hydra
omega = types.ModuleType("omegaconf"); omega.OmegaConf = type("OmegaConf", (), {}); sys.modules["omegaconf"] = omega
import yaml
spec = importlib.util.spec_from_file_location("ippo_baseline", path)
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
import os, jax
config = yaml.safe_load(open(os.path.join(os.path.dirname(path), "config", "ippo_ff_mpe.yaml")))
config["TOTAL_TIMESTEPS"] = steps
train = jax.jit(module.make_train(config))
out_state = train(jax.random.PRNGKey(config["SEED"]))
jax.block_until_ready(out_state["metrics"])
json.dump({"t0": t0, "end": time.time(), "per_update": config["NUM_ENVS"] * config["NUM_STEPS"],
           "records": records}, open(out, "w"))
'''


def load() -> float:
    return round(os.getloadavg()[0], 2)


def steady(times: list[float], steps: list[float]) -> float:
    """Env steps per second from the end of the first quarter of the updates to the last."""
    k = max(0, len(times) // 4 - 1)
    return (steps[-1] - steps[k]) / (times[-1] - times[k]) if len(times) > k + 1 else float("nan")


def run_jaxmarl(python: str, baseline: Path, steps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        driver = Path(tmp) / "driver.py"
        driver.write_text(DRIVER)
        start = time.time()
        subprocess.run([python, str(driver), str(baseline), str(steps), str(out)], check=True)
        whole = time.time() - start
        data = json.loads(out.read_text())
    times = [t for t, _ in data["records"]]
    done = [data["per_update"] * (i + 1) for i in range(len(times))]
    last = data["records"][-1][1].get("returned_episode_returns", float("nan")) if data["records"] else float("nan")
    return {"side": "jaxmarl", "whole_s": round(whole, 1), "startup_s": round(times[0] - start, 1),
            "steady_env_steps_per_s": round(steady(times, done)), "train_return_last": round(last, 2),
            "env_steps": done[-1] if done else 0, "load": load()}


def run_harl(pipeline: str, steps: int, overrides: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "harl", "train", pipeline, "--quiet", "--run-dir", str(run_dir),
               "--set", f"run.total_env_steps={steps}", *(x for o in overrides for x in ("--set", o))]
        start = time.time()
        subprocess.run(cmd, check=True, cwd=ROOT)
        whole = time.time() - start
        with open(run_dir / "metrics.csv") as f:
            rows = list(csv.DictReader(f))
    times = [float(r["wall_time"]) for r in rows]
    done = [float(r["env_steps"]) for r in rows]
    returns = [r.get("train_return", "") for r in rows]
    last = next((float(x) for x in reversed(returns) if x not in ("", "nan")), float("nan"))
    # wall_time counts from the trainer's start; the process started (whole - times[-1]) earlier, about
    return {"side": "harl " + " ".join(overrides), "whole_s": round(whole, 1),
            "startup_s": round(whole - times[-1] + times[0], 1),
            "steady_env_steps_per_s": round(steady(times, done)), "train_return_last": round(last, 2),
            "env_steps": int(done[-1]), "load": load()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jaxmarl-file", type=Path, help="JaxMARL's baselines/IPPO/ippo_ff_mpe.py (its config/ beside it)")
    p.add_argument("--jaxmarl-python", default=sys.executable, help="the Python with jaxmarl, jax, flax, optax, distrax")
    p.add_argument("--pipeline", default="pipelines/ippo_mpe_spread_jaxmarl.toml")
    p.add_argument("--steps", type=int, default=2_000_000)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--harl-set", action="append", default=["evaluator.every_iterations=1000000"],
                   help="overrides of every harl run (default: evaluation off, as JaxMARL's file)")
    p.add_argument("--harl-variant", action="append", default=[],
                   help="comma-separated overrides of a further harl variant (repeatable)")
    p.add_argument("--skip-jaxmarl", action="store_true")
    args = p.parse_args()
    if not args.skip_jaxmarl and args.jaxmarl_file is None:
        p.error("--jaxmarl-file is required (or --skip-jaxmarl)")
    results: dict[str, list[dict[str, Any]]] = {}
    for r in range(args.rounds):
        cases: list[tuple[str, Any]] = [] if args.skip_jaxmarl else [("jaxmarl", None)]
        cases += [("harl", []), *(("harl", [x for x in v.split(",") if x]) for v in args.harl_variant)]
        for side, extra in cases:
            if side == "jaxmarl":
                row = run_jaxmarl(args.jaxmarl_python, args.jaxmarl_file, args.steps)
            else:
                row = run_harl(args.pipeline, args.steps, [*args.harl_set, *extra])
                row["side"] = "harl" + ("" if not extra else " " + ",".join(extra))
            row["round"] = r
            print(json.dumps(row), flush=True)
            results.setdefault(row["side"], []).append(row)
    print(f"\nmedians of {args.rounds} round(s), {args.steps:,} env steps each:")
    print(f"{'run':<48} {'steady/s':>9} {'whole s':>8} {'start-up s':>10} {'return':>8}  load")
    base = None
    for side, rows in results.items():
        rate = statistics.median(r["steady_env_steps_per_s"] for r in rows)
        base = rate if side == "jaxmarl" else base
        ratio = f"  ({rate / base:.2f}x JaxMARL)" if base and side != "jaxmarl" else ""
        print(f"{side[:48]:<48} {rate:>9.0f} {statistics.median(r['whole_s'] for r in rows):>8.1f} "
              f"{statistics.median(r['startup_s'] for r in rows):>10.1f} "
              f"{statistics.median(r['train_return_last'] for r in rows):>8.2f}  "
              f"{min(r['load'] for r in rows)}-{max(r['load'] for r in rows)}{ratio}")


if __name__ == "__main__":
    main()
