"""Throughput benchmark: env-steps/s of training vs. the raw vector env, peak memory.

    python benchmarks/throughput.py                       # HAPPO and MAPPO, HARL's MPE settings
    python benchmarks/throughput.py --iterations 5 --set collector.backend=subprocess
    python benchmarks/throughput.py pipelines/happo_vmas_transport.toml --iterations 2 \
        --set collector.n_envs=1024 --set run.device=cpu      # VMAS on tensors end to end

For each pipeline: build it, run a warm-up iteration, then time ``--iterations`` full
iterations (collect + returns + update; evaluation off).  In the same process it times
the same vector env under uniformly random actions (the raw env rate; a tensor-native
env such as VMAS gets them as tensors on its device), and for MPE pipelines mpe2's public
``parallel_env`` API stepping the same scenario one env at a time, for reference.
``collect_env_steps_per_s`` is the rate of the collection phase alone.  torch runs on
the pipeline's ``[run] torch_threads`` (default 1).
Peak RSS covers this process and its children (subprocess env workers).
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np
import torch

from harl.compose import build_stages
from harl.config.loading import load_pipeline
from harl.envs.protocol import is_tensor_native

PIPELINES = ["pipelines/happo_mpe_spread.toml", "pipelines/mappo_mpe_spread.toml"]


def random_actions(venv, rng: np.random.Generator) -> list[np.ndarray]:  # noqa: ANN001
    out = []
    for space in venv.action_spaces:
        if hasattr(space, "n"):
            out.append(rng.integers(0, space.n, size=(venv.n_envs, 1)))
        else:
            out.append(rng.uniform(space.low, space.high, size=(venv.n_envs, *space.shape)).astype(np.float32))
    return out


def raw_rate(venv, steps: int) -> float:  # noqa: ANN001
    rng = np.random.default_rng(0)
    actions = [random_actions(venv, rng) for _ in range(16)]
    if is_tensor_native(venv):
        actions = [[torch.as_tensor(a, device=venv.device) for a in batch] for batch in actions]
    venv.reset(seed=0)
    start = time.perf_counter()
    for t in range(steps):
        venv.step(actions[t % 16])
    return steps * venv.n_envs / (time.perf_counter() - start)


def parallel_api_rate(spec, steps: int = 4000) -> float:  # noqa: ANN001
    """mpe2's public parallel_env on one env (what HARL's MPE wrapper steps)."""
    import importlib

    from harl.envs.mpe import _SCENARIO_MODULES

    module = importlib.import_module(_SCENARIO_MODULES[spec.env.scenario])
    env = module.parallel_env(continuous_actions=spec.env.continuous_actions, max_cycles=spec.env.max_cycles)
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        if not env.agents:
            env.reset()
        env.step({a: env.action_space(a).sample() for a in env.agents})
    return steps / (time.perf_counter() - start)


def peak_rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (own + children) / 1024


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pipelines", nargs="*", default=PIPELINES)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--set", dest="overrides", action="append", default=[])
    args = p.parse_args()
    for path in args.pipelines:
        spec, _ = load_pipeline(path, ["logging.progress=false", *args.overrides])
        stages = build_stages(spec)
        try:
            it_steps = stages.buffer.n_samples
            timings = []
            for i in range(args.iterations + 1):
                t0 = time.perf_counter()
                stages.collector.collect(stages.buffer)
                t1 = time.perf_counter()
                stages.returns.compute(stages.buffer)
                stages.updater.update(stages.buffer, 0.0)
                t2 = time.perf_counter()
                if i > 0:  # the first iteration warms up allocators and caches
                    timings.append((t1 - t0, t2 - t1))
            collect = float(np.mean([c for c, _ in timings]))
            update = float(np.mean([u for _, u in timings]))
            train = it_steps / (collect + update)
            raw = raw_rate(stages.venv, spec.collector.rollout_length * 2)
        finally:
            stages.close()
        result = {
            "pipeline": path, "overrides": args.overrides, "device": str(stages.device),
            "n_envs": spec.collector.n_envs, "backend": spec.collector.backend,
            "train_env_steps_per_s": round(train), "collect_env_steps_per_s": round(it_steps / collect),
            "collect_s_per_iteration": round(collect, 3),
            "update_s_per_iteration": round(update, 3), "raw_vector_env_steps_per_s": round(raw),
            "train_vs_raw": round(train / raw, 3),
            "mpe2_parallel_api_steps_per_s": round(parallel_api_rate(spec)) if spec.env.kind == "mpe" else None,
            "peak_rss_mb": round(peak_rss_mb(), 1),
        }
        print(json.dumps(result))


if __name__ == "__main__":
    main()
