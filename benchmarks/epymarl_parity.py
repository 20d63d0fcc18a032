"""Learning parity with EPyMARL: its runs' test returns beside harl's evaluation returns.

EPyMARL (uoe-agents/epymarl) writes each run's logged statistics to
``results/sacred/<alg>/<env key>/<run id>/info.json`` (``test_return_mean`` and the env steps
``test_return_mean_T`` it was measured at, just past each ``test_interval``) and the run's
seed to ``config.json``; harl writes ``metrics.csv`` (``eval_return`` at ``env_steps``).

    # EPyMARL, from its folder (its requirements' sacred beside it in epy_deps):
    PYTHONPATH=../epy_deps python src/main.py --config=ippo --env-config=gymma with \\
        env_args.time_limit=50 env_args.key="lbforaging:Foraging-8x8-2p-2f-coop-v3" \\
        t_max=500000 test_interval=50000 use_cuda=False seed=1
    # harl, the same budget, evaluated at the same interval:
    harl train pipelines/ippo_lbf.toml --set run.total_env_steps=500000 \\
        --set evaluator.every_iterations=100 --set run.seed=1 --run-dir runs/ippo-s1
    python benchmarks/epymarl_parity.py --budget 500000 \\
        --epymarl epymarl/results/sacred/ippo/*/[0-9]* --harl runs/ippo-s* --png parity.png

At every tenth of the budget each run contributes its first evaluation at or after that step
(EPyMARL tests at the first episode boundary past it, e.g. 50,500 for 50,000) and before the
next tenth.  Parity, the rule of the HARL parity work: the difference of the two sides' mean
returns is within the larger of their two standard deviations (over seeds, population std).
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np
from parity_marks import at_tenths, compare, markdown  # this folder: a script's own, on sys.path

Curve = list[tuple[int, float]]


def _value(cell: object) -> float:
    """A sacred number: a plain float, or jsonpickle's ``{"py/object": "numpy.float64", "value": x}``."""
    return float(cell["value"] if isinstance(cell, dict) else cell)  # type: ignore[arg-type,index]


def epymarl_curve(run: Path) -> tuple[int, Curve]:
    """(seed, [(env steps, test return)]) of one EPyMARL sacred run directory."""
    info = json.loads((run / "info.json").read_text(encoding="utf-8"))
    seed = int(json.loads((run / "config.json").read_text(encoding="utf-8"))["seed"])
    steps, returns = info.get("test_return_mean_T", []), info.get("test_return_mean", [])
    return seed, [(int(t), _value(r)) for t, r in zip(steps, returns)]


def harl_curve(run: Path) -> tuple[int, Curve]:
    """(seed, [(env steps, eval return)]) of one harl run directory."""
    import tomllib

    seed = int(tomllib.loads((run / "pipeline.toml").read_text(encoding="utf-8"))["run"]["seed"])
    with (run / "metrics.csv").open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r.get("eval_return")]
    return seed, [(int(float(r["env_steps"])), float(r["eval_return"])) for r in rows]


def figure(sides: dict[str, dict[int, dict[int, float]]], budget: int, title: str, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    for name, runs in sides.items():
        steps = [k for k in range(0, budget + 1, budget // 10) if any(k in c for c in runs.values())]
        mean = np.array([np.mean([c[k] for c in runs.values() if k in c]) for k in steps])
        std = np.array([np.std([c[k] for c in runs.values() if k in c]) for k in steps])
        ax.plot(steps, mean, marker="o", ms=3, label=f"{name} ({len(runs)} seeds)")
        ax.fill_between(steps, mean - std, mean + std, alpha=0.2)
    ax.set_title(title)
    ax.set_xlabel("env steps")
    ax.set_ylabel("evaluation return")
    ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1000:.0f}k")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=int, required=True, help="env steps; the table is per tenth of it")
    p.add_argument("--epymarl", type=Path, nargs="+", required=True, help="EPyMARL sacred run directories")
    p.add_argument("--harl", type=Path, nargs="+", required=True, help="harl run directories")
    p.add_argument("--title", default="")
    p.add_argument("--png", type=Path, help="write the curves (mean ± std over seeds) here")
    args = p.parse_args()
    sides = {"EPyMARL": dict(epymarl_curve(r) for r in args.epymarl), "harl": dict(harl_curve(r) for r in args.harl)}
    tenths = {name: {seed: at_tenths(c, args.budget, zero="first") for seed, c in runs.items()}
              for name, runs in sides.items()}
    rows = compare(list(tenths["EPyMARL"].values()), list(tenths["harl"].values()), args.budget, ("epymarl", "harl"))
    print("\n".join(markdown(rows, ("epymarl", "harl"), ("EPyMARL", "harl"), digits=3)))
    if args.png:
        figure(tenths, args.budget, args.title, args.png)
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
