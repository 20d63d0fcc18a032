"""The compiled collection step against the eager one: collection env-steps/s, interleaved.

    python benchmarks/compiled_collect.py pipelines/happo_mpe_torch_spread.toml --rounds 5
    python benchmarks/compiled_collect.py pipelines/ippo_mpe_spread_jaxmarl.toml --rounds 5 --fallback-random

Builds the pipeline twice in this process ([collector] compile = "off" and "on"), runs one
rollout of each to warm up (the compiled one compiles then, or loads inductor's cache: its
seconds are printed), then ``--rounds`` rounds of ``--rollouts`` rollouts each, eager and compiled
alternately, and prints each round's env-steps/s of collection only (no update: the networks do
not change, which does not change a step's cost), the ratio per round and the median ratio, with
``uptime``'s load.  ``--fallback-random off`` measures what matching eager's random numbers costs
(the compiled step then draws with inductor's own generator).  One torch thread, as a run has.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import tomllib
import torch

from harl.collect import compiled
from harl.compose import build_stages
from harl.config.loading import structure_pipeline


def _stages(raw: dict[str, Any], mode: str, source: str) -> Any:
    table = dict(raw)
    table["collector"] = {**raw["collector"], "compile": mode}
    return build_stages(structure_pipeline(table, source))


def _rate(stages: Any, rollouts: int) -> float:
    began = time.perf_counter()
    for _ in range(rollouts):
        stages.collector.collect(stages.buffer)
    return rollouts * stages.collector.steps_per_iteration / (time.perf_counter() - began)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pipeline", type=Path)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rollouts", type=int, default=4, help="rollouts per round and side")
    p.add_argument("--set", action="append", default=[], help="collector.KEY=INT override, e.g. collector.n_envs=16")
    p.add_argument("--device", default="cpu", help="cuda: the worlds and the networks on the GPU (CUDA graphs)")
    p.add_argument("--fallback-random", choices=("on", "off"), default="on",
                   help="off: the compiled step draws with inductor's generator (not eager's numbers)")
    args = p.parse_args()
    torch.set_num_threads(1)
    raw = tomllib.loads(args.pipeline.read_text())
    raw["run"]["device"] = args.device
    raw["env"]["device"] = args.device
    for item in args.set:
        key, value = item.split("=", 1)
        table, name = key.split(".", 1)
        raw[table][name] = int(value)
    if args.fallback_random == "off":
        import torch._inductor.config as inductor_config

        original = compiled.CompiledCollection.__init__

        def patched(self: Any, *a: Any, **k: Any) -> None:
            with inductor_config.patch(fallback_random=False):
                original(self, *a, **k)
        compiled.CompiledCollection.__init__ = patched  # type: ignore[method-assign]
        k_options = compiled.CompiledCollection._call

        def call(self: Any, kind: str, *a: Any) -> Any:
            with inductor_config.patch(fallback_random=False):
                return k_options(self, kind, *a)
        compiled.CompiledCollection._call = call  # type: ignore[method-assign]
    eager, fast = _stages(raw, "off", str(args.pipeline)), _stages(raw, "on", str(args.pipeline))
    try:
        torch.manual_seed(0)
        _rate(eager, 1)
        torch.manual_seed(0)  # the same draws: the two first rollouts agree to float rounding
        began = time.perf_counter()
        _rate(fast, 1)
        assert fast.collector.compiled is not None
        worst = max(float((x - y).abs().max()) for name in ("values", "rewards", "state")
                    for x, y in [(getattr(eager.buffer, name), getattr(fast.buffer, name))])
        worst = max([worst] + [float((x - y).abs().max()) for x, y in zip(eager.buffer.actions, fast.buffer.actions)])
        print(f"first rollout, eager against compiled: max |difference| {worst:.2e} "
              f"({'ok' if worst < 1e-3 else 'DIFFERENT'}: values, rewards, states, actions)", flush=True)
        print(f"cache {compiled.cache_dir()}: first compiled rollout {time.perf_counter() - began:.1f} s "
              f"(compiling or loading: {fast.collector.compiled.compile_s:.1f} s)", flush=True)
        ratios = []
        for r in range(args.rounds):
            a, b = _rate(eager, args.rollouts), _rate(fast, args.rollouts)
            ratios.append(b / a)
            print(f"round {r + 1}: eager {a:,.0f} env-steps/s  compiled {b:,.0f}  x{b / a:.2f}  "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
        print(f"median ratio x{statistics.median(ratios):.2f} over {args.rounds} rounds")
    finally:
        eager.close()
        fast.close()


if __name__ == "__main__":
    main()
