"""``harl compare``: runs grouped by algorithm and task, the protocol's statistics, and every
output written to one folder (tables, CSV, figures) and shown in the terminal."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs
from rich.console import Console

import harl.compare.figures as figures
import harl.compare.stats as stats
import harl.compare.tables as tables
from harl.compare.bounds import Bound
from harl.compare.runs import RunRecord, load_runs
from harl.compare.sections import Section, build_sections
from harl.errors import HarlError


@attrs.frozen
class Comparison:
    records: list[RunRecord]
    sections: list[Section]
    estimates: list[stats.Estimate]
    improvements: list[stats.Improvement]
    notes: list[str]
    """What was left out or looks mixed, said once in the terminal."""
    files: list[Path]
    reps: int


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def default_out(paths: Sequence[str | Path]) -> Path:
    """``compare/`` in the one directory given, else in the deepest folder that holds them all
    (``runs/`` for two sweeps in it): the current folder, a checkout, once got an untracked one."""
    if len(paths) == 1:
        return Path(paths[0]) / "compare"
    return Path(os.path.commonpath([os.path.abspath(p) for p in paths])) / "compare"


def compare(paths: Sequence[str | Path], out: Path | None = None, *, labels: Mapping[str, str] | None = None,
            split_by: Sequence[str] = (), bounds: Mapping[str, Bound] | None = None, reps: int = 2000,
            seed: int = 0, points: int = 25, draw: bool = True) -> Comparison:
    """Compare the runs under ``paths``; write ``results.md``, ``results.tex``, ``aggregates.csv``,
    ``improvement.csv``, ``runs.csv`` and (``draw``) PNG figures into ``out``."""
    stats.require_rliable()
    if reps < 100:
        raise HarlError(f"--reps {reps}: a bootstrap needs 100 resamples or more (rliable's default is "
                        "50000 for aggregates; 2000 is harl's default)")
    records, notes = load_runs(paths, labels, split_by)
    sections, more = build_sections(records, "final", bounds or {}, points)
    notes += more
    with_absolute = [r for r in records if r.absolute is not None]
    if with_absolute and len(with_absolute) == len(records):
        absolute, more = build_sections(records, "absolute", bounds or {}, points)
        sections += absolute
        notes += more
    elif with_absolute:
        notes.append(f"{len(with_absolute)} of {len(records)} runs have an absolute metric: compared on the "
                     "final evaluation return only (harl.compare.absolute_metric(RUN_DIR) adds it to the rest)")
    for s in sections:
        small = [a for a, m in s.scores.items() if m.shape[0] < 3]
        if small:
            notes.append(f"{s.name} ({s.score}): {', '.join(small)} with fewer than 3 runs: its intervals "
                         "mean little (the protocol asks for 5 or more seeds; 10 are better)")
    estimates = [e for s in sections for e in stats.aggregates(s, reps, seed)]
    improvements = [i for s in sections for i in stats.improvements(s, reps, seed)]
    out = out or default_out(paths)
    out.mkdir(parents=True, exist_ok=True)
    files = _write_tables(out, records, sections, estimates, improvements, reps)
    if draw:
        files += _draw(out, sections, estimates, improvements, reps, seed)
    return Comparison(records, sections, estimates, improvements, notes, files, reps)


def _write_tables(out: Path, records: Sequence[RunRecord], sections: Sequence[Section],
                  estimates: Sequence[stats.Estimate], improvements: Sequence[stats.Improvement],
                  reps: int) -> list[Path]:
    texts = {"results.md": tables.markdown(sections, estimates, improvements, reps),
             "results.tex": tables.latex(sections, estimates, reps),
             "aggregates.csv": tables.to_csv(estimates), "improvement.csv": tables.to_csv(improvements),
             "runs.csv": tables.runs_csv(records)}
    written = []
    for name, text in texts.items():
        if text:
            (out / name).write_text(text, encoding="utf-8")
            written.append(out / name)
    return written


def _draw(out: Path, sections: Sequence[Section], estimates: Sequence[stats.Estimate],
          improvements: Sequence[stats.Improvement], reps: int, seed: int) -> list[Path]:
    files = []
    for s in sections:
        stem = out / f"{_slug(s.name)}-{s.score}"
        files.append(figures.aggregates_png(s, estimates, stem.with_name(stem.name + "-aggregates.png")))
        mine = [i for i in improvements if i.section == s.name and i.score == s.score]
        if mine:
            files.append(figures.improvement_png(mine, stem.with_name(stem.name + "-improvement.png")))
        files.append(figures.curves_png(s, stats.profiles(s, reps, seed),
                                        stem.with_name(stem.name + "-profile.png"), "profile"))
        if s.score == "final" and s.steps is not None:  # the curves are the same for either score
            path = out / f"{_slug(s.name)}-sample_efficiency.png"
            files.append(figures.curves_png(s, stats.sample_efficiency(s, reps, seed), path, "sample_efficiency"))
    return files


def show(comparison: Comparison, console: Console) -> None:
    """The tables, the notes and the files written, for the terminal."""
    for s in comparison.sections:
        console.print(tables.rich_table(s, comparison.estimates, comparison.reps))
    if comparison.improvements:
        console.print(tables.improvement_table(comparison.improvements))
    for note in comparison.notes:
        console.print(f"note: {note}", highlight=False, markup=False)
    if comparison.files:
        folder = comparison.files[0].parent
        console.print(f"wrote {len(comparison.files)} files to {folder}: "
                      f"{', '.join(f.name for f in comparison.files)}", highlight=False, markup=False)
