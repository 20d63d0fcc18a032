"""Do a population's members learn like separate runs of the same seeds?

    harl train pipelines/happo_mpe_torch_spread.toml --seeds 1-8 --vectorize --run-dir runs/pop \\
        --set run.total_env_steps=1_000_000 --quiet
    harl train pipelines/happo_mpe_torch_spread.toml --seeds 1-8 --run-dir runs/sep \\
        --set run.total_env_steps=1_000_000 --quiet
    python benchmarks/population_equivalence.py runs/pop runs/sep

Per run: the final evaluation return and the mean of its last three.  Per group: mean ± std.
Between the groups: the exact two-sided permutation p-values of the difference of means and
of the Mann-Whitney U statistic (every split of the pooled runs into two groups of the
original sizes is enumerated: no distributional assumption, no scipy).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import statistics
import sys
from pathlib import Path


def finals(sweep: Path) -> list[tuple[str, float, float]]:
    """(run, final eval return, mean of the last three evals) of each run in a sweep directory."""
    out = []
    for metrics in sorted(sweep.glob("*/metrics.csv")):
        with metrics.open(newline="") as f:
            evals = [float(r["eval_return"]) for r in csv.DictReader(f) if r.get("eval_return")]
        if evals:
            out.append((metrics.parent.name, evals[-1], statistics.mean(evals[-3:])))
    return out


def u_statistic(a: list[float], b: list[float]) -> float:
    return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)


def permutation_p(a: list[float], b: list[float]) -> tuple[float, float]:
    """Exact two-sided p-values (difference of means, Mann-Whitney U) over all relabellings."""
    pooled, n = a + b, len(a)
    observed_d = abs(statistics.mean(a) - statistics.mean(b))
    centre = len(a) * len(b) / 2
    observed_u = abs(u_statistic(a, b) - centre)
    extreme_d = extreme_u = total = 0
    for chosen in itertools.combinations(range(len(pooled)), n):
        picked = set(chosen)
        x = [pooled[i] for i in chosen]
        y = [pooled[i] for i in range(len(pooled)) if i not in picked]
        total += 1
        extreme_d += abs(statistics.mean(x) - statistics.mean(y)) >= observed_d - 1e-12
        extreme_u += abs(u_statistic(x, y) - centre) >= observed_u - 1e-12
    return extreme_d / total, extreme_u / total


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("population", type=Path)
    p.add_argument("separate", type=Path)
    args = p.parse_args()
    groups = {"population": finals(args.population), "separate": finals(args.separate)}
    print("| group | runs | final eval: mean ± std | last 3 evals: mean ± std | per run (final) |\n|---|---|---|---|---|")
    for name, rows in groups.items():
        final, last3 = [r[1] for r in rows], [r[2] for r in rows]
        print(f"| {name} | {len(rows)} | {statistics.mean(final):.1f} ± {statistics.stdev(final):.1f} | "
              f"{statistics.mean(last3):.1f} ± {statistics.stdev(last3):.1f} | "
              f"{', '.join(f'{x:.1f}' for x in final)} |")
    for j, what in ((1, "final eval"), (2, "last 3 evals")):
        a, b = ([r[j] for r in rows] for rows in groups.values())
        p_mean, p_u = permutation_p(a, b)
        print(f"{what}: exact permutation p = {p_mean:.3f} (difference of means), {p_u:.3f} (Mann-Whitney U)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
