"""What a study leaves at its end: ``trials.csv`` and the table of trials, ``best.toml`` (the best
values as a ready pipeline), Optuna's history, importance and intermediate-value plots as PNGs,
and the best pipeline against the starting one on fresh seeds (``final/``, ``harl compare``)."""

from __future__ import annotations

import csv
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from harl.config.dump import dump_pipeline
from harl.config.loading import load_spec_and_notes
from harl.config.messages import toml_literal
from harl.tune.driver import trial_dir
from harl.tune.space import Space, overrides_of


def rows(study: Any, space: Space, tune_dir: Path) -> list[dict[str, Any]]:
    out = []
    for t in study.get_trials(deepcopy=False):
        values = space.values_of(t.params)
        steps = max(t.intermediate_values) if t.intermediate_values else 0
        seconds = (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete and t.datetime_start else None
        out.append({"trial": t.number, "state": t.state.name.lower(), "value": t.value, "evaluations": steps,
                    **{k: values.get(k) for k in (p.key for p in space.params)},
                    "seconds": seconds, "dir": trial_dir(tune_dir, t.number).name,
                    "message": t.user_attrs.get("message", "")})
    return out


def write_trials(path: Path, table: Sequence[dict[str, Any]], space: Space) -> None:
    keys = ["trial", "state", "value", "evaluations", *(p.key for p in space.params), "seconds", "dir", "message"]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(keys)
        for row in table:
            writer.writerow(["" if row[k] is None else toml_literal(row[k]) if isinstance(row[k], list) else
                             f"{row[k]:.6g}" if isinstance(row[k], float) else row[k] for k in keys])


def trials_table(table: Sequence[dict[str, Any]], space: Space, title: str, best: int | None) -> Table:
    out = Table(title=escape(title), title_justify="left")
    for column in ("trial", "state", "value", *(p.key.rpartition(".")[2] for p in space.params)):
        out.add_column(escape(column), justify="right" if column != "state" else "left")
    for row in sorted(table, key=lambda r: (r["state"] != "complete", r["value"] is None, -(r["value"] or 0))):
        state = row["state"] + (f" at eval {row['evaluations']}" if row["state"] == "pruned" else "")
        value = "-" if row["value"] is None else f"{row['value']:.3f}"
        cells = ["-" if row[p.key] is None else f"{row[p.key]:.4g}" if isinstance(row[p.key], float)
                 else toml_literal(row[p.key]) for p in space.params]
        mark = " *" if row["trial"] == best else ""
        out.add_row(str(row["trial"]) + mark, state, value, *cells)
    return out


def best_pipeline(study: Any, space: Space, pipeline: str, overrides: Sequence[str], tune_dir: Path) -> tuple[Path, Any]:
    """``best.toml``: the starting pipeline with the best trial's values (and its run.name marked tuned)."""
    best = study.best_trial
    values = space.values_of(best.params)
    base = load_spec_and_notes(pipeline, overrides)[0]
    spec, _ = load_spec_and_notes(pipeline, [*overrides, *overrides_of(values), f"run.name={base.run.name}-tuned"])
    header = [f"# harl tune {tune_dir}: trial {best.number} of {len(study.trials)}, value {best.value:.4f}",
              f"# ({space.statistic} of the last {space.last} evaluations over its seeds); the values it found:",
              *(f"#   {key} = {toml_literal(value)}" for key, value in values.items()), ""]
    path = tune_dir / "best.toml"
    path.write_text("\n".join(header) + dump_pipeline(spec), encoding="utf-8")
    return path, best


def plots(study: Any, tune_dir: Path) -> tuple[list[Path], list[str]]:
    """history.png, importance.png and intermediate.png (matplotlib); notes for the ones not drawn."""
    from harl.errors import import_extra

    import_extra("matplotlib", "harl tune's plots", "tune")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna.visualization.matplotlib as vis

    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    drawn, notes = [], []
    for name, draw, needs in (("history", vis.plot_optimization_history, 1),
                              ("importance", vis.plot_param_importances, 2),
                              ("intermediate", vis.plot_intermediate_values, 1)):
        if len(complete) < needs:
            notes.append(f"{name}.png not drawn: it needs {needs} complete trial(s), the study has {len(complete)}")
            continue
        # Optuna's plots switch matplotlib to its "ggplot" style for the whole process (plt.style.use):
        # inside rc_context that stays with them, and harl's own figures drawn after (the final curves,
        # harl.plot) keep harl's style.
        with matplotlib.rc_context():
            try:
                with warnings.catch_warnings():  # Optuna marks its matplotlib plots experimental
                    warnings.simplefilter("ignore")
                    ax = draw(study)
            except (ValueError, RuntimeError) as exc:
                notes.append(f"{name}.png not drawn: {exc}")
                continue
            axes: Any = ax
            figure: Any = getattr(axes, "figure", None) or axes.flat[0].figure  # an Axes, or an array of them
            figure.set_size_inches(7, 4.5)
            figure.tight_layout()
            path = tune_dir / f"{name}.png"
            figure.savefig(path, dpi=110)
            plt.close(figure)
        drawn.append(path)
    return drawn, notes
