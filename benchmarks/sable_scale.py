"""Sable and MAT at 8 to 1,024 agents: peak memory and time of acting and of one training minibatch
(issue 57, item 3).

Each (algorithm, agent count, phase) runs in a fresh process whose address space is capped
(``resource.setrlimit(RLIMIT_AS)``, ``--cap-gib``): a configuration that cannot fit fails there with a
``MemoryError`` instead of taking the machine down, and its peak resident set (``VmHWM``) is its own.
Before starting one, ``harl.sizes.team_model_train_bytes`` predicts the training minibatch's activations;
a configuration predicted over the cap is not run, its prediction reported instead.

What runs is the networks, not the env: the torch MPE's simple_spread with N agents observes every other
agent and landmark (``4 + 2N + 4(N - 1)`` = 6N floats per agent, ``harl/envs/mpe_torch/spread.py``), so its
observations alone are quadratic in N (25 MB per env step at 1,024 agents) and would hide what the networks
cost.  The networks read synthetic observations of spread's 3-agent width (18 floats) and 5 discrete actions,
with no agent ids appended (a one-hot of N per agent would be quadratic too).

* act: one collection step of ``--n-envs`` envs (the policy's ``sample``: encoder over all agents, decoder
  agent by agent, as collection calls it);
* train: one minibatch update of ``--steps`` env steps: the objective's own loss (``SableLearner.loss`` with
  ``sable_v``'s value loss; ``TransformerLearner.loss`` with a squared value loss), backward, Adam.

Algorithms: ``sable-ff`` (feed-forward, ``agents_chunk_size`` = ``--chunk``), ``sable-ff-whole`` (the same
without chunks), ``sable`` (recurrent, rows of ``--timesteps`` steps, agents chunked timestep by timestep),
``mat`` (harl's MAT, 1 block, width 64, 1 head as its MPE pipeline).

    python benchmarks/sable_scale.py                     # the table of docs/sable.md
    python benchmarks/sable_scale.py --agents 8 64 --algorithms sable-ff mat
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OBS_DIM, N_ACTIONS, WIDTH, HEADS, BLOCKS = 18, 5, 64, 1, 1
ALGORITHMS = ("sable-ff", "sable-ff-whole", "sable", "mat")
GIB = 1024 ** 3


def status_kib(field: str) -> int:
    """A ``/proc/self/status`` field in KiB (VmHWM: the peak resident set; VmRSS: now)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def predicted_bytes(algorithm: str, n_agents: int, args: argparse.Namespace) -> int:
    from harl.sizes import team_model_train_bytes

    kind = "mat" if algorithm == "mat" else "sable"
    chunk = 0 if algorithm in ("mat", "sable-ff-whole") else min(args.chunk, n_agents)
    timesteps = args.timesteps if algorithm == "sable" else 1
    return team_model_train_bytes(kind, args.steps, n_agents, WIDTH, HEADS, BLOCKS, OBS_DIM, chunk, timesteps)


# ----------------------------------------------------------------------------------------- the child


def build(algorithm: str, n_agents: int, args: argparse.Namespace) -> Any:
    import torch
    from gymnasium import spaces

    obs_spaces = [spaces.Box(-1.0, 1.0, (OBS_DIM,))] * n_agents
    act_spaces = [spaces.Discrete(N_ACTIONS)] * n_agents
    if algorithm == "mat":
        from harl.policy.mat_policy import TransformerPolicy

        return TransformerPolicy(obs_spaces, act_spaces, BLOCKS, WIDTH, HEADS)
    from harl.policy.sable_policy import SablePolicy

    chunk = None if algorithm == "sable-ff-whole" else min(args.chunk, n_agents)
    torch.manual_seed(0)
    return SablePolicy(obs_spaces, act_spaces, memory=algorithm == "sable", agent_id=False, n_block=BLOCKS,
                       embed_dim=WIDTH, n_head=HEADS, chunk_agents=chunk)


def act_once(policy: Any, algorithm: str, obs: list[Any], starts: Any) -> None:
    if algorithm == "mat":
        policy.sample(obs, None)
    else:
        policy.sample(obs, None, starts=starts, carried=None)


def train_step(policy: Any, algorithm: str, n_agents: int, args: argparse.Namespace) -> Any:
    """A closure running one minibatch update on synthetic data of ``args.steps`` env steps."""
    import torch

    g = torch.Generator().manual_seed(1)
    steps = args.steps
    if algorithm == "mat":
        from harl.update.objectives.mat import TeamBatch, TransformerLearner, TransformerPPOConfig

        learner = TransformerLearner(policy, TransformerPPOConfig(), g)
        batch = TeamBatch(obs=torch.randn(steps, n_agents, OBS_DIM, generator=g),
                          actions=torch.randint(0, N_ACTIONS, (steps, n_agents, 1), generator=g).float(),
                          old_log_probs=torch.full((steps, n_agents, 1), -1.6), avail=None,
                          active=torch.ones(steps, n_agents), advantages=torch.randn(steps, n_agents, generator=g),
                          old_values=torch.zeros(steps, n_agents), returns=torch.randn(steps, n_agents, generator=g))

        def value_loss(values: torch.Tensor, mb: Any) -> torch.Tensor:
            return (values - mb.returns).square().mean()

        def run() -> None:
            loss = learner.loss(batch, value_loss, 1.0)[0]
            learner.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            learner.optimizer.step()
        return run
    from harl.update.objectives.sable import SableBatch, SableConfig, SableLearner
    from harl.update.sable_values import SableValueLoss, SableValues, SableValuesConfig

    memory = algorithm == "sable"
    rows, t = (steps // args.timesteps, args.timesteps) if memory else (steps, 1)
    learner = SableLearner(policy, SableConfig(memory=memory, agent_id=False), g)
    value = SableValueLoss(SableValues(policy), SableValuesConfig())
    starts = torch.zeros(rows, t, dtype=torch.bool)
    starts[:, 0] = True
    shape = (rows, t, n_agents)
    batch = SableBatch(obs=torch.randn(*shape, OBS_DIM, generator=g),
                       actions=torch.randint(0, N_ACTIONS, shape, generator=g), old_log_probs=torch.full(shape, -1.6),
                       legal=None, starts=starts, advantages=torch.randn(*shape, generator=g),
                       old_values=torch.zeros(shape), returns=torch.randn(*shape, generator=g),
                       hidden=policy.zero_hidden(rows) if memory else None)

    def run_sable() -> None:
        loss = learner.loss(batch, value, 0.5)[0]
        learner.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        learner.optimizer.step()
    return run_sable


def child(args: argparse.Namespace) -> None:
    cap = int(args.cap_gib * GIB)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    import torch

    torch.set_num_threads(args.threads)
    algorithm, n_agents, phase = args.child
    n_agents = int(n_agents)
    out: dict[str, Any] = {}
    try:
        policy = build(algorithm, n_agents, args)
        if phase == "act":
            g = torch.Generator().manual_seed(2)
            obs = [torch.rand(args.n_envs, OBS_DIM, generator=g) for _ in range(n_agents)]
            starts = torch.ones(args.n_envs)
            run = lambda: act_once(policy, algorithm, obs, starts)  # noqa: E731
        else:
            run = train_step(policy, algorithm, n_agents, args)
        out["rss_before_kib"] = status_kib("VmRSS")
        times = []
        began = time.perf_counter()
        while len(times) < args.repeats and (not times or time.perf_counter() - began < args.budget_s):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        out.update(ok=True, seconds=times, peak_kib=status_kib("VmHWM"))
    except MemoryError:
        out.update(ok=False, error="MemoryError under the address-space cap", peak_kib=status_kib("VmHWM"))
    except RuntimeError as exc:  # torch's allocator: "DefaultCPUAllocator: can't allocate memory"
        if "memory" not in str(exc).lower():
            raise
        out.update(ok=False, error=str(exc).splitlines()[0][:200], peak_kib=status_kib("VmHWM"))
    print(json.dumps(out))


# ---------------------------------------------------------------------------------------- the parent


def run_one(algorithm: str, n_agents: int, phase: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", algorithm, str(n_agents), phase,
               "--n-envs", str(args.n_envs), "--steps", str(args.steps), "--timesteps", str(args.timesteps),
               "--chunk", str(args.chunk), "--cap-gib", str(args.cap_gib), "--threads", str(args.threads),
               "--repeats", str(args.repeats), "--budget-s", str(args.budget_s)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"over {args.timeout_s} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"ok": False, "error": f"exit {done.returncode}: {tail[0][:200]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def fitted_exponent(points: list[tuple[int, float]]) -> float | None:
    """The slope of log(y) on log(N), least squares (None with fewer than two points)."""
    import math

    pts = [(math.log(n), math.log(y)) for n, y in points if y > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[8, 64, 512, 1024])
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), choices=ALGORITHMS)
    parser.add_argument("--n-envs", type=int, default=2, help="envs of one acting step")
    parser.add_argument("--steps", type=int, default=32, help="env steps of one training minibatch")
    parser.add_argument("--timesteps", type=int, default=8, help="the recurrent Sable's rollout length per row")
    parser.add_argument("--chunk", type=int, default=32, help="Sable's agents_chunk_size")
    parser.add_argument("--cap-gib", type=float, default=20.0, help="address-space cap of each configuration")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per configuration")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=30.0, help="no further repeat after this long")
    parser.add_argument("--timeout-s", type=int, default=150, help="a configuration's wall-clock limit")
    parser.add_argument("--phases", nargs="+", default=["act", "train"], choices=["act", "train"])
    parser.add_argument("--no-skip", action="store_true", help="run what is predicted over the cap too (the cap "
                        "then stops it)")
    parser.add_argument("--json", type=Path, help="write every result here")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    rows = []
    for algorithm in args.algorithms:
        for n in args.agents:
            row: dict[str, Any] = {"algorithm": algorithm, "agents": n,
                                   "predicted_train_bytes": predicted_bytes(algorithm, n, args)}
            for phase in ("act", "train"):
                if phase not in args.phases:
                    row[phase] = {"ok": False, "error": "not asked"}
                    continue
                if phase == "train" and row["predicted_train_bytes"] > args.cap_gib * GIB and not args.no_skip:
                    row[phase] = {"ok": False, "error": "not run: predicted over the cap"}
                    continue
                row[phase] = run_one(algorithm, n, phase, args)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\nn_envs {args.n_envs} (act), {args.steps} env steps per minibatch (train), chunk {args.chunk}, "
          f"cap {args.cap_gib} GiB, {args.threads} thread(s)")
    print("| algorithm | agents | act ms / env step | act peak MiB | train ms / env step | train peak MiB | "
          "train net MiB | predicted MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        cells = [row["algorithm"], f"{row['agents']:,}"]
        for phase, per in (("act", args.n_envs), ("train", args.steps)):
            r = row[phase]
            if r.get("ok"):
                cells.append(f"{1000 * min(r['seconds']) / per:,.2f}")
                cells.append(f"{r['peak_kib'] / 1024:,.0f}")
                if phase == "train":
                    cells.append(f"{(r['peak_kib'] - r['rss_before_kib']) / 1024:,.0f}")
            else:
                cells.extend([r.get("error", "failed"), "-"] + (["-"] if phase == "train" else []))
        cells.append(f"{row['predicted_train_bytes'] / 2**20:,.0f}")
        print("| " + " | ".join(cells) + " |")
    print()
    for algorithm in args.algorithms:
        pts = [(r["agents"], r["train"]["peak_kib"] - r["train"]["rss_before_kib"]) for r in rows
               if r["algorithm"] == algorithm and r["train"].get("ok")]
        big = [p for p in pts if p[0] >= 64]
        exp_all, exp_big = fitted_exponent(pts), fitted_exponent(big)
        print(f"{algorithm}: train net peak ~ N^{exp_all if exp_all is None else round(exp_all, 2)} "
              f"(8..1024), N^{exp_big if exp_big is None else round(exp_big, 2)} (64..1024)")
    print("\nAt the shipped pipelines' minibatches (mat_mpe_spread.toml: 128 envs x 25 steps, 1 minibatch = 3,200 env "
          "steps; the Sable pipelines: 32 envs x 128 steps / 2 = 2,048), from the measured net peak per env step, and "
          "harl.sizes' prediction:")
    for row in rows:
        r = row["train"]
        if not r.get("ok"):
            continue
        per_step = (r["peak_kib"] - r["rss_before_kib"]) * 1024 / args.steps
        shipped = 3200 if row["algorithm"] == "mat" else 2048
        scaled = argparse.Namespace(**{**vars(args), "steps": shipped})
        print(f"  {row['algorithm']} at {row['agents']:,} agents: {per_step / 2**20:,.2f} MiB per env step; "
              f"{shipped:,} steps: {per_step * shipped / GIB:,.1f} GiB measured-scaled, "
              f"{predicted_bytes(row['algorithm'], row['agents'], scaled) / GIB:,.1f} GiB predicted; "
              f"the most steps in 24 GiB: {int(24 * GIB / per_step):,}")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: v for k, v in vars(args).items() if k != "json"},
                                         "rows": rows}, indent=1, default=str))


if __name__ == "__main__":
    main()
