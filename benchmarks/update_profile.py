"""Where an on-policy iteration's time goes, per env step: env, act, returns, update arithmetic and
update overhead, with the update eager and compiled (``[updater] compile``; issue 58, item 1).

    python benchmarks/update_profile.py                                   # both pipelines, 3 rounds
    python benchmarks/update_profile.py pipelines/ippo_mpe_spread_jaxmarl.toml --rounds 5 --out profile.md
    python benchmarks/update_profile.py --iterations 1 --rounds 1 --warmup 1 --set collector.n_envs=8   # a check

For each pipeline (default: ``ippo_mpe_spread_jaxmarl.toml`` and ``happo_mpe_torch_spread.toml``) the
stages are built once per mode in this process, ``updater.compile = "off"`` (eager) and ``"on"`` (the
fused minibatch step compiled, ``harl.update.fused``), the collection as ``--collect`` says (default
"off": the eager collection step, whose env and acting can be told apart; "on": the compiled one).
Each mode first runs ``--warmup`` iterations (the compiled mode compiles then, or loads inductor's
cache: the seconds are printed), then ``--rounds`` rounds of ``--iterations`` iterations per mode,
the modes alternating within each round.  An iteration is timed phase by phase (wall clock):

- **collect**: ``collector.collect`` (the rollout: env steps, acting, critic values, buffer writes);
- **env**: the same number of vector steps of the pipeline's env alone (a third copy of the stages'
  env, eager, uniformly random actions), timed after each iteration; **act** is collect minus env
  (acting, V(s), the buffer's writes and the collector's own work).  With ``--collect on`` the env
  runs inside the compiled collection graph, so there only **collect** is a measurement of its own
  (act can come out below zero);
- **returns**: ``returns.compute`` (GAE, the advantages' normalisation);
- **update**: ``updater.update``; its **arithmetic** is measured, not assumed: one eager update is
  run under a ``TorchDispatchMode`` that records every matmul (``mm``, ``addmm``, ``bmm``,
  ``baddbmm``) with its shapes and strides, then each distinct matmul is timed alone in a loop on
  fresh tensors of the same layout, and the update's arithmetic is the sum of count x time per call
  (the compiled step runs the same matmuls: inductor calls the same kernels on the CPU).  The
  rest of the update (**overhead**) is Python, dispatch, autograd, the elementwise work, gathers,
  the optimiser's steps.

Printed: each phase in µs per env step (the median over rounds), the env-steps/s of a whole
iteration, the compiled mode's ratio to eager, the load (1 min) at the start and end, the torch
thread count, and the commit.  ``--out PATH`` writes the same table as markdown.  The machine's
other work shows in every number: quote the load beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from harl.compose import build_stages  # noqa: E402
from harl.config.loading import load_spec_and_notes  # noqa: E402

PIPELINES = ("pipelines/ippo_mpe_spread_jaxmarl.toml", "pipelines/happo_mpe_torch_spread.toml")
MODES = ("off", "on")
MATMULS = {"mm", "addmm", "bmm", "baddbmm"}


def load() -> float:
    return os.getloadavg()[0]


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


# ---------------------------------------------------------------------- the update's arithmetic


class MatmulRecord(TorchDispatchMode):
    """Counts each matmul the update dispatches, by op and by its inputs' shapes and strides."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[tuple[Any, ...]] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        name = func.overloadpacket.__name__
        if name in MATMULS:
            layout = tuple((tuple(a.shape), tuple(a.stride()), a.dtype) if isinstance(a, torch.Tensor) else a
                           for a in args)
            self.calls[(name, layout, tuple(sorted((kwargs or {}).items())))] += 1
        return func(*args, **(kwargs or {}))


def _is_layout(spec: Any) -> bool:
    return isinstance(spec, tuple) and len(spec) == 3 and isinstance(spec[2], torch.dtype)


def _fresh(spec: Any) -> Any:
    """A random tensor of a recorded (shape, stride, dtype); anything else as recorded."""
    if not _is_layout(spec):
        return spec
    shape, stride, dtype = spec
    size = 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 1
    return torch.randn(size, dtype=dtype).as_strided(shape, stride)


def time_alone(name: str, layout: tuple[Any, ...], kwargs: tuple[Any, ...], seconds: float = 0.05) -> float:
    """Seconds per call of one matmul on fresh tensors of the recorded layout (the median of five runs)."""
    args = [_fresh(spec) for spec in layout]
    op = getattr(torch.ops.aten, name)
    kw = dict(kwargs)
    op(*args, **kw)
    began, reps = time.perf_counter(), 0
    while time.perf_counter() - began < seconds / 5:
        op(*args, **kw)
        reps += 1
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            op(*args, **kw)
        runs.append((time.perf_counter() - t0) / reps)
    return statistics.median(runs)


def arithmetic_s(stages: Any, progress: float) -> tuple[float, int, float]:
    """(seconds of matmul arithmetic in one update, matmul calls, their GFLOP) of an eager update."""
    record = MatmulRecord()
    with record:
        stages.updater.update(stages.buffer, progress=progress)
    total, flops = 0.0, 0.0
    for (name, layout, kwargs), count in record.calls.items():
        total += count * time_alone(name, layout, kwargs)
        shapes = [spec[0] for spec in layout if _is_layout(spec)]
        a, b = shapes[-2], shapes[-1]
        flops += count * 2 * float(torch.tensor(a).prod()) * b[-1]
    return total, sum(record.calls.values()), flops / 1e9


# ---------------------------------------------------------------------- one iteration


def random_actions(venv: Any) -> list[torch.Tensor]:
    out = []
    for space in venv.action_spaces:
        if hasattr(space, "n"):
            out.append(torch.randint(0, int(space.n), (venv.n_envs, 1)).float())
        else:
            out.append(torch.rand(venv.n_envs, int(space.shape[0])) * 2 - 1)
    return out


def env_alone_s(venv: Any, steps: int) -> float:
    actions = [random_actions(venv) for _ in range(4)]
    began = time.perf_counter()
    for t in range(steps):
        venv.step(actions[t % 4])
    return time.perf_counter() - began


def iteration(stages: Any, progress: float) -> dict[str, float]:
    t0 = time.perf_counter()
    stages.collector.collect(stages.buffer)
    t1 = time.perf_counter()
    stages.returns.compute(stages.buffer)
    t2 = time.perf_counter()
    stages.updater.update(stages.buffer, progress=progress)
    t3 = time.perf_counter()
    return {"collect": t1 - t0, "returns": t2 - t1, "update": t3 - t2}


def profile(pipeline: str, overrides: list[str], modes: tuple[str, ...], collect: str, rounds: int,
            iterations: int, warmup: int, threads: int | None, say: Callable[[str], None]) -> list[dict[str, Any]]:
    built = {}
    for mode in modes:
        spec, _ = load_spec_and_notes(ROOT / pipeline, [*overrides, f"updater.compile={mode}",
                                                        f"collector.compile={collect}"])
        built[mode] = build_stages(spec, pipeline)
    env_spec, _ = load_spec_and_notes(ROOT / pipeline, overrides)
    env_stages = build_stages(env_spec, pipeline)
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        any_stages = built[modes[0]]
        per_iteration = any_stages.collector.steps_per_iteration
        vector_steps = per_iteration // env_stages.venv.n_envs
        env_stages.venv.reset(seed=0)
        total = max(1, int(getattr(env_spec.run, "total_env_steps", 10**7)) // per_iteration)
        done = dict.fromkeys(modes, 0)
        for mode in modes:
            began = time.perf_counter()
            for _ in range(warmup):
                iteration(built[mode], done[mode] / total)
                done[mode] += 1
            fused = getattr(built[mode].updater, "fused", None)
            compile_s = sum(getattr(getattr(learner, "fused", None), "compile_s", 0.0)
                            for learner in getattr(fused, "learners", []))
            say(f"{pipeline} updater.compile={mode}: {warmup} warm-up iteration(s) {time.perf_counter() - began:.1f} s"
                f" (compiling or loading the update's graphs: {compile_s:.1f} s; {getattr(fused, 'state', '?')})")
        arith, calls, gflop = arithmetic_s(built[modes[0]], done[modes[0]] / total)
        done[modes[0]] += 1
        say(f"{pipeline}: one update's matmuls: {calls} calls, {gflop:.3f} GFLOP, {arith * 1e3:.1f} ms alone "
            f"({gflop / arith:.1f} GFLOP/s)")
        samples: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
        loads = [load()]
        for r in range(rounds):
            for mode in modes:
                for _ in range(iterations):
                    times = iteration(built[mode], min(done[mode] / total, 0.999))
                    done[mode] += 1
                    times["env"] = env_alone_s(env_stages.venv, vector_steps)
                    samples[mode].append(times)
            say(f"round {r + 1}: " + "  ".join(
                f"{mode}: {per_iteration / statistics.median(sum(s[k] for k in ('collect', 'returns', 'update')) for s in samples[mode][-iterations:]):,.0f} env-steps/s"
                for mode in modes) + f"  load {load():.2f}")
        loads.append(load())
        rows = []
        for mode in modes:
            med = {k: statistics.median(s[k] for s in samples[mode]) for k in ("collect", "returns", "update", "env")}
            whole = med["collect"] + med["returns"] + med["update"]
            us = {"collect": med["collect"], "env": med["env"], "act": med["collect"] - med["env"],
                  "returns": med["returns"],
                  "update_arith": arith, "update_overhead": med["update"] - arith}
            rows.append({"pipeline": Path(pipeline).name, "mode": mode, "collect": collect,
                         **{k: v / per_iteration * 1e6 for k, v in us.items()},
                         "total": whole / per_iteration * 1e6, "rate": per_iteration / whole,
                         "threads": torch.get_num_threads(), "load": f"{loads[0]:.1f}-{loads[1]:.1f}",
                         "iterations": len(samples[mode])})
        return rows
    finally:
        for stages in (*built.values(), env_stages):
            stages.close()


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| pipeline | updater.compile | collect | env | act | returns | update arithmetic | update overhead | "
            "total (µs per env step) | env-steps/s | x eager | threads | load |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    eager = {r["pipeline"]: r["rate"] for r in rows if r["mode"] == "off"}
    lines = []
    for r in rows:
        ratio = r["rate"] / eager[r["pipeline"]] if r["pipeline"] in eager else float("nan")
        lines.append(f"| `{r['pipeline']}` | {r['mode']} | {r['collect']:.1f} | {r['env']:.1f} | {r['act']:.1f} | {r['returns']:.1f} | "
                     f"{r['update_arith']:.1f} | {r['update_overhead']:.1f} | {r['total']:.1f} | {r['rate']:,.0f} | "
                     f"x{ratio:.2f} | {r['threads']} | {r['load']} |")
    return head + "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pipelines", nargs="*", default=list(PIPELINES))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iterations", type=int, default=3, help="iterations per mode and round")
    p.add_argument("--warmup", type=int, default=2, help="iterations per mode before the rounds (the compile)")
    p.add_argument("--modes", default=",".join(MODES), help="updater.compile values, comma-separated")
    p.add_argument("--collect", choices=("off", "on"), default="off", help="collector.compile of every mode")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: the pipeline's)")
    p.add_argument("--set", action="append", default=[], help="a pipeline override, KEY=VALUE, e.g. collector.n_envs=8")
    p.add_argument("--out", type=Path, default=None, help="write the table (markdown) here too")
    args = p.parse_args()
    modes = tuple(args.modes.split(","))

    def say(text: str) -> None:
        print(text, flush=True)

    rows = []
    for pipeline in args.pipelines:
        rows += profile(pipeline, args.set, modes, args.collect, args.rounds, args.iterations, args.warmup,
                        args.threads, say)
    text = (f"commit {commit()}, torch {torch.__version__}, collector.compile = {args.collect}, "
            f"{args.rounds} rounds x {args.iterations} iterations per mode, medians\n\n" + table(rows))
    print("\n" + text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
