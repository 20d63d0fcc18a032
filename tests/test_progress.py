"""harl.logging.progress: stage time shares, plain lines off a terminal, --quiet."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from harl.cli import main
from harl.evaluator import EvalStats
from harl.logging.progress import ProgressView, StageTimes, pack_clauses, summary_lines
from harl.logging.progress_layout import ProgressLayout, clock_time, pack
from harl.trainer import Counters, TrainResult
from tests.test_cli import HAPPO, tiny


def test_shares() -> None:
    """Shares are percentages of the time measured so far, collect / update / eval."""
    times = StageTimes()
    assert times.shares() == ""
    times.add(4.0, 1.0, 0.0)
    times.add(2.0, 2.6, 0.4)
    assert times.shares() == "collect 60% · update 36% · eval 4%"


def row(iteration: int, eval_return: float | None = None) -> dict[str, object]:
    return {"iteration": iteration, "env_steps": 100 * iteration, "steps_per_s": 1234.4,
            "train_return": -12.345, "eval_return": eval_return}


def test_plain_lines_when_not_a_terminal() -> None:
    """Off a terminal: a line every log_every iterations and after each evaluation, with the shares."""
    out = io.StringIO()
    view = ProgressView(1000, 0, enabled=True, log_every=2, console=Console(file=out, width=200))
    for iteration in (1, 2, 3):
        view.update(row(iteration, -9.5 if iteration == 3 else None), -9.5 if iteration == 3 else None,
                    "collect 60% · update 40% · eval 0%")
    view.close()
    assert out.getvalue().splitlines() == [
        "it 2  env steps 200  1234 steps/s  train -12.35  eval -  (collect 60% · update 40% · eval 0%)",
        "it 3  env steps 300  1234 steps/s  train -12.35  eval -9.50  (collect 60% · update 40% · eval 0%)",
    ]


def test_long_plain_line_is_not_wrapped() -> None:
    """Off a terminal the console is 80 columns wide; a longer line stays one line, not cut
    inside a figure (it was ``(collect`` at the end of one line and ``82% ·`` on the next)."""
    out = io.StringIO()
    view = ProgressView(10**9, 0, enabled=True, log_every=1, console=Console(file=out, width=80))
    view.update({**row(1000), "env_steps": 123_456_789}, -123.456, "collect 82% · update 18% · eval 0%")
    view.close()
    assert out.getvalue() == ("it 1000  env steps 123,456,789  1234 steps/s  train -12.35  eval -123.46  "
                              "(collect 82% · update 18% · eval 0%)\n")


def test_a_run_logs_one_line_per_iteration_off_a_terminal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real run with its output captured (not a terminal): one whole line per logged iteration,
    each wider than the 80 columns rich assumes off a terminal."""
    pytest.importorskip("mpe2", reason="the run uses MPE (pip install harl[mpe])")
    settings = [a.replace("logging.progress=false", "logging.log_every=1") for a in tiny(tmp_path, 150)]
    assert main(["train", str(HAPPO), *settings]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert [line.split("  ")[0] for line in lines] == ["it 1", "it 2", "it 3"]
    for line in lines:
        assert re.fullmatch(r"it \d  env steps \d+  \d+ steps/s  train \S+  eval -?\d+\.\d\d  "
                            r"\(collect \d+% · update \d+% · eval \d+%\)", line), line
    assert max(len(line) for line in lines) > 80


def test_disabled_view_prints_nothing() -> None:
    """enabled=False (--quiet, progress = false) shows no line at all."""
    out = io.StringIO()
    view = ProgressView(1000, 0, enabled=False, log_every=1, console=Console(file=out))
    view.update(row(1, -1.0), -1.0, "collect 100% · update 0% · eval 0%")
    view.close()
    assert out.getvalue() == ""


def test_quiet_train(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """train --quiet prints the run directory and the result, and no progress, even with progress = true."""
    pytest.importorskip("mpe2", reason="the run uses MPE (pip install harl[mpe])")
    settings = [a.replace("logging.progress=false", "logging.log_every=1") for a in tiny(tmp_path)]
    assert main(["train", str(HAPPO), *settings, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith("run directory: ") and "finished: 2 iterations" in out
    assert "it 1" not in out


SHARES = "collect 81% · update 18% · eval 1%"


def layout(total: int = 10_000_000, done: int = 4_800_000) -> ProgressLayout:
    """A layout 30 s after its start, 2,400,000 steps into this view: ETA (10M - 4.8M) / 80,000/s = 65 s."""
    now = [100.0]
    view = ProgressLayout(total, 2_400_000, clock=lambda: now[0])
    now[0] = 130.0
    view.update(12, done, 2190.4, "-66.81", "-75.02", SHARES)
    return view


def render(renderable: object, width: int, **console: object) -> str:
    out = io.StringIO()
    Console(file=out, width=width, **console).print(renderable)  # type: ignore[arg-type]
    return out.getvalue()


WHOLE = ["it 12", "48%", "4,800,000/10,000,000 env steps", "2,190 steps/s", "elapsed 0:00:30",
         "ETA 0:01:05", "train -66.81", "eval -75.02", SHARES]


class TestLayout:
    @pytest.mark.parametrize("width", [40, 80, 100, 120, 200])
    def test_every_field_whole(self, width: int) -> None:
        """At 80, 100, 120 and 200 columns (and 40) each figure is on one line, uncut, and no line overflows."""
        lines = render(layout(), width, color_system=None).splitlines()
        assert all(len(line) <= width for line in lines)
        for field in WHOLE:
            assert any(field in line for line in lines), (field, lines)

    @pytest.mark.parametrize(("width", "n_lines"), [(200, 1), (120, 2), (100, 3), (80, 3), (40, 5)])
    def test_line_count(self, width: int, n_lines: int) -> None:
        """One line where all fits; else the bar alone, then the figures packed below."""
        lines = render(layout(), width, color_system=None).splitlines()
        assert len(lines) == n_lines, lines
        if n_lines > 1:
            assert lines[0].startswith("it 12 ") and "steps/s" not in lines[0]

    def test_bar_line_at_80(self) -> None:
        """The bar fills what the other parts leave, heavy for done (in half cells), thin for the rest."""
        # 80 - "it 12 " (6) - "  48%" (5) - gap (2) - " 4,800,000/10,000,000 env steps" (31) = 36 cells;
        # 48% of 36 cells is 17.28 = 34.56 half cells -> 35: 17 whole, one half, 18 thin.
        first = render(layout(), 80, color_system=None).splitlines()[0]
        assert first == "it 12 " + "━" * 17 + "╸" + "─" * 18 + "  48%   4,800,000/10,000,000 env steps"

    def test_steps_move_below_a_narrow_bar(self) -> None:
        """Where the env steps do not fit beside a 10-column bar, they become the first figure, unpadded."""
        # 40 - 6 - 5 = 29 cells; 48% of 29 = 13.92 = 27.84 half cells -> 28: 14 whole, 15 thin.
        lines = render(layout(), 40, color_system=None).splitlines()
        assert lines[0] == "it 12 " + "━" * 14 + "─" * 15 + "  48%"
        assert lines[1] == "4,800,000/10,000,000 env steps"

    def test_width_change_relays(self) -> None:
        """The same layout object renders for whatever width the console has now (a resized terminal)."""
        view = layout()
        assert len(render(view, 200, color_system=None).splitlines()) == 1
        assert len(render(view, 80, color_system=None).splitlines()) == 3

    def test_readable_on_light_and_dark_themes(self) -> None:
        """Only bold, dim and the terminal's own green: no fixed (256 / true) colour, no background,
        no black or white text, which one of the two themes would hide."""
        text = render(layout(), 120, color_system="truecolor", force_terminal=True)
        codes = {code for group in re.findall(r"\x1b\[([0-9;]*)m", text) for code in group.split(";")}
        assert codes <= {"", "0", "1", "2", "32"}, codes

    def test_no_color(self) -> None:
        """With NO_COLOR (rich's no_color) only bold and dim remain; done and left still differ by glyph."""
        text = render(layout(), 80, color_system="truecolor", force_terminal=True, no_color=True)
        codes = {code for group in re.findall(r"\x1b\[([0-9;]*)m", text) for code in group.split(";")}
        assert codes <= {"", "0", "1", "2"}, codes
        assert "━" * 17 + "╸" in text and "─" * 18 in text

    def test_before_the_first_iteration(self) -> None:
        """No figures yet: dashes, no ETA, nothing cut."""
        view = ProgressLayout(1000, 0, clock=lambda: 5.0)
        assert render(view, 80, color_system=None).splitlines() == [
            "it 0 " + "─" * 40 + "   0%      0/1,000 env steps",
            "- steps/s  elapsed 0:00:00  ETA -  train -  eval -",
        ]


def test_clock_time() -> None:
    """h:mm:ss with unpadded hours; unknown is a dash."""
    assert [clock_time(s) for s in (None, 0, 65.9, 3 * 3600 + 62)] == ["-", "0:00:00", "0:01:05", "3:01:02"]


def test_pack_breaks_between_fields() -> None:
    """A field that does not fit starts the next line; a lone field wider than the line is kept whole."""
    from rich.text import Text

    lines = pack([Text("aaaa"), Text("bb"), Text("ccc"), Text("dddddddddd")], 8)
    assert [line.plain for line in lines] == ["aaaa  bb", "ccc", "dddddddddd"]


def test_live_view_on_a_terminal() -> None:
    """On a terminal the view drives the live layout; its last frame at 80 columns shows every figure whole."""
    out = io.StringIO()
    view = ProgressView(1000, 0, enabled=True, log_every=1,
                        console=Console(file=out, width=80, force_terminal=True, color_system=None))
    assert view.live_display is not None and not view.plain
    view.update(row(3, -9.5), -9.5, SHARES)
    view.close()
    for field in ("it 3", "300/1,000 env steps", "30%", "1,234 steps/s", "train -12.35", "eval -9.50", SHARES):
        assert field in out.getvalue()


def test_narrowed_terminal_erases_the_rewrapped_frame() -> None:
    """After a 200-column frame (one line of 192 cells), an 80-column terminal shows it on three
    rows: the live region moves up two rows more than it printed, and erases all three."""
    from harl.logging.progress_layout import ReflowingLiveRender

    view, console = layout(), Console(file=io.StringIO(), width=200, color_system=None)
    live = ReflowingLiveRender(view, console)
    console.print(live)
    assert view.last_widths == [192] and view.rows_at(80) == 3 and view.rows_at(200) == 1
    console.width = 80
    assert str(live.position_cursor()) == "\r\x1b[2K" + "\x1b[1A\x1b[2K" * 2
    console.width = 200
    assert str(live.position_cursor()) == "\r\x1b[2K"


def result(interrupted: bool = False, last_eval: float | None = -64.08,
           run_dir: str = "runs/happo_mpe_spread/seed1_2025-01-01_12-00-00") -> TrainResult:
    return TrainResult(Counters(iteration=1000, env_steps=1_000_000, episodes=4000, wall_time=838.4),
                       None if last_eval is None else EvalStats(last_eval, 1.0, 25.0, 10, {}),
                       interrupted, Path(run_dir))


class TestSummary:
    """The lines harl train ends with, no wider than the terminal (``summary_lines``)."""

    def test_wide_terminal_one_line_each(self) -> None:
        assert summary_lines(result(), 200) == [
            "finished: 1000 iterations, 1,000,000 env steps in 838 s; last evaluation return -64.08",
            "to train longer: harl train --resume runs/happo_mpe_spread/seed1_2025-01-01_12-00-00 "
            "--set run.total_env_steps=N",
        ]

    def test_80_columns(self) -> None:
        """The finished line was 81 characters at 80 columns: it breaks after its ``;``."""
        lines = summary_lines(result(), 80)
        assert lines == [
            "finished: 1000 iterations, 1,000,000 env steps in 838 s;",
            "last evaluation return -64.08",
            "to train longer:",
            "  harl train --resume runs/happo_mpe_spread/seed1_2025-01-01_12-00-00 \\",
            "  --set run.total_env_steps=N",
        ]
        assert max(map(len, lines)) <= 80

    def test_narrow_terminal_keeps_the_path_whole(self) -> None:
        """At 40 columns the path (46 characters) stands whole on its own line, the only one wider."""
        lines = summary_lines(result(), 40)
        assert lines == [
            "finished: 1000 iterations,",
            "1,000,000 env steps in 838 s;",
            "last evaluation return -64.08",
            "to train longer:",
            "  harl train --resume \\",
            "  runs/happo_mpe_spread/seed1_2025-01-01_12-00-00 \\",
            "  --set run.total_env_steps=N",
        ]
        assert [line for line in lines if len(line) > 40] == [lines[5]]

    def test_stopped(self) -> None:
        assert summary_lines(result(interrupted=True, last_eval=None, run_dir="runs/a b"), 80) == [
            "stopped: 1000 iterations, 1,000,000 env steps in 838 s",
            "resume with: harl train --resume 'runs/a b'",
        ]
        assert summary_lines(result(interrupted=True), 80, resumable=False) == [
            "stopped: 1000 iterations, 1,000,000 env steps in 838 s;",
            "last evaluation return -64.08",
        ]


def test_pack_clauses() -> None:
    assert pack_clauses(["aa", "bb", "cc"], 5) == ["aa bb", "cc"]
    assert pack_clauses(["aa", "bb", "cc"], 7, indent="  ", continuation=" \\") == ["  aa \\", "  bb \\", "  cc"]
    assert pack_clauses(["toolong", "a"], 3) == ["toolong", "a"]
