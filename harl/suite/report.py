"""``harl suite report [RESULTS] [--out PAGE] [--check]``: the results page, made from committed runs.

``RESULTS`` (default ``benchmarks/results``) holds one folder per suite, as
``benchmarks/suite_results.py save`` leaves it: ``suite.json`` (the suite as it was started),
``provenance.json`` (the commit and machine), and per entry its ``trials.csv`` and each finished
run's ``pipeline.toml`` and ``metrics.csv``. The page gives, per entry, the metric over its
finished seeds (mean with a 95 % bootstrap CI, and the IQM), the reference's published number
with its source, and a verdict; per task a learning-curve figure (mean ± 95 % CI over seeds).

The page is a pure function of those files (the bootstrap's generator is seeded), so
``--check`` (and a test) can tell when the committed page and the committed results disagree.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from harl.compare.runs import number, task_of
from harl.config.loading import read_toml
from harl.errors import HarlError
from harl.plot import band
from harl.suite.results import metric_values
from harl.suite.spec import Entry, Reference, Suite, load_suite, parse_suite
from harl.sweep.state import metrics_rows

BOOTSTRAP = 2000
"""Resamples of the seeds' values for the 95 % CI of an entry's value."""
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262)
"""Student's t at 0.975 for 1-9 degrees of freedom: the curves' 95 % band over few seeds."""


@attrs.frozen
class EntryReport:
    entry: Entry
    task: str
    finished: tuple[Path, ...]
    """The run directories of its finished seeds."""
    values: tuple[float, ...]
    """Each finished seed's metric: the mean of its last ``window`` values."""

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.values)) if self.values else None

    @property
    def ci(self) -> tuple[float, float] | None:
        """A 95 % percentile-bootstrap interval of the mean over seeds (seeded: the same files, the same page)."""
        if len(self.values) < 2:
            return None
        values = np.asarray(self.values)
        rng = np.random.default_rng(0)
        means = values[rng.integers(0, len(values), size=(BOOTSTRAP, len(values)))].mean(axis=1)
        low, high = np.percentile(means, [2.5, 97.5])
        return float(low), float(high)

    @property
    def iqm(self) -> float | None:
        """The interquartile mean (rliable's): the mean of the middle 50 % of the seeds' values."""
        if not self.values:
            return None
        values = np.sort(np.asarray(self.values))
        cut = int(math.floor(0.25 * len(values)))
        return float(values[cut:len(values) - cut].mean())


def verdict(report: EntryReport, reference: Reference) -> str:
    """within / below / above the reference's spread, or why there is no verdict.

    harl's interval is its 95 % CI (its one value when a single seed finished); the reference's
    is its value ± its published spread. Overlapping intervals are "within"."""
    if not reference.comparable:
        return "not comparable"
    if report.mean is None:
        return "no runs yet"
    low, high = report.ci or (report.mean, report.mean)
    ref_low, ref_high = reference.value - reference.spread, reference.value + reference.spread
    if high < ref_low:
        return "below"
    if low > ref_high:
        return "above"
    return "within"


def _finished(entry_dir: Path) -> list[Path]:
    try:
        with (entry_dir / "trials.csv").open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return []
    return [entry_dir / row["run_dir"] for row in rows if row.get("status") == "finished"
            and (entry_dir / row["run_dir"] / "metrics.csv").is_file()]


def _value(run_dir: Path, metric: str, window: int) -> float | None:
    values, _ = metric_values(run_dir, metric)  # the value a suite's own results.json reads
    return float(np.mean(values[-window:])) if values else None


def load_suite_results(folder: Path) -> tuple[Suite, dict[str, str], list[EntryReport]]:
    """One suite's results folder: the suite as started, its provenance, a report per entry."""
    try:
        record = json.loads((folder / "suite.json").read_text(encoding="utf-8"))
        path = Path(record["suite_file"])
        if not path.is_file():  # started from a worktree elsewhere: the checkout's own suites folder
            path = folder.parent.parent / "suites" / path.name
        suite = parse_suite(record["text"], path)
    except (OSError, ValueError, KeyError) as exc:
        raise HarlError(f"{folder / 'suite.json'}: cannot read the suite's record ({exc}); is {folder} a "
                        "folder written by benchmarks/suite_results.py save?") from None
    try:
        provenance = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        provenance = {}
    references = _current_references(folder.parent.parent / "suites" / Path(record["suite_file"]).name)
    reports = []
    for entry in suite.entries:
        if entry.name in references:
            entry = attrs.evolve(entry, references=references[entry.name])
        runs = _finished(folder / entry.name)
        task = "not started"
        pipelines = sorted((folder / entry.name).glob("*/pipeline.toml"))
        if pipelines:
            pipeline = read_toml(pipelines[0])
            env, name = task_of(pipeline)
            variant = pipeline.get("env", {}).get("variant")  # another scale: another task
            task = f"{env}_{name}" + (f"-{variant}" if variant and variant != "mpe2" else "")
        values = [v for v in (_value(r, entry.metric, entry.window) for r in runs) if v is not None]
        reports.append(EntryReport(entry, task, tuple(runs), tuple(values)))
    return suite, provenance, reports


def _current_references(path: Path) -> dict[str, tuple[Reference, ...]]:
    """The published numbers as the checkout's suite file cites them now: a reference read (or
    corrected) after a suite started reaches the page without running it again. What ran (the
    budgets, the settings) stays the suite's record."""
    try:
        return {e.name: e.references for e in load_suite(path).entries}
    except (OSError, HarlError):
        return {}


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _reference_cell(reference: Reference) -> str:
    spread = f" ± {reference.spread:g}" if reference.spread else ""
    at = f" at {reference.at}" if reference.at else ""
    return f"{reference.value:g}{spread}{at}: {reference.source}"


def _curve(run_dir: Path, metric: str) -> tuple[np.ndarray, np.ndarray]:
    points = [(number(row.get("env_steps")), number(row.get(metric))) for row in metrics_rows(run_dir)]
    kept = [(x, y) for x, y in points if x is not None and y is not None]
    return np.asarray([x for x, _ in kept]), np.asarray([y for _, y in kept])


def _band(curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and 95 % CI half-width (Student's t) over seeds, on ``harl plot``'s common grid."""
    curves = [c for c in curves if len(c[0]) > 1]
    grid, mean, std = band(curves)  # std over seeds with ddof 0
    n = len(curves)
    if std is None or n < 2:
        return grid, mean, np.zeros_like(mean)
    t = T_975[min(n - 2, len(T_975) - 1)] if n < 11 else 1.96
    return grid, mean, t * std / math.sqrt(n - 1)  # t * sample std / sqrt(n), sample std = std * sqrt(n / (n - 1))


def figure(suite_name: str, task: str, reports: Sequence[EntryReport], out: Path) -> Path:
    """One task's learning curves: each entry's seeds as mean ± 95 % CI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    for report in reports:
        grid, mean, half = _band([_curve(r, report.entry.metric) for r in report.finished])
        if not len(grid):
            continue
        n = len(report.finished)
        name = f"{report.entry.label or report.entry.name} ({n} seed{'s' if n != 1 else ''})"
        line, = ax.plot(grid, mean, label=name, linewidth=1.6)
        ax.fill_between(grid, mean - half, mean + half, color=line.get_color(), alpha=0.2, linewidth=0)
        for ref in report.entry.references:  # the published number at the entry's budget, ± its spread
            if ref.comparable:
                ax.errorbar([report.entry.budget], [ref.value], yerr=[ref.spread], fmt="D", markersize=6,
                            color=line.get_color(), markeredgecolor="black", capsize=4)
    ax.set_title(f"{suite_name}: {task}", fontsize="medium")
    ax.set_xlabel("env steps")
    ax.set_ylabel(reports[0].entry.metric)
    ax.set_xscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="lower right", title="diamonds: published, ± spread", title_fontsize="small")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def render(results: Path, figures: Path | None, page: Path) -> str:
    """The results page's markdown (and, with ``figures``, its PNGs written there)."""
    folders = sorted(p for p in results.iterdir() if (p / "suite.json").is_file()) if results.is_dir() else []
    if not folders:
        raise HarlError(f"{results}: no suite results (folders holding suite.json); save a suite's runs with "
                        "python benchmarks/suite_results.py save SUITE_DIR benchmarks/results/NAME")
    lines = ["# Published results", "",
             "Every number on this page comes from the runs committed under `benchmarks/results/` and is made "
             "by one command: `harl suite report benchmarks/results --out docs/results.md`. A test fails when "
             "this page and those files disagree. Each suite runs from its own worktree at the commit its "
             "provenance names (`benchmarks/suite_background.sh SUITE`).", "",
             "Value: each finished seed's final evaluation (or the mean of its last `window` values), as the "
             "mean over seeds with a 95 % percentile-bootstrap CI, and the IQM. Verdict: *within* when harl's "
             "CI overlaps the reference's value ± its published spread, else *below* or *above*; *not comparable* "
             "when the reference's return is on another scale (its note says why). A budget below the reference's "
             "is a cut of this 2-core CPU, named in the entry's note.", ""]
    for folder in folders:
        suite, provenance, reports = load_suite_results(folder)
        commit = str(provenance.get("commit", "?"))[:10]
        lines += [f"## {suite.name}", "", suite.about, "",
                  f"Commit `{commit}`; {provenance.get('machine', 'machine not recorded')}; "
                  f"results in `benchmarks/results/{folder.name}/`.", *_revisions(provenance), "",
                  "| entry | task | budget | seeds done | metric | mean [95 % CI] | IQM | reference | verdict |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in reports:
            e = r.entry
            ci = f" [{_fmt(r.ci[0])}, {_fmt(r.ci[1])}]" if r.ci else ""
            refs = e.references or (None,)
            for k, ref in enumerate(refs):
                head = [e.label or e.name, r.task, f"{e.budget:,}", f"{len(r.values)} of {len(e.seeds)}",
                        e.metric if e.window == 1 else f"{e.metric} (last {e.window})",
                        _fmt(r.mean) + ci, _fmt(r.iqm)] if k == 0 else [""] * 7
                tail = ["-", "-"] if ref is None else [_reference_cell(ref), verdict(r, ref)]
                lines.append("| " + " | ".join(c.replace("|", "/") for c in head + tail) + " |")
        lines.append("")
        notes = [f"- **{e.label or e.name}**: {e.note}" for e in suite.entries if e.note]
        notes += [f"  - reference note: {ref.note}" for e in suite.entries for ref in e.references if ref.note]
        lines += [f"Settings and cuts (each entry's note in `benchmarks/suites/{folder.name}.toml`, whose header gives "
                  "the budgets' arithmetic):", "", *notes, ""]
        tasks: dict[str, list[EntryReport]] = {}
        for r in reports:
            tasks.setdefault(r.task, []).append(r)
        for task, group in tasks.items():
            name = f"{folder.name}-{task}.png"
            if figures is not None and any(r.finished for r in group):
                figure(suite.name, task, group, figures / name)
            if (figures or page.parent / "results").joinpath(name).is_file():
                rel = Path("results") / name
                lines += [f"![{suite.name}: {task}]({rel.as_posix()})", ""]
    return "\n".join(lines).rstrip() + "\n"


def _revisions(provenance: dict[str, Any]) -> list[str]:
    """A line per revision of the suite (``suite_results.py revise``): which entries' runs began at an
    earlier commit, so that no run is presented as the current commit's without saying so."""
    return [f"Moved from `{str(r.get('from', '?'))[:10]}` to `{str(r.get('to', '?'))[:10]}` on {r.get('date', '?')}: "
            f"entries unchanged (the same resolved pipelines), whose runs begun at the earlier commit were kept: "
            f"{', '.join(r.get('kept', [])) or 'none'}."
            for r in provenance.get("revisions", [])]


def report(results: Path, out: Path, check: bool = False) -> tuple[Path, bool]:
    """Write (or, with ``check``, compare) the page; returns the page and whether it was up to date."""
    figures = None if check else out.parent / "results"
    text = render(results, figures, out)
    current = out.read_text(encoding="utf-8") if out.is_file() else None
    if check:
        return out, current == text
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out, current == text
