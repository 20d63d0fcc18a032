"""Torch operations dispatched per env step (collection) and per sample (update), beside CPU time.

    python benchmarks/ops_count.py                                     # happo_mpe_torch_spread.toml, as shipped
    python benchmarks/ops_count.py --variant policy.batch_agents=true --variant updater.kind=simultaneous \
        --variant updater.kind=simultaneous,policy.batch_agents=true
    python benchmarks/ops_count.py pipelines/ippo_mpe_spread_jaxmarl.toml --variant policy.batch_agents=true
    python benchmarks/ops_count.py pipelines/matd3_mpe_spread.toml --set env.kind=mpe_torch \
        --variant policy.batch_agents=true                # off-policy: after the warm-up

Two counters run over one whole iteration (after a warm-up iteration that is not counted):

- ``aten``: every ATen operator call that reaches a kernel (a ``TorchDispatchMode``: what each
  op costs on a CPU in dispatch overhead and on a GPU in a kernel launch; ops inside a
  ``torch.compile``d graph's fused kernels are not dispatched, its extern calls, mm say, are);
- ``torch``: every torch call made from Python (a ``TorchFunctionMode``).

A third count, under ``torch.profiler`` over one more iteration before those two, gives top-level ATen ops and
kernel launches for collection and update (it sees ``[policy] compile``'s graphs as they run).

The first two are split by phase: ``inference`` (the team's ``act`` and the critic in the collector),
``env`` (``venv.step``), ``buffer`` (the rest of the collection), ``update`` (returns and the
updater).  Collection phases are per env step (one env of the vector for one step), the
update per sample (one env step's row; the same number).  CPU microseconds per env step of each
phase come from a separate, uncounted iteration (the counters slow what they count).

An off-policy pipeline first fills its random warm-up (uncounted), so the counted iterations
act with the team and take gradient steps; its update is counted per env step collected in the
iteration (``rollout_length x n_envs``), whatever its ``updates_per_round`` and batch size.

One JSON line per variant (the baseline first: the pipeline as given), then a table.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from harl.compose import build_stages
from harl.config.loading import load_spec_and_notes

PHASES = ("inference", "env", "buffer", "update")


class Phase:
    """The phase the process is in (wrapped methods set it), and the CPU time spent in each."""

    def __init__(self) -> None:
        self.now = "buffer"
        self.cpu: Counter[str] = Counter()

    def wrap(self, obj: Any, name: str, phase: str) -> None:
        method: Callable[..., Any] | None = getattr(obj, name, None)
        if method is None:
            return

        def inside(*args: Any, **kwargs: Any) -> Any:
            before, self.now = self.now, phase
            start = time.process_time()
            try:
                return method(*args, **kwargs)
            finally:
                self.cpu[phase] += time.process_time() - start
                self.now = before

        object.__setattr__(obj, name, inside)


class AtenCounter(TorchDispatchMode):
    def __init__(self, phase: Phase) -> None:
        super().__init__()
        self.phase = phase
        self.counts: Counter[str] = Counter()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.counts[self.phase.now] += 1
        self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


class FunctionCounter(TorchFunctionMode):
    def __init__(self, phase: Phase) -> None:
        super().__init__()
        self.phase = phase
        self.counts: Counter[str] = Counter()

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.counts[self.phase.now] += 1
        return func(*args, **(kwargs or {}))


def profile_counts(stages: Any) -> dict[str, dict[str, int]]:
    """One more iteration under ``torch.profiler``, collection and update apart: ATen ops called
    from outside any other ATen op (a compiled graph's extern calls count, its fused kernels do
    not) and kernel launches (``cudaLaunchKernel``; 0 on a CPU).  Works with ``compile``, where
    the dispatch-mode counter above makes dynamo run the graphs eagerly."""
    from torch.profiler import ProfilerActivity, profile

    out: dict[str, dict[str, int]] = {}
    for name, step in (("collection", lambda: stages.collector.collect(stages.buffer)),
                       ("update", lambda: (stages.returns.compute(stages.buffer) if stages.returns is not None
                                           else None, stages.updater.update(stages.buffer, 0.0)))):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        top = launches = 0
        for event in prof.events():
            if event.name.startswith("aten::"):
                parent = event.cpu_parent
                while parent is not None and not parent.name.startswith("aten::"):
                    parent = parent.cpu_parent
                top += parent is None
            elif "LaunchKernel" in event.name:
                launches += 1
        out[name] = {"aten_top_level": top, "kernel_launches": launches}
    return out


def iteration(stages: Any) -> None:
    stages.collector.collect(stages.buffer)
    if stages.returns is not None:
        stages.returns.compute(stages.buffer)
    stages.updater.update(stages.buffer, 0.0)


def measure(path: str, overrides: list[str], top: int) -> dict[str, Any]:
    spec, _ = load_spec_and_notes(path, ["logging.progress=false", *overrides])
    stages = build_stages(spec)
    try:
        phase = Phase()
        collector = stages.collector
        for obj, names in ((getattr(collector, "team", None), ("act", "explore")),
                           (getattr(collector, "critic", None), ("value", "step"))):
            for name in names if obj is not None else ():
                phase.wrap(obj, name, "inference")
        phase.wrap(stages.venv, "step", "env")
        if stages.returns is not None:
            phase.wrap(stages.returns, "compute", "update")
        phase.wrap(stages.updater, "update", "update")
        while getattr(collector, "warming_up", False):  # off-policy: random actions, no gradient steps
            collector.collect(stages.buffer)
        iteration(stages)  # warm-up: allocators, caches, compiled graphs
        phase.cpu.clear()
        cpu0 = time.process_time()
        iteration(stages)
        total_cpu = time.process_time() - cpu0
        cpu = dict(phase.cpu)
        cpu["buffer"] = total_cpu - sum(v for k, v in cpu.items() if k != "buffer")
        profiled = profile_counts(stages)  # before the modes below, under which dynamo may give up a graph
        aten, function = AtenCounter(phase), FunctionCounter(phase)
        with function, aten:
            iteration(stages)
        n = getattr(stages.buffer, "n_samples", None) or collector.steps_per_iteration
    finally:
        stages.close()
    return {
        "pipeline": path, "overrides": overrides, "samples_per_iteration": n,
        "aten_per_env_step": {k: round(aten.counts[k] / n, 3) for k in PHASES},
        "torch_calls_per_env_step": {k: round(function.counts[k] / n, 3) for k in PHASES},
        "aten_per_iteration": {k: aten.counts[k] for k in PHASES},
        "cpu_us_per_env_step": {k: round(cpu.get(k, 0.0) / n * 1e6, 1) for k in PHASES},
        "profiler_per_env_step": {k: {m: round(v / n, 3) for m, v in c.items()} for k, c in profiled.items()},
        "top_aten_ops": dict(aten.ops.most_common(top)),
        "load": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pipeline", nargs="?", default="pipelines/happo_mpe_torch_spread.toml")
    p.add_argument("--set", dest="overrides", action="append", default=[], help="applies to every variant")
    p.add_argument("--variant", action="append", default=[],
                   help="comma-separated overrides of one variant, beside the baseline (repeatable)")
    p.add_argument("--top", type=int, default=12, help="most frequent ATen ops to list")
    args = p.parse_args()
    torch.set_num_threads(1)
    rows = []
    for variant in ["", *args.variant]:
        extra = [v for v in variant.split(",") if v]
        row = measure(args.pipeline, [*args.overrides, *extra], args.top)
        row["variant"] = variant or "baseline"
        print(json.dumps(row), flush=True)
        rows.append(row)
    print(f"\n{'variant':<58} " + " ".join(f"{k:>10}" for k in PHASES) + "   (ATen ops per env step; CPU us)")
    for row in rows:
        ops = " ".join(f"{row['aten_per_env_step'][k]:>10.2f}" for k in PHASES)
        us = " ".join(f"{row['cpu_us_per_env_step'][k]:>6.1f}" for k in PHASES)
        print(f"{row['variant'][:58]:<58} {ops}   {us}")
    print(f"\n{'variant':<58} {'collection':>12} {'update':>12}   (profiler: top-level ATen ops / kernel launches "
          "per env step)")
    for row in rows:
        cells = " ".join(f"{row['profiler_per_env_step'][k]['aten_top_level']:>6.2f}/"
                         f"{row['profiler_per_env_step'][k]['kernel_launches']:<5.2f}" for k in ("collection", "update"))
        print(f"{row['variant'][:58]:<58} {cells}")


if __name__ == "__main__":
    main()
