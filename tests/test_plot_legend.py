"""harl plot's legend (and harl tune's curves.png, which it draws): short labels for tuned
floats, below the axes so it covers no tick, and no layout warning."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

import harl.plot
from harl.plot import plot

pytest.importorskip("matplotlib")

TUNED = (0.3621205502737279, 0.1234567890123456, 0.2718281828459045, 0.5772156649015329)


def write_run(path: Path, clip: float, lr: float) -> None:
    path.mkdir(parents=True)
    (path / "pipeline.toml").write_text(
        f'[run]\nname = "happo-mpe-spread"\nseed = 1\n[critic]\nhidden_sizes = [64, 64]\n'
        f'[updater.objective]\nclip = {clip!r}\nlr = {lr!r}\n', encoding="utf-8")
    rows = "".join(f"{step},{-100 + step / 10 + clip}\n" for step in range(0, 1000, 100))
    (path / "metrics.csv").write_text("env_steps,eval_return\n" + rows, encoding="utf-8")


def test_tuned_floats_make_short_labels_below_the_axes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, clip in enumerate(TUNED):
        write_run(tmp_path / f"trial{k}", clip, clip / 1000)
    drawn: list[tuple[Any, Any]] = []
    place = harl.plot.legend_below

    def keep(figure: Any, columns: int) -> Any:
        legend = place(figure, columns)
        drawn.append((figure, legend))
        return legend

    monkeypatch.setattr(harl.plot, "legend_below", keep)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # constrained_layout's "axes sizes collapsed" among them
        out, groups = plot([tmp_path], "eval_return", tmp_path / "curves.png")
    assert out.is_file()
    labels = [g.label for g in groups]
    assert "clip=0.362" in " ".join(labels) and "0.3621205" not in " ".join(labels)
    assert max(len(label) for label in labels) < 60
    assert max(len(label) - len("happo-mpe-spread") for label in labels) < 40
    [(figure, legend)] = drawn
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)
    [ax] = figure.axes
    assert not legend.get_window_extent(renderer).overlaps(ax.get_tightbbox(renderer))
    assert ax.get_position().height > 0.5  # the axes keep their size


def test_a_float_shows_three_significant_digits() -> None:
    assert harl.plot._short(0.3621205502737279) == "0.362"
    assert harl.plot._short(1e-4) == "0.0001"
    assert harl.plot._short([0.123456789, 2]) == "[0.123,2]"
    assert harl.plot._short("simultaneous") == "simultaneous"
