"""Would overlapping env steps with inference pay?  A probe of the subprocess backend.

    python benchmarks/overlap.py                          # happo_mpe_spread.toml, 2 workers
    python benchmarks/overlap.py --steps 1000 --set collector.n_envs=40

Two schedules drive the same workers with the pipeline's own policy and critic:

- ``sync`` (what the collectors do): act for every env, step every env, wait for all.
- ``groups``: one group per worker; while worker A steps, the parent acts for worker B's
  envs, so the parent's inference runs while the workers are busy.

It prints the CPU cost of one inference call (policy ``act`` + critic ``value``) at the
whole batch and at one worker's share, the CPU per vector step of the parent and of the
workers, and wall time per vector step of both schedules, interleaved, with the load.
Groups pay only where an inference call on half the envs costs clearly less than one on
all of them: the extra call per step must cost less than the idle core it fills.  It
reaches into the backend's private parts (``_workers``, ``_slots``, ``_views``): a probe
for measuring, not an API.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import torch

from harl.compose import build_stages
from harl.config.loading import load_spec_and_notes

TICK = os.sysconf("SC_CLK_TCK")


def workers_cpu(venv: Any) -> float:
    total = 0
    for w in venv._workers:
        with open(f"/proc/{w.process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pipeline", nargs="?", default="pipelines/happo_mpe_spread.toml")
    p.add_argument("--steps", type=int, default=400, help="vector steps per timed block")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--set", dest="overrides", action="append", default=[])
    args = p.parse_args()
    spec, _ = load_spec_and_notes(args.pipeline, ["logging.progress=false", "collector.backend=subprocess",
                                            "collector.workers=2", "run.device=cpu", *args.overrides])
    stages = build_stages(spec)
    venv, policy, critic = stages.venv, stages.collector.team, stages.collector.critic
    n_agents, rows = venv.n_agents, [slice(w.start, w.stop) for w in venv._workers]
    obs, state, _ = venv.reset(seed=0)
    current = {"obs": [torch.as_tensor(o) for o in obs], "state": torch.as_tensor(state)}

    @torch.no_grad()
    def infer(obs: list[torch.Tensor], state: torch.Tensor) -> list[torch.Tensor]:
        actions = policy.sample(obs, [None] * n_agents).actions
        critic.value(state)
        return actions

    def sync(steps: int) -> None:
        for _ in range(steps):
            step = venv.step([a.numpy() for a in infer(current["obs"], current["state"])])
            current["obs"] = [torch.as_tensor(o) for o in step.obs]
            current["state"] = torch.as_tensor(step.state)

    def send(g: int, obs: list[torch.Tensor], state: torch.Tensor) -> None:
        for slot, a in zip(venv._slots, infer(obs, state)):
            slot[rows[g]] = a.numpy()
        venv._send(venv._workers[g], ("step", None), "stepping")

    def groups(steps: int) -> None:
        for g in range(len(rows)):
            send(g, [o[rows[g]] for o in current["obs"]], current["state"][rows[g]])
        for _ in range(steps):
            for g, worker in enumerate(venv._workers):
                venv._receive(worker, "stepping")
                views = venv._views
                send(g, [torch.from_numpy(views[f"obs{i}"][rows[g]].copy()) for i in range(n_agents)],
                     torch.from_numpy(views["state"][rows[g]].copy()))
        for worker in venv._workers:
            venv._receive(worker, "stepping")

    try:
        for n in (venv.n_envs, rows[0].stop - rows[0].start):
            obs_n, state_n = [o[:n] for o in current["obs"]], current["state"][:n]
            start = time.process_time()
            for _ in range(500):
                infer(obs_n, state_n)
            print(f"inference on {n} envs: {(time.process_time() - start) / 500 * 1e6:.0f} µs CPU per call")
        sync(20)
        groups(20)
        for _ in range(args.rounds):
            for name, run in (("sync", sync), ("groups", groups)):
                k0, c0, w0 = workers_cpu(venv), time.process_time(), time.perf_counter()
                run(args.steps)
                wall, cpu, k = time.perf_counter() - w0, time.process_time() - c0, workers_cpu(venv) - k0
                us = 1e6 / args.steps
                print(f"{name:7s} wall {wall * us:6.0f} µs/step ({venv.n_envs * args.steps / wall:6.0f} env-steps/s)"
                      f"  parent CPU {cpu * us:5.0f}  workers CPU {k * us:5.0f} µs/step"
                      f"  load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        stages.close()


if __name__ == "__main__":
    main()
