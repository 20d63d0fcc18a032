"""harl tune's Optuna plots keep Optuna's style to themselves: matplotlib's settings after them are
what they were, so the final curves (harl.plot) are drawn in harl's style, not on ggplot's grey."""

from __future__ import annotations

from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna", reason='harl tune needs pip install "harl[tune]"')
matplotlib = pytest.importorskip("matplotlib")


def test_the_optuna_plots_leave_matplotlib_as_they_found_it(tmp_path: Path) -> None:
    from harl.tune.report import plots

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    for k in range(4):
        trial = study.ask()
        x, y = trial.suggest_float("x", 0, 1), trial.suggest_float("y", 0, 1)
        trial.report(x, 1)
        study.tell(trial, x + y + k)
    before = dict(matplotlib.rcParams)
    drawn, _ = plots(study, tmp_path)
    assert {p.name for p in drawn} == {"history.png", "importance.png", "intermediate.png"}
    changed = {k for k, v in matplotlib.rcParams.items() if before.get(k) != v} - {"backend", "backend_fallback"}
    assert changed == set() and matplotlib.rcParams["axes.facecolor"] == before["axes.facecolor"]
