"""What harl suite shows and writes: its table whole at 80 columns (no name cut to "on-polic...", no
value broken over lines), notices broken at spaces, curve legends by algorithm (or the entry's
label), and a results.md that links compare/ only when it was written."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
from rich.console import Console

from harl.cli import main
from harl.errors import MissingExtraError
from harl.suite.command import SuiteResult, _markdown
from harl.suite.results import EntryResult, SeedResult
from harl.suite.spec import Reference, load_suite
from harl.sweep.state import wrapped
from tests.suite.test_suite import entry, write_suite

ROOT = Path(__file__).resolve().parents[2]


def smoke_result(verdicts: tuple[str, ...] = ("passed", "failed", "incomplete")) -> SuiteResult:
    """The stock smoke suite (benchmarks/suites/smoke.toml) with made-up values, one reference."""
    suite = load_suite(ROOT / "benchmarks" / "suites" / "smoke.toml")
    entries = list(suite.entries)
    entries[0] = attrs.evolve(entries[0], references=(
        Reference(-53.1, "HARL (Zhong et al. 2024), Table 3 of the paper's appendix", "10M env steps"),))
    suite = attrs.evolve(suite, entries=tuple(entries))
    values = [(-68.8123, -76.0123), (-66.6149, -73.2), (-74.6, -181.6)]
    results = [EntryResult(e, (SeedResult(1, "finished", v, f, e.budget, Path("/x")),
                               SeedResult(2, "finished", v + 1.23, f, e.budget, Path("/y"))), verdict)
               for e, (v, f), verdict in zip(suite.entries, values, verdicts)]
    return SuiteResult(ROOT / "runs" / "smoke-suite-20260101-120000", suite, results)


def render(renderable: Any, width: int) -> list[str]:
    console = Console(width=width, record=True, soft_wrap=True, file=io.StringIO(), force_terminal=True)
    console.print(renderable)
    return console.export_text().splitlines()


def words_whole(lines: list[str], text: str) -> bool:
    """Every word of ``text`` is on some line whole (none was broken mid-word)."""
    found = {w for line in lines for w in line.split()}
    return all(w in found for w in text.split())


@pytest.mark.parametrize("width", [80, 120])
def test_the_smoke_suites_table_is_whole_at_80_columns(width: int) -> None:
    """Each entry's name and each value on one line, whole (at 80 columns the names were cut to
    "on-polic..." and each value wrapped over three lines), every line within the width but a path."""
    result = smoke_result()
    lines = render(result.table(), width)
    text = "\n".join(lines)
    assert "…" not in text
    for r in result.entries:
        assert any(r.entry.name in line.split() for line in lines), (r.entry.name, text)
        value = f"{r.value:.4g} ± {r.std:.2g}"
        assert any(value in line for line in lines), (value, text)
        assert any(r.verdict in line.split() for line in lines)
    rises = [f"rise {r.rise:.3g}" for r in result.entries]
    assert all(any(rise in line for line in lines) for rise in rises)
    assert "train_return" in text and "(last 3)" in text and "rise >= 3.5" in text
    assert words_whole(lines, "reference for on-policy-happo-spread: -53.1 (HARL (Zhong et al. 2024), Table 3 "
                              "of the paper's appendix, 10M env steps)")
    assert all(len(line.rstrip()) <= width for line in lines if str(result.suite_dir) not in line)


@pytest.mark.parametrize("width", [40, 50])
def test_a_narrow_terminal_gets_a_paragraph_per_entry(width: int) -> None:
    """Where the table cannot fit (50 columns), each entry is a paragraph, still with nothing cut."""
    result = smoke_result()
    lines = render(result.table(), width)
    text = "\n".join(lines)
    assert "…" not in text
    for r in result.entries:
        assert f"{r.entry.name}: {r.verdict}" in lines
        assert f"{r.value:.4g}\N{NO-BREAK SPACE}±\N{NO-BREAK SPACE}{r.std:.2g}" in text  # never broken
    assert all(len(line.rstrip()) <= width for line in lines if str(result.suite_dir) not in line)


NOTICE = ("SIGTERM: the running trials stop after their iteration, with a checkpoint, and no other starts "
          "(SIGTERM again to stop them now)")


def test_notices_break_at_spaces_on_a_terminal_and_stay_one_line_elsewhere() -> None:
    terminal = Console(width=80, file=io.StringIO(), force_terminal=True)
    lines = wrapped(terminal, NOTICE).splitlines()
    assert len(lines) == 2 and all(len(line) <= 80 for line in lines)
    assert " ".join(" ".join(lines).split()) == NOTICE
    path = "/very/" + "long/" * 20 + "path"
    assert path in wrapped(terminal, f"note: see {path} for it").splitlines()[1].split()  # whole, its own line
    assert wrapped(Console(width=80, file=io.StringIO()), NOTICE) == NOTICE  # a log: one line to grep


def test_tunes_header_fits_80_columns() -> None:
    """harl tune's header: the tune directory alone on its line, then what the study runs in a line within
    80 columns (one line of both broke mid-word in an 80-column terminal)."""
    from harl.tune.command import header

    tune_dir = Path("/work/runs/happo-mpe-spread-tune-20260101-120000")
    lines = header(tune_dir, 12, 200, list(range(1, 11)), "on Ray (auto)")
    assert lines[0] == f"tune directory: {tune_dir}"
    assert lines[1] == "  12 trial(s) so far, up to 200; seeds 1,2,3,4,5,6,7,8,9,10; on Ray (auto)"
    assert header(tune_dir, 0, None, [1, 2, 3], "3 run(s) at a time")[1] == (
        "  0 trial(s) so far, until the --timeout; seeds 1,2,3; 3 run(s) at a time")
    assert all(len(line) <= 80 for line in lines[1:])


def test_the_suites_notes_break_at_spaces(tmp_path: Path) -> None:
    """A suite's notes are shown with its table, broken at spaces at 80 columns, a path left whole."""
    result = smoke_result()
    path = str(tmp_path / ("a-long-folder-name-" * 6)) + "/results"
    result.notes.append(f"no IQM/CI tables (compare/): {path}: no run has an evaluation (an eval_return row in "
                        "metrics.csv) yet, nothing to compare")
    lines = render(result.table(), 80)
    assert f"{path}:" in [line.strip() for line in lines]  # whole, on its own line
    assert words_whole(lines, result.notes[0])
    assert all(len(line.rstrip()) <= 80 for line in lines if path not in line and str(result.suite_dir) not in line)


def test_results_md_names_compare_only_when_written() -> None:
    result = smoke_result(("passed", "passed", "passed"))
    written = _markdown(result, None, 0)
    assert "[compare/results.md](compare/results.md)" in written
    missing = _markdown(result, 'harl compare needs: pip install "harl[compare]"', 0)
    assert "compare/results.md" not in missing and "](compare" not in missing
    assert 'No IQM/CI tables (compare/): harl compare needs: pip install "harl[compare]"' in missing
    stopped = _markdown(result, None, 2)
    assert "**Incomplete**: 2 runs have not finished" in stopped and "](compare" not in stopped


def test_legends_name_the_algorithms_and_a_missing_extra_is_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Two entries of one task: the curves' legend, compare's and marl-eval's algorithms read HAPPO and
    MAPPO (the legend read "happo-mpe-spread (batch_size=-, capacity=-, ...)"); without rliable
    results.md says why there is no compare/ instead of linking it, and the terminal shows no
    marl-eval notes."""
    import harl.compare.figures as figures
    import harl.compare.stats as stats

    def no_rliable() -> None:
        raise MissingExtraError("harl compare", "compare", "rliable")

    monkeypatch.setattr(stats, "require_rliable", no_rliable)
    drawn: list[list[str]] = []
    draw = figures.learning_curves_png
    monkeypatch.setattr(figures, "learning_curves_png",
                        lambda groups, metric, out: (drawn.append([g[0] for g in groups]), draw(groups, metric, out))[1])
    simultaneous = entry("mappo").replace("set = [", 'set = ["updater.kind=simultaneous", ')
    suite = write_suite(tmp_path, entry("happo"), simultaneous)
    out = tmp_path / "out"
    assert main(["suite", str(suite), "--out", str(out), "--quiet", "--reps", "200"]) == 0
    assert drawn == [["HAPPO", "MAPPO"]]
    markdown = (out / "results.md").read_text(encoding="utf-8")
    assert "](compare" not in markdown and "No IQM/CI tables (compare/): " in markdown and "rliable" in markdown
    assert not (out / "compare").exists()
    assert set(json.loads((out / "marl_eval.json").read_text())["mpe"]["simple_spread"]) == {"HAPPO", "MAPPO"}
    printed = capsys.readouterr().out
    assert "marl-eval JSON:" not in printed and re.search(r"note: no IQM/CI tables \(compare/\): ", printed)
