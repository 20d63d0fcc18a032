"""The comparison's PNG figures, drawn with matplotlib's object API (no pyplot, no display):
aggregate intervals, probability of improvement, performance profiles, sample efficiency, and
learning curves of labelled groups of runs (a suite's entries, ``learning_curves_png``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harl.compare.sections import Section
from harl.compare.stats import Curve, Estimate, Improvement, metric_names
from harl.errors import HarlError, MissingExtraError
from harl.plot import _steps, band, curve, find_runs, legend_below, load_run


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingExtraError("harl compare", "compare", "matplotlib") from exc
    return Figure(figsize=(width, height), dpi=120, layout="constrained")


def _ylabel(section: Section) -> str:
    return f"{'normalised ' if section.normalised else ''}{'absolute metric' if section.score == 'absolute' else 'return'}"


def aggregates_png(section: Section, estimates: Sequence[Estimate], out: Path) -> Path:
    """One panel per aggregate: each algorithm's point estimate and its 95 % CI as a bar."""
    names = metric_names(section)
    algorithms = list(section.scores)
    figure = _figure(2.6 * len(names) + 1.2, 0.45 * len(algorithms) + 1.4)
    axes = figure.subplots(1, len(names), sharey=True, squeeze=False)[0]
    for ax, metric in zip(axes, names):
        for k, algorithm in enumerate(algorithms):
            e = next(e for e in estimates if e.section == section.name and e.score == section.score
                     and e.algorithm == algorithm and e.metric == metric)
            ax.barh(k, e.high - e.low, left=e.low, height=0.6, color=f"C{k % 10}", alpha=0.75)
            ax.vlines(e.value, k - 0.3, k + 0.3, color="black", linewidth=1.5)
        ax.set_title(metric)
        ax.grid(True, axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(algorithms)), algorithms)
    figure.supxlabel(f"{_ylabel(section)} ({section.name}, 95% CI)")
    figure.savefig(out)
    return out


def improvement_png(items: Sequence[Improvement], out: Path) -> Path:
    figure = _figure(6.0, 0.45 * len(items) + 1.4)
    ax = figure.add_subplot()
    for k, i in enumerate(items):
        ax.barh(k, i.high - i.low, left=i.low, height=0.6, color=f"C{k % 10}", alpha=0.75)
        ax.vlines(i.value, k - 0.3, k + 0.3, color="black", linewidth=1.5)
    ax.set_yticks(range(len(items)), [f"P({i.x} > {i.y})" for i in items])
    ax.axvline(0.5, color="grey", linestyle="--", linewidth=1)
    ax.set_xlim(0, 1)
    ax.set_xlabel("probability of improvement (95% CI)")
    ax.grid(True, axis="x", alpha=0.3)
    figure.savefig(out)
    return out


def curves_png(section: Section, curves: Sequence[Curve], out: Path, kind: str) -> Path:
    """``kind``: ``profile`` (fraction of runs above a threshold) or ``sample_efficiency`` (IQM
    over env steps)."""
    from matplotlib.ticker import FuncFormatter

    figure = _figure(7.0, 4.3)
    ax = figure.add_subplot()
    for k, c in enumerate(curves):
        ax.plot(c.x, c.value, color=f"C{k % 10}", linewidth=1.8, label=c.algorithm)
        ax.fill_between(c.x, c.low, c.high, color=f"C{k % 10}", alpha=0.22, linewidth=0)
    if kind == "profile":
        ax.set_xlabel(f"{_ylabel(section)} threshold τ")
        ax.set_ylabel("fraction of runs with score > τ")
        ax.set_title(f"performance profile: {section.name} (95% CI)")
    else:
        ax.set_xlabel("env steps")
        ax.set_ylabel(f"IQM of {'normalised ' if section.normalised else ''}eval_return")
        ax.set_title(f"sample efficiency: {section.name} (IQM, 95% CI)")
        ax.xaxis.set_major_formatter(FuncFormatter(_steps))
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small", frameon=False)
    figure.savefig(out)
    return out


def learning_curves_png(groups: Sequence[tuple[str, Sequence[Path]]], metric: str, out: Path) -> Path:
    """A curve per group of runs, each group the runs under its paths (a suite entry's seeds) and its
    legend the group's label (the entry's label or its algorithm: HAPPO, MATD3), not ``harl plot``'s run
    name and differing settings (``happo-mpe-spread (batch_size=-, capacity=-, ...)``, which said
    nothing for runs of different algorithms); mean ± std over the group's seeds."""
    from matplotlib.ticker import FuncFormatter

    figure = _figure(7.5, 4.5 + 0.22 * len(groups))
    ax = figure.add_subplot()
    drawn = 0
    for label, paths in groups:
        runs = [run for run in (load_run(d) for d in find_runs(paths)) if run is not None]
        x, mean, std = band([curve(run, metric) for run in runs])
        if not len(x):
            continue
        color = f"C{drawn % 10}"
        seeds = f"{len(runs)} seed{'s' if len(runs) > 1 else ''}"
        ax.plot(x, mean, color=color, linewidth=1.8, label=f"{label} · {seeds}")
        if std is not None:
            ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.22, linewidth=0)
        drawn += 1
    if not drawn:
        raise HarlError(f"{metric}: no run has a value of it in metrics.csv yet, nothing to draw")
    ax.set_xlabel("env steps")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} (mean ± std over seeds)")
    ax.xaxis.set_major_formatter(FuncFormatter(_steps))
    ax.grid(True, alpha=0.3)
    legend_below(figure, 2 if drawn > 1 else 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out)
    return out
