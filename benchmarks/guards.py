"""What dynamo's guards cost a compiled graph's call, and what ``harl.warm_calls.WarmCalls`` saves.

    python benchmarks/guards.py                                  # IPPO on JaxMARL's settings, 1 thread
    python benchmarks/guards.py --pipeline pipelines/happo_mpe_torch_spread.toml --calls 300

A run of the pipeline is built with its collection and update compiled and trained a few iterations
(the graphs compile, or load from inductor's cache). Then each ``WarmCalls`` graph (the collection
step, each learner's fused minibatch step) is called again with the arguments of its last call, in
rounds, four ways interleaved: its compiled function with every guard (``guards``), through
``WarmCalls`` (``warm``), the compiled function under the skipping stance alone (``stance``: the
floor ``WarmCalls`` approaches), and the kind check alone (``kind``). Printed: the median CPU
microseconds per call of each way (process CPU time, which another job on the machine disturbs
less than wall time; the load average is printed beside it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import harl  # noqa: E402
from harl.warm_calls import WarmCalls  # noqa: E402


def graphs(stages: Any) -> dict[str, WarmCalls]:
    """The run's ``WarmCalls`` graphs by name: the collection's two, each learner's fused step."""
    found: dict[str, WarmCalls] = {}
    seen: set[int] = set()

    def visit(obj: Any, path: str, depth: int) -> None:
        if id(obj) in seen or depth > 6:
            return
        seen.add(id(obj))
        if isinstance(obj, WarmCalls):
            found[path] = obj
            return
        if isinstance(obj, (torch.Tensor, torch.nn.Module, str, bytes, int, float)):
            return
        children = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (list, tuple)) \
            else vars(obj).items() if hasattr(obj, "__dict__") else ()
        for key, value in children:
            visit(value, f"{path}.{key}", depth + 1)

    for name in ("collector", "updater"):
        visit(getattr(stages, name), name, 0)
    return found


def recorded(warm: WarmCalls) -> tuple[Callable[..., Any], list[tuple[Any, ...]]]:
    """Wrap ``warm.fn`` so that the arguments of its calls are kept: (the compiled function, the box
    holding the last call's arguments)."""
    inner = warm.fn
    box: list[tuple[Any, ...]] = []

    def keep(*args: Any) -> Any:
        box[:] = [args]
        return inner(*args)

    warm.fn = keep
    return inner, box


def per_call_us(fn: Callable[[], Any], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e6


def timings(warm: WarmCalls, call: tuple[Any, ...], skip: Any, calls: int, rounds: int) -> dict[str, float]:
    """Median CPU µs per call of ``warm``'s graph on ``call``, each way (the module docstring)."""
    inner = warm.fn

    def stance() -> Any:
        with skip:
            return inner(*call)

    ways: dict[str, Callable[[], Any]] = {"guards": lambda: inner(*call), "warm": lambda: warm(*call),
                                          "stance": stance, "kind": lambda: warm.kind(call)}
    times: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(rounds):
        for way, fn in ways.items():
            times[way].append(per_call_us(fn, calls))
    return {way: statistics.median(t) for way, t in times.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pipeline", default="pipelines/ippo_mpe_spread_jaxmarl.toml")
    p.add_argument("--threads", type=int, default=1, help="run.torch_threads")
    p.add_argument("--calls", type=int, default=200, help="calls of a graph per way and round")
    p.add_argument("--rounds", type=int, default=10)
    args = p.parse_args()
    overrides = ["collector.compile=on", "updater.compile=on", f"run.torch_threads={args.threads}",
                 "evaluator.every_iterations=1000000", "run.total_env_steps=100000000"]
    run_dir = Path(tempfile.mkdtemp(prefix="harl-guards-")) / "run"
    try:
        with harl.start(ROOT / args.pipeline, overrides, run_dir=run_dir) as trainer:
            trainer.train(quiet=True, max_iterations=3)
            found = graphs(trainer.stages)
            kept = {name: recorded(w) for name, w in found.items()}
            trainer.train(quiet=True, max_iterations=1)
            skip = torch.compiler.set_stance("default", skip_guard_eval_unsafe=True)
            skip.__exit__(None, None, None)
            for name, warm in found.items():
                inner, box = kept[name]
                warm.fn = inner
                if box:
                    with torch.no_grad() if name.startswith("collector") else torch.enable_grad():
                        times = timings(warm, box[0], skip, args.calls, args.rounds)
                    print(f"{name}: " + "  ".join(f"{way} {t:8.1f} µs" for way, t in times.items())
                          + f"  load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        shutil.rmtree(run_dir.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
