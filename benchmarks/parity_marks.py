"""The learning-parity rule of docs/learning-parity.md at each tenth of a budget: one copy for every
side-by-side script (EPyMARL, JaxMARL, MAT, Mava's Sable), which differ only in their sides' names
and in what stands for the mark at 0 (``zero``)."""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, Literal

Curve = Sequence[Sequence[float]]  # (env steps, value) pairs, in order
Zero = Literal["skip", "window", "first"]


def at_tenths(curve: Curve, budget: int, zero: Zero = "window") -> dict[int, float]:
    """{k: the curve's first value in [k, k + budget / 10)} for k = 0, budget / 10, ..., budget.

    ``zero`` says what stands for 0: ``"window"``, the first value in [0, budget / 10) as at every
    mark; ``"first"``, the curve's first value wherever it was taken (both sides evaluate before or
    right after their first step); ``"skip"``, no mark at 0 (JaxMARL's log wrapper reports 0 for an env
    that has not finished an episode yet, so its first updates' returns are not the policy's)."""
    tenth = max(1, budget // 10)
    out: dict[int, float] = {}
    for k in range(tenth if zero == "skip" else 0, budget + 1, tenth):
        if k == 0 and zero == "first":
            hits = [v for _, v in curve[:1]]
        else:
            hits = [v for t, v in curve if k <= t < k + tenth]
        if hits:
            out[int(k)] = float(hits[0])
    return out


def compare(base: Sequence[dict[int, float]], ours: Sequence[dict[int, float]], budget: int,
            names: tuple[str, str] = ("base", "harl")) -> list[dict[str, Any]]:
    """Per tenth that both sides reached: each side's values (one per seed), mean and population std,
    harl's lead (``diff``), the larger std and the verdict: "yes" when |diff| is at most the larger
    std, "no", or "n/a (1 seed)". Keys are named after the sides (``names``)."""
    a, b = names
    rows = []
    marks = sorted({k for c in (*base, *ours) for k in c})
    for k in marks:
        xa, xb = [c[k] for c in base if k in c], [c[k] for c in ours if k in c]
        if not xa or not xb:
            continue
        spread = max(statistics.pstdev(xa), statistics.pstdev(xb))
        diff = statistics.fmean(xb) - statistics.fmean(xa)
        verdict = "n/a (1 seed)" if min(len(xa), len(xb)) < 2 else "yes" if abs(diff) <= spread else "no"
        rows.append({"steps": k, a: xa, b: xb, f"{a}_mean": statistics.fmean(xa), f"{a}_std": statistics.pstdev(xa),
                     f"{b}_mean": statistics.fmean(xb), f"{b}_std": statistics.pstdev(xb), "diff": diff,
                     "larger_std": spread, "parity": verdict})
    return rows


def markdown(rows: list[dict[str, Any]], names: tuple[str, str], labels: tuple[str, str], digits: int = 2) -> list[str]:
    """The table's markdown lines: env steps, each side's mean ± std (seeds), harl's lead, the larger
    std and the verdict; ``labels`` head the two sides' columns."""
    a, b = names
    lines = [f"| env steps | {labels[0]} | {labels[1]} | {labels[1]} − {labels[0]} | larger std | parity |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['steps']:,} | {r[f'{a}_mean']:.{digits}f} ± {r[f'{a}_std']:.{digits}f} ({len(r[a])}) | "
                     f"{r[f'{b}_mean']:.{digits}f} ± {r[f'{b}_std']:.{digits}f} ({len(r[b])}) | {r['diff']:+.{digits}f} | "
                     f"{r['larger_std']:.{digits}f} | {r['parity']} |")
    return lines


def chance_of_parity(seeds_a: int, seeds_b: int, draws: int = 200_000, seed: int = 0) -> float:
    """How often ``compare``'s rule (the same test, vectorised over draws: population stds, as
    ``statistics.pstdev``) says "yes" at one mark when both sides are the same learner: each side's
    ``seeds`` values drawn from one normal distribution, ``draws`` times (a Monte Carlo estimate; the
    answer does not depend on the distribution's mean or scale). With 3 seeds a side it is about 0.71,
    so two identical learners pass at about 6.4 of 9 marks and at all 9 about one time in 22."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(draws, seeds_a)), rng.normal(size=(draws, seeds_b))
    gap = np.abs(a.mean(axis=1) - b.mean(axis=1))
    return float((gap <= np.maximum(a.std(axis=1), b.std(axis=1))).mean())


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(description="The parity rule's pass rate for two identical learners")
    p.add_argument("seeds", type=int, nargs=2, help="seeds a side, e.g. 3 3")
    p.add_argument("--marks", type=int, default=9)
    args = p.parse_args()
    rate = chance_of_parity(*args.seeds)
    from math import comb

    every = rate ** args.marks
    print(f"one mark: {rate:.3f}; expected marks passed: {rate * args.marks:.2f} of {args.marks}; all of them: {every:.3f}; "
          + "; ".join(f"at least {k}: {sum(comb(args.marks, j) * rate ** j * (1 - rate) ** (args.marks - j) for j in range(k, args.marks + 1)):.3f}"
                      for k in range(args.marks - 3, args.marks)))
