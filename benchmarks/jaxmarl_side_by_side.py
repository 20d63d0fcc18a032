"""JaxMARL's baselines and harl's pipelines with their settings, one after the other, same machine.

    python benchmarks/jaxmarl_side_by_side.py --jaxmarl-dir JaxMARL/baselines --steps 2_000_000 --rounds 2
    python benchmarks/jaxmarl_side_by_side.py --jaxmarl-dir ... --harl-variant run.torch_threads=2 \\
        --harl-variant collector.compile=on
    python benchmarks/jaxmarl_side_by_side.py --jaxmarl-dir ... --baseline mappo_smax --map 3m \\
        --steps 300_000 --win-target 0.8
    python benchmarks/jaxmarl_side_by_side.py --jaxmarl-dir ... --baseline qmix_smax --map 3m --steps 300_000
    python benchmarks/jaxmarl_side_by_side.py --jaxmarl-dir ... --baseline pqn_vdn_mpe --steps 1_000_000 \\
        --seeds 1 2 3 --curves pqn-parity.json

``--baseline`` (``PRESETS``): ``ippo_mpe`` is JaxMARL's ``IPPO/ippo_ff_mpe.py`` beside
``pipelines/ippo_mpe_spread_jaxmarl.toml``; ``mappo_smax`` its ``MAPPO/mappo_rnn_smax.py``
(``config/mappo_homogenous_rnn_smax.yaml``) beside ``pipelines/mappo_smax_3m.toml``;
``qmix_smax`` its ``QLearning/qmix_rnn.py`` (``config/config.yaml`` with
``config/alg/ql_rnn_smax.yaml``, as its hydra defaults compose them) beside
``pipelines/qmix_smax_3m.toml``; ``pqn_vdn_mpe`` its ``QLearning/pqn_vdn_ff.py`` (``config/config.yaml``
with ``config/alg/pqn_vdn_ff_mpe.yaml``) beside ``pipelines/pqn-vdn_mpe_torch_spread.toml``.

JaxMARL side: its own baseline file, unmodified, with its own config (read next to it),
``TOTAL_TIMESTEPS`` set to ``--steps`` and ``MAP_NAME`` to ``--map``, one seed: this runs its
``make_train`` once under ``jax.jit``, as its ``main`` does (QMIX: vmapped over ``NUM_SEEDS`` = 1,
as its ``single_run``).  The only change is to logging: the file's ``wandb.log``, called once per
update from inside the compiled program, is a stub that records the wall time and the update's
returns, win rate and env steps (``env_step`` where it logs one, else ``NUM_ENVS x NUM_STEPS`` per
update); QMIX's and PQN's callbacks run only when ``WANDB_MODE`` is not "disabled", so it is set
to "online" (the stub logs nowhere).  ``hydra`` and ``omegaconf`` get stubs too (used only by its
``main``).  It needs jaxmarl and what its baselines import: jax, flax, optax, distrax, gymnax,
pyyaml, matplotlib, safetensors (``pip install jaxmarl distrax gymnax pyyaml matplotlib safetensors`` in a venv of its
own, given as ``--jaxmarl-python``); XLA uses every core.  With jax 0.10, distrax needs ``tfp-nightly``:
tensorflow-probability 0.25 fails on import (``jax.interpreters.xla`` has no ``pytype_aval_mappings``).
harl's own venv serves too, with gymnax and distrax installed ``--no-deps --target DIR`` and put on
``PYTHONPATH`` (gymnax pins gymnasium below harl's).

harl side: ``harl train PIPELINE`` in a fresh process, evaluation off by default (JaxMARL's files
evaluate nothing, QMIX's greedy test aside), its ``metrics.csv`` giving each iteration's wall time.
With ``--win-target`` harl's evaluation stays as its pipeline sets it and ``eval_win`` is timed;
JaxMARL's side is timed on its own logged win rate (MAPPO: ``win_rate`` of the update's finished
training episodes; QMIX: ``test_returned_won_episode``, its greedy test every 5 % of the updates).

Figures per run: ``whole_s`` (the process, start-up, compile and exit included),
``startup_s`` (process start to the end of the first update), ``steady_env_steps_per_s``
(between the end of the first quarter of the updates and the last), the last logged training
return (JaxMARL: its log wrapper's returns; harl: ``train_return``, the team's), the seconds from
the process's start to the win target, and the 1-minute load average after the run.  The
rounds interleave the runs; the table prints medians.

``--seeds S ...``: round r runs seed ``S[r]`` on every side (JaxMARL's ``SEED``, harl's ``run.seed``;
the rounds default to one per seed), and a learning-parity table follows the speed table: at each
tenth of ``--steps``, the mean over seeds of each run's first logged training return at or past the
mark, per side, and whether harl's mean is within the larger of the two sides' standard deviations
of JaxMARL's (docs/learning-parity.md's rule).  ``--curves PATH`` writes every run's curve
(env steps, training return) and that table as JSON.
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

from parity_marks import at_tenths, compare, markdown  # this folder: a script's own, on sys.path

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("jaxmarl", "harl")

DRIVER = r'''
import copy, importlib.util, json, os, sys, time, types
t0 = time.time()
path, steps, out, preset = sys.argv[1], int(float(sys.argv[2])), sys.argv[3], json.loads(sys.argv[4])
records = []

def log(metric, *args, **kwargs):  # the baseline's wandb.log, called once per update from a callback
    records.append((time.time(), {k: float(v) for k, v in metric.items()
                                  if any(w in k for w in ("return", "won", "win", "env_step", "loss"))
                                  and getattr(v, "size", 1) == 1}))

stub = types.ModuleType("wandb"); stub.log = log; stub.init = lambda *a, **k: None
sys.modules["wandb"] = stub
hydra = types.ModuleType("hydra"); hydra.main = lambda *a, **k: (lambda f: f); sys.modules["hydra"] = hydra
omega = types.ModuleType("omegaconf"); omega.OmegaConf = type("OmegaConf", (), {"to_yaml": staticmethod(str)})
sys.modules["omegaconf"] = omega
import yaml
spec = importlib.util.spec_from_file_location("jaxmarl_baseline", path)
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
import jax
here = os.path.dirname(path)
config = {}
for name in preset["configs"]:
    config.update(yaml.safe_load(open(os.path.join(here, name))))
if "alg" in preset:  # hydra's defaults list: the main config, then the alg's keys over it
    config.update(yaml.safe_load(open(os.path.join(here, preset["alg"]))))
config.update(preset.get("set", {}))
config["TOTAL_TIMESTEPS"] = steps
if preset["call"] == "make_train(config)":
    train = jax.jit(module.make_train(config))
    out_state = train(jax.random.PRNGKey(config["SEED"]))
else:  # qmix_rnn.py's single_run: env from config, vmapped over NUM_SEEDS (1)
    env, _ = module.env_from_config(copy.deepcopy(config))
    train = jax.jit(jax.vmap(module.make_train(config, env)))
    out_state = train(jax.random.split(jax.random.PRNGKey(config["SEED"]), config["NUM_SEEDS"]))
jax.block_until_ready(out_state)
json.dump({"t0": t0, "end": time.time(), "per_update": config["NUM_ENVS"] * config["NUM_STEPS"],
           "records": records}, open(out, "w"))
'''

PRESETS: dict[str, dict[str, Any]] = {
    "ippo_mpe": {"file": "IPPO/ippo_ff_mpe.py", "configs": ["config/ippo_ff_mpe.yaml"], "call": "make_train(config)",
                 "return": "returned_episode_returns", "win": "", "pipeline": "pipelines/ippo_mpe_spread_jaxmarl.toml"},
    "mappo_smax": {"file": "MAPPO/mappo_rnn_smax.py", "configs": ["config/mappo_homogenous_rnn_smax.yaml"],
                   "call": "make_train(config)", "return": "returns", "win": "win_rate",
                   "pipeline": "pipelines/mappo_smax_3m.toml"},
    "qmix_smax": {"file": "QLearning/qmix_rnn.py", "configs": ["config/config.yaml"], "alg": "config/alg/ql_rnn_smax.yaml",
                  "call": "single_run", "set": {"WANDB_MODE": "online"},  # its callback logs only when not disabled
                  "return": "returned_episode_returns", "win": "test_returned_won_episode",
                  "pipeline": "pipelines/qmix_smax_3m.toml"},
    "pqn_vdn_mpe": {"file": "QLearning/pqn_vdn_ff.py", "configs": ["config/config.yaml"],
                    "alg": "config/alg/pqn_vdn_ff_mpe.yaml", "call": "single_run",
                    # its callback, as QMIX's, logs only when not disabled; its greedy test (512 envs x 30 steps
                    # every 5 % of the updates) off, as harl's evaluation is by default here
                    "set": {"WANDB_MODE": "online", "TEST_DURING_TRAINING": False},
                    "return": "returned_episode_returns", "win": "",
                    "pipeline": "pipelines/pqn-vdn_mpe_torch_spread.toml"},
}
'''JaxMARL baseline files (relative to its ``baselines/``) with their own configs, and harl's pipeline beside each.'''



def load() -> float:
    return round(os.getloadavg()[0], 2)


def steady(times: list[float], steps: list[float]) -> float:
    """Env steps per second from the end of the first quarter of the updates to the last."""
    k = max(0, len(times) // 4 - 1)
    return (steps[-1] - steps[k]) / (times[-1] - times[k]) if len(times) > k + 1 else float("nan")


def first_reaching(times: list[float], values: list[float], target: float | None) -> float | None:
    """The first time a value reaches ``target`` (None: no target, or never)."""
    if target is None:
        return None
    return next((t for t, v in zip(times, values) if v == v and v >= target), None)


def run_jaxmarl(python: str, baselines: Path, preset: dict[str, Any], steps: int,
                win_target: float | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        driver = Path(tmp) / "driver.py"
        driver.write_text(DRIVER)
        start = time.time()
        subprocess.run([python, str(driver), str(baselines / preset["file"]), str(steps), str(out),
                        json.dumps(preset)], check=True, cwd=tmp)
        whole = time.time() - start
        data = json.loads(out.read_text())
    times = [t for t, _ in data["records"]]
    metrics = [m for _, m in data["records"]]
    done = [m.get("env_step", data["per_update"] * (i + 1)) for i, m in enumerate(metrics)]
    returns = [m.get(preset["return"], float("nan")) for m in metrics]
    last = next((x for x in reversed(returns) if x == x), float("nan"))
    win_at = first_reaching(times, [m.get(preset["win"], float("nan")) for m in metrics], win_target)
    return {"side": "jaxmarl", "whole_s": round(whole, 1), "startup_s": round(times[0] - start, 1),
            "steady_env_steps_per_s": round(steady(times, done)), "train_return_last": round(last, 2),
            "env_steps": int(done[-1]) if done else 0,
            "s_to_win_target": None if win_at is None else round(win_at - start, 1), "load": load(),
            "curve": [[int(d), r] for d, r in zip(done, returns) if r == r]}


def run_harl(pipeline: str, steps: int, overrides: list[str], win_target: float | None) -> dict[str, Any]:
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
    offset = whole - times[-1]
    wins = [float(r["eval_win"]) if r.get("eval_win") not in (None, "") else float("nan") for r in rows]
    win_at = first_reaching(times, wins, win_target)
    return {"side": "harl " + " ".join(overrides), "whole_s": round(whole, 1),
            "startup_s": round(offset + times[0], 1),
            "steady_env_steps_per_s": round(steady(times, done)), "train_return_last": round(last, 2),
            "env_steps": int(done[-1]), "s_to_win_target": None if win_at is None else round(offset + win_at, 1),
            "load": load(), "curve": [[int(d), float(r)] for d, r in zip(done, returns) if r not in ("", "nan")]}


def parity(results: dict[str, list[dict[str, Any]]], budget: int) -> dict[str, list[dict[str, Any]]]:
    """Per harl run, at each tenth of the budget, the parity rule beside JaxMARL's seeds (no mark at 0:
    JaxMARL's log wrapper reports 0 before an env has finished an episode)."""
    base = [at_tenths(r["curve"], budget, zero="skip") for r in results.get("jaxmarl", [])]
    return {side: compare(base, [at_tenths(r["curve"], budget, zero="skip") for r in rows], budget, NAMES)
            for side, rows in results.items() if side != "jaxmarl" and base}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", choices=list(PRESETS), default="ippo_mpe",
                   help="which JaxMARL baseline file, with harl's pipeline of the same settings beside it")
    p.add_argument("--jaxmarl-dir", type=Path, help="a JaxMARL checkout's baselines/ folder")
    p.add_argument("--jaxmarl-file", type=Path, help="(older form) JaxMARL's baselines/IPPO/ippo_ff_mpe.py")
    p.add_argument("--jaxmarl-python", default=sys.executable, help="the Python with jaxmarl, jax, flax, optax, distrax")
    p.add_argument("--pipeline", help="harl's pipeline (default: the baseline's)")
    p.add_argument("--steps", type=int, default=2_000_000)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--map", help="SMAX baselines: JaxMARL's MAP_NAME (3m, 2s3z, ...); harl's side takes "
                   "--pipeline or --harl-set env.map_name=...")
    p.add_argument("--win-target", type=float,
                   help="also time each run to its first win rate >= this (JaxMARL: its logged win rate; harl: "
                   "eval_win, so harl's evaluation stays as its pipeline sets it)")
    p.add_argument("--harl-set", action="append", default=None,
                   help="overrides of every harl run (default: evaluation off, as JaxMARL's files, unless --win-target)")
    p.add_argument("--harl-variant", action="append", default=[],
                   help="comma-separated overrides of a further harl variant (repeatable)")
    p.add_argument("--skip-jaxmarl", action="store_true")
    p.add_argument("--seeds", type=int, nargs="+", default=None,
                   help="round r runs seed SEEDS[r] on every side (rounds: one per seed unless --rounds is larger)")
    p.add_argument("--curves", type=Path, default=None, help="write every run's curve and the parity table here (JSON)")
    args = p.parse_args()
    if args.seeds and args.rounds < len(args.seeds):
        args.rounds = len(args.seeds)
    preset = dict(PRESETS[args.baseline])
    if args.map:
        preset["set"] = {**preset.get("set", {}), "MAP_NAME": args.map}
    baselines = args.jaxmarl_dir or (args.jaxmarl_file.parent.parent if args.jaxmarl_file else None)
    if not args.skip_jaxmarl and baselines is None:
        p.error("--jaxmarl-dir is required (or --skip-jaxmarl)")
    harl_set = args.harl_set if args.harl_set is not None else (
        [] if args.win_target is not None else ["evaluator.every_iterations=1000000"])
    pipeline = args.pipeline or preset["pipeline"]
    results: dict[str, list[dict[str, Any]]] = {}
    for r in range(args.rounds):
        seed = args.seeds[r % len(args.seeds)] if args.seeds else None
        cases: list[tuple[str, Any]] = [] if args.skip_jaxmarl else [("jaxmarl", None)]
        cases += [("harl", []), *(("harl", [x for x in v.split(",") if x]) for v in args.harl_variant)]
        for side, extra in cases:
            if side == "jaxmarl":
                assert baselines is not None
                seeded = preset if seed is None else {**preset, "set": {**preset.get("set", {}), "SEED": seed}}
                row = run_jaxmarl(args.jaxmarl_python, baselines, seeded, args.steps, args.win_target)
            else:
                row = run_harl(pipeline, args.steps, [*harl_set, *([] if seed is None else [f"run.seed={seed}"]), *extra],
                               args.win_target)
                row["side"] = "harl" + ("" if not extra else " " + ",".join(extra))
            row["round"], row["seed"] = r, seed
            print(json.dumps({k: v for k, v in row.items() if k != "curve"}), flush=True)
            results.setdefault(row["side"], []).append(row)
    print(f"\n{args.baseline} ({pipeline}): medians of {args.rounds} round(s), {args.steps:,} env steps each:")
    print(f"{'run':<48} {'steady/s':>9} {'whole s':>8} {'start-up s':>10} {'return':>8} {'s to win':>8}  load")
    base = None
    for side, rows in results.items():
        rate = statistics.median(r["steady_env_steps_per_s"] for r in rows)
        base = rate if side == "jaxmarl" else base
        ratio = f"  ({rate / base:.2f}x JaxMARL)" if base and side != "jaxmarl" else ""
        reached = [r["s_to_win_target"] for r in rows if r["s_to_win_target"] is not None]
        to_win = f"{statistics.median(reached):.0f}" if reached else "-"
        print(f"{side[:48]:<48} {rate:>9.0f} {statistics.median(r['whole_s'] for r in rows):>8.1f} "
              f"{statistics.median(r['startup_s'] for r in rows):>10.1f} "
              f"{statistics.median(r['train_return_last'] for r in rows):>8.2f} {to_win:>8}  "
              f"{min(r['load'] for r in rows)}-{max(r['load'] for r in rows)}{ratio}")


    if args.seeds:
        tables = parity(results, args.steps)
        for side, table in tables.items():
            print(f"\nlearning parity, {side} beside JaxMARL (training return, seeds {args.seeds}):")
            print("\n".join(markdown(table, NAMES, ("JaxMARL", "harl"))))
        if args.curves is not None:
            args.curves.write_text(json.dumps({"steps": args.steps, "seeds": args.seeds, "runs": results,
                                               "parity": tables}, indent=1) + "\n")
    elif args.curves is not None:
        args.curves.write_text(json.dumps({"steps": args.steps, "runs": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
