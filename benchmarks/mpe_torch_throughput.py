"""MPE stepped in torch (``kind = "mpe_torch"``) against mpe2 through harl's adapter, in one run.

    python benchmarks/mpe_torch_throughput.py                      # raw rates + training rates
    python benchmarks/mpe_torch_throughput.py --only raw --envs 1024
    python benchmarks/mpe_torch_throughput.py --device cuda --envs 8192,65536   # on a GPU

``raw``: env-steps/s of simple_spread (continuous actions) under uniformly random actions,
one vector env per size, torch on one thread: the torch backend (actions as tensors on its
device, as collectors hand them) and mpe2 through harl's adapter (inline backend, one
process; its rate per env does not depend on the number of envs, so fewer steps are timed
at large sizes, and none above 1,024 envs: see ``MPE2_MAX_ENVS``).  ``train``: HAPPO iterations (collect + returns + update, evaluation off)
of the shipped ``happo_mpe_spread.toml`` on mpe2 (as shipped: subprocess env workers), the
same file switched to ``kind = "mpe_torch"``, and ``happo_mpe_torch_spread.toml`` (tuned
for many envs).  Every line carries the machine's load average: on a shared machine the
rates are lower bounds of a quiet machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from env_throughput import vector_rate  # noqa: E402

from harl.compose import build_stages  # noqa: E402
from harl.config.loading import load_spec_and_notes  # noqa: E402
from harl.envs.mpe import MPEConfig  # noqa: E402
from harl.envs.mpe_torch import MPETorchConfig  # noqa: E402

ROOT = Path(__file__).parent.parent
MPE2_MAX_ENVS = 1024
"""Each mpe2 env holds a 700 x 700 pygame surface (~2 MB): 8,192 of them would take 16 GB."""
TRAIN_CASES = [
    ("mpe2, HARL's settings (shipped)", "pipelines/happo_mpe_spread.toml", []),
    ("mpe_torch, HARL's settings", "pipelines/happo_mpe_spread.toml", ["env.kind=mpe_torch"]),
    ("mpe_torch, tuned for many envs", "pipelines/happo_mpe_torch_spread.toml", []),
]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def raw(sizes: list[int], device: str, mpe2: bool) -> None:
    for n in sizes:
        steps = max(50, 200_000 // n)
        wall, cpu = vector_rate(MPETorchConfig(device=device), n, steps)
        line: dict[str, Any] = {"case": "raw", "n_envs": n, "device": device,
                                "torch_env_steps_per_s": round(wall), "torch_per_cpu_s": round(cpu)}
        if mpe2 and n <= MPE2_MAX_ENVS:
            wall, cpu = vector_rate(MPEConfig(), n, max(5, 20_000 // n))
            line.update(mpe2_env_steps_per_s=round(wall), mpe2_per_cpu_s=round(cpu))
            line["speed_up"] = round(line["torch_env_steps_per_s"] / wall, 1)
        print(json.dumps({**line, "load": load()}), flush=True)


def train(iterations: int, device: str) -> None:
    for label, path, overrides in TRAIN_CASES:
        extra = [f"env.device={device}", f"run.device={device}"] if "torch" in label else []
        spec, _ = load_spec_and_notes(ROOT / path, ["logging.progress=false", *overrides, *extra])
        stages = build_stages(spec)
        try:
            timings = []
            for i in range(iterations + 1):
                t0 = time.perf_counter()
                stages.collector.collect(stages.buffer)
                t1 = time.perf_counter()
                stages.returns.compute(stages.buffer)
                stages.updater.update(stages.buffer, 0.0)
                if i > 0:  # the first iteration warms up allocators and caches
                    timings.append((t1 - t0, time.perf_counter() - t1))
            samples = stages.buffer.n_samples
        finally:
            stages.close()
        collect, update = (float(np.mean(x)) for x in zip(*timings))
        print(json.dumps({
            "case": "train", "pipeline": label, "file": path, "overrides": overrides + extra,
            "n_envs": spec.collector.n_envs, "rollout_length": spec.collector.rollout_length,
            "train_env_steps_per_s": round(samples / (collect + update)),
            "collect_env_steps_per_s": round(samples / collect),
            "collect_share": round(collect / (collect + update), 2), "load": load(),
        }), flush=True)
    # Before the raw cases (which build up to 1,024 mpe2 envs in this process).
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"case": "peak_rss_mb", "process": round(own / 1024),
                      "largest_env_worker": round(children / 1024)}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["raw", "train"])
    p.add_argument("--envs", default="20,256,1024,8192", help="comma-separated batch sizes (raw)")
    p.add_argument("--device", default="cpu", help="torch device of the torch backend")
    p.add_argument("--no-mpe2", action="store_true", help="raw: skip mpe2 (e.g. at GPU sizes)")
    p.add_argument("--iterations", type=int, default=3, help="timed training iterations per case")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.only != "raw":
        train(args.iterations, args.device)
    if args.only != "train":
        raw([int(n) for n in args.envs.split(",")], args.device, not args.no_mpe2)


if __name__ == "__main__":
    main()
