"""The comparison as tables: a rich table for the terminal, CSV (one estimate per row), and
Markdown and LaTeX (one algorithm per row, each cell ``value [low, high]``) with a caption
that says which value of each run was compared and how the intervals were made."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

import attrs
from rich.table import Table

from harl.compare.runs import RunRecord
from harl.compare.sections import Section
from harl.compare.stats import Estimate, Improvement, metric_names

SCORES = {
    "final": "the final evaluation return (each run's last eval_return in metrics.csv: the mean over "
             "that evaluation's episodes)",
    "absolute": "the absolute metric (each run's best kept checkpoint by eval_return, re-evaluated on "
                "10x its evaluation episodes: absolute_metric.json)",
}


def caption(section: Section, reps: int) -> str:
    what = SCORES[section.score]
    scale = " normalised per task as (return - random) / (best - random)" if section.normalised else ""
    where = f"over {len(section.tasks)} tasks ({', '.join(section.tasks)})" if len(section.tasks) > 1 else \
        f"on {section.name}"
    return (f"{what[0].upper()}{what[1:]}{scale}, {where}. Point estimate and 95% stratified-bootstrap "
            f"confidence interval over runs ({reps} resamples, rliable). IQM: interquartile mean.")


def fmt(value: float) -> str:
    return f"{value:.4g}"


def cell(e: Estimate) -> str:
    return f"{fmt(e.value)} [{fmt(e.low)}, {fmt(e.high)}]"


def _rows(section: Section, estimates: Sequence[Estimate]) -> list[list[str]]:
    mine = [e for e in estimates if e.section == section.name and e.score == section.score]
    rows = []
    for algorithm, scores in section.scores.items():
        by_metric = {e.metric: e for e in mine if e.algorithm == algorithm}
        rows.append([algorithm, str(scores.shape[0])] + [cell(by_metric[m]) for m in metric_names(section)])
    return rows


def header(section: Section) -> list[str]:
    return ["algorithm", "runs"] + metric_names(section)


def rich_table(section: Section, estimates: Sequence[Estimate], reps: int) -> Table:
    table = Table(title=f"{section.name} ({section.score})", caption=caption(section, reps),
                  caption_justify="left")
    for k, name in enumerate(header(section)):
        table.add_column(name, justify="left" if k == 0 else "right")
    for row in _rows(section, estimates):
        table.add_row(*row)
    return table


def improvement_table(items: Sequence[Improvement]) -> Table:
    table = Table(title="probability of improvement P(X > Y)")
    for name in ("section", "score", "X", "Y", "P(X > Y)"):
        table.add_column(name)
    for i in items:
        table.add_row(i.section, i.score, i.x, i.y, f"{fmt(i.value)} [{fmt(i.low)}, {fmt(i.high)}]")
    return table


def markdown(sections: Sequence[Section], estimates: Sequence[Estimate], items: Sequence[Improvement],
             reps: int) -> str:
    out = []
    for section in sections:
        head = header(section)
        out += [f"**{section.name} ({section.score})**", "", "| " + " | ".join(head) + " |",
                "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
        out += ["| " + " | ".join(row) + " |" for row in _rows(section, estimates)]
        out += ["", f"*{caption(section, reps)}*", ""]
    if items:
        out += ["**Probability of improvement**", "", "| section | score | X | Y | P(X > Y) |",
                "|---|---|---|---|---:|"]
        out += [f"| {i.section} | {i.score} | {i.x} | {i.y} | {fmt(i.value)} [{fmt(i.low)}, {fmt(i.high)}] |"
                for i in items]
        out += ["", f"*P(X > Y): the probability that a run of X scores higher than a run of Y on a task, "
                f"averaged over tasks, with its 95% stratified-bootstrap CI ({reps} resamples, rliable).*", ""]
    return "\n".join(out)


def _tex(text: str) -> str:
    text = text.replace("\\", "\x00")
    for a, b in (("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"), ("$", r"\$"), ("{", r"\{"),
                 ("}", r"\}")):
        text = text.replace(a, b)
    return text.replace("\x00", r"\textbackslash{}")


def latex(sections: Sequence[Section], estimates: Sequence[Estimate], reps: int) -> str:
    """One ``table`` environment per section (booktabs rules)."""
    out = []
    for section in sections:
        head = header(section)
        out += [r"\begin{table}[t]", r"\centering", r"\begin{tabular}{l" + "r" * (len(head) - 1) + "}",
                r"\toprule", " & ".join(_tex(h) for h in head) + r" \\", r"\midrule"]
        out += [" & ".join(_tex(c) for c in row) + r" \\" for row in _rows(section, estimates)]
        out += [r"\bottomrule", r"\end{tabular}", r"\caption{" + _tex(caption(section, reps)) + "}",
                r"\end{table}", ""]
    return "\n".join(out)


def to_csv(items: Sequence[attrs.AttrsInstance]) -> str:
    """attrs records as CSV, one per row, their fields as columns."""
    text = io.StringIO()
    if items:
        names = [f.name for f in attrs.fields(type(items[0]))]
        writer = csv.writer(text)
        writer.writerow(names)
        writer.writerows([getattr(i, n) for n in names] for i in items)
    return text.getvalue()


def runs_csv(records: Sequence[RunRecord]) -> str:
    """What each run contributed: the provenance of every number in the tables."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["path", "env", "task", "algorithm", "seed", "final_env_steps", "final", "absolute",
                     "absolute_checkpoint"])
    for r in records:
        absolute = r.absolute or {}
        writer.writerow([r.path, r.env, r.task, r.algorithm, r.seed, r.evaluations[-1].env_steps, r.final,
                         absolute.get("mean_return", ""), absolute.get("checkpoint", "")])
    return text.getvalue()
