"""HARL's own LAG env and harl's air-combat env on the same task, random actions, side by side.

    python benchmarks/lag_side_by_side.py --harl-dir HARL --lag-path lag-site --rounds 3

HARL's side: ``harl.envs.lag.lag_env.LAGEnv`` of a PKU-MARL/HARL checkout (``--harl-dir``, its
repository root), run unchanged in a subprocess by ``--lag-python`` (default: this Python)
with ``--lag-path`` (repeatable) put first on its path: it needs ``gym`` 0.26 and ``pymap3d``
(``pip install --target lag-site gym==0.26.2 pymap3d --no-deps``) beside jsbsim, torch, numpy,
pyyaml, matplotlib.  Three shims, nothing in HARL's files edited:

- HARL's ``harl`` and ``harl.envs`` packages are loaded as bare namespaces, so their
  ``__init__`` (every env family's logger: smac, football, dexhands, ...) is not imported;
- ``wandb`` is a stub (``posture_reward.py`` imports ``wandb.agent`` and never uses it);
- JSBSim's data: HARL's ``JSBSim/data`` is a git submodule (the JSBSim repository); where the
  checkout's is empty, JSBSim opens the aircraft data the ``jsbsim`` wheel ships (the same F-16
  harl flies), and ``Catalog.add_jsbsim_props`` gets the property list as lines (jsbsim >= 1.2
  returns it as one string; HARL's code iterates a list).

harl's side: ``benchmarks/env_throughput.py``'s ``vector_rate`` on the same task, one env (as
HARL's single env) and ``--n-envs`` envs in harl's inline vector env.  Both sides: uniformly
random actions from 16 pre-drawn batches, a warm-up of 5 steps, episodes reset where they end
(random stick and throttle crash within a few hundred steps, so resets weigh more than in
training), one torch thread.  Figures: env steps per second of wall time and of the process's CPU
time (the steadier one on a shared machine), the rounds interleaved, the load beside each line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
from env_throughput import vector_rate  # noqa: E402

from harl.envs.air_combat import AirCombatConfig  # noqa: E402

TASKS = {
    "1v1/NoWeapon/vsBaseline": "SingleCombat",
    "1v1/DodgeMissile/vsBaseline": "SingleCombat",
    "2v2/NoWeapon/vsBaseline": "MultipleCombat",
    "2v2/ShootMissile/HierarchyVsBaseline": "MultipleCombat",
}
"""HARL task -> its scenario (HARL's ``lag.yaml`` pairs)."""

DRIVER = r'''
import json, os, sys, time, types
harl_dir, scenario, task, steps, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
for name, sub in (("harl", "harl"), ("harl.envs", "harl/envs")):
    package = types.ModuleType(name); package.__path__ = [os.path.join(harl_dir, sub)]; sys.modules[name] = package
wandb = types.ModuleType("wandb"); wandb.agent = None; sys.modules["wandb"] = wandb
import jsbsim, numpy as np, torch
torch.set_num_threads(1)
from harl.envs.lag.JSBSim.core import catalog, simulatior
data = os.path.join(harl_dir, "harl/envs/lag/JSBSim/data")
if not os.path.exists(os.path.join(data, "aircraft")):
    wheel = jsbsim.get_default_root_dir()
    simulatior.jsbsim = types.SimpleNamespace(FGFDMExec=lambda root, *a, **k: jsbsim.FGFDMExec(wheel, *a, **k))
add = catalog.Catalog.add_jsbsim_props
catalog.Catalog.add_jsbsim_props = staticmethod(
    lambda props: add([p for p in (props.split("\n") if isinstance(props, str) else props) if p.strip()]))
from harl.envs.lag.lag_env import LAGEnv
env = LAGEnv({"scenario": scenario, "task": task})
for space in env.action_space:
    space.seed(0)
actions = [np.stack([space.sample() for space in env.action_space]) for _ in range(16)]
env.reset()
resets = 0
def step(t):
    global resets
    done = env.step(actions[t % 16])[3]
    if np.all(done):
        env.reset(); resets += 1
for t in range(5):
    step(t)
start, cpu = time.perf_counter(), time.process_time()
for t in range(steps):
    step(t)
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
json.dump({"env_steps_per_s": steps / wall, "env_steps_per_cpu_s": steps / cpu, "resets": resets}, open(out, "w"))
'''


def load() -> float:
    return round(os.getloadavg()[0], 2)


def run_harl_lag(args: argparse.Namespace, task: str) -> dict[str, Any]:
    """HARL's LAGEnv in a subprocess (its ``harl`` package must not meet ours)."""
    with tempfile.TemporaryDirectory() as tmp:
        driver, out = Path(tmp) / "driver.py", Path(tmp) / "out.json"
        driver.write_text(DRIVER)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(Path(p).resolve()) for p in args.lag_path))
        done = subprocess.run([args.lag_python, str(driver), str(args.harl_dir.resolve()), TASKS[task], task,
                               str(args.steps), str(out)], env=env, cwd=tmp, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise SystemExit(f"HARL's LAG env failed on {task}:\n{done.stderr[-3000:]}")
        return json.loads(out.read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--harl-dir", type=Path, required=True, help="a PKU-MARL/HARL checkout (its root)")
    p.add_argument("--lag-python", default=sys.executable, help="the Python that runs HARL's env")
    p.add_argument("--lag-path", action="append", default=[], help="a folder put first on HARL's side's path")
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument("--steps", type=int, default=300, help="env steps per HARL measurement (vector steps for harl)")
    p.add_argument("--n-envs", type=int, default=4, help="harl's vectorised case: envs in its inline vector env")
    p.add_argument("--rounds", type=int, default=1)
    args = p.parse_args()
    if not (args.harl_dir / "harl/envs/lag/lag_env.py").exists():
        p.error(f"--harl-dir {args.harl_dir}: no harl/envs/lag/lag_env.py there; give a PKU-MARL/HARL checkout's root")
    torch.set_num_threads(1)
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in range(args.rounds):
        for task in args.tasks:
            config = AirCombatConfig(task=task, action_type="multidiscrete")
            measured = [("HARL LAGEnv", run_harl_lag(args, task))]
            for n in (1, args.n_envs):
                wall, cpu = vector_rate(config, n, max(1, args.steps // n))
                measured.append((f"harl, {n} env{'s' if n > 1 else ''}",
                                 {"env_steps_per_s": wall, "env_steps_per_cpu_s": cpu}))
            for side, figures in measured:
                row = {"round": r, "task": task, "side": side, **{k: round(v) for k, v in figures.items()},
                       "load": load()}
                print(json.dumps(row), flush=True)
                rows.setdefault((task, side), []).append(row)
    print(f"\nmedians of {args.rounds} round(s):")
    print(f"{'task':<38} {'side':<14} {'steps/s':>8} {'steps/CPU-s':>12} {'x HARL (CPU)':>12}  load")
    for task in args.tasks:
        base = statistics.median(x["env_steps_per_cpu_s"] for x in rows[(task, "HARL LAGEnv")])
        for (t, side), got in rows.items():
            if t != task:
                continue
            cpu = statistics.median(x["env_steps_per_cpu_s"] for x in got)
            print(f"{task:<38} {side:<14} {statistics.median(x['env_steps_per_s'] for x in got):>8.0f} "
                  f"{cpu:>12.0f} {cpu / base:>12.2f}  {min(x['load'] for x in got)}-{max(x['load'] for x in got)}")


if __name__ == "__main__":
    main()
