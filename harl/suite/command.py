"""``harl suite SUITE.toml [--out DIR] [--jobs N] [--ray [ADDRESS]]`` and ``harl suite --resume DIR``.

A suite directory::

    DIR/
        suite.json          the suite file's path and text (a resume reads these, not the file)
        <entry>/            one --seeds sweep per entry (sweep.json, its runs, trials.csv, summary.csv)
        results.json        per entry: the metric per seed, the mean, its verdict (pass/fail) and why
        results.md          the same as a table, published reference numbers beside harl's
        marl_eval.json      every run in marl-eval's JSON (harl export-results' exporter)
        compare/            harl compare's IQM/CI tables and figures, a section per task
        curves/             harl plot's learning curves, one figure per task and metric

Every entry's every seed is validated and its sweep directory written before any run starts;
then the unfinished trials of all entries run as one sweep's would (``harl.sweep``: one at a
time here, ``--jobs N`` processes, or Ray tasks), so a stopped suite resumes with the
unfinished runs only.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harl.config.loading import read_toml
from harl.errors import ConfigError, HarlError
from harl.rundir.lock import take
from harl.rundir.naming import stamped
from harl.suite.results import EntryResult, judge
from harl.suite.spec import Entry, Suite, load_suite, parse_suite
from harl.sweep import ray_backend
from harl.sweep.plan import RECORD as SWEEP_RECORD
from harl.sweep.plan import Request, Sweep, run_trials
from harl.sweep.state import Display

RECORD = "suite.json"


@attrs.define
class SuiteResult:
    """What a suite run left: its directory, each entry's result, the files and notes."""

    suite_dir: Path
    suite: Suite
    entries: list[EntryResult]
    files: list[Path] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)
    exit_status: int = 0

    @property
    def failures(self) -> list[str]:
        """Each unmet threshold: the entry, the value and the threshold."""
        return [reason for r in self.entries for reason in r.reasons]

    def table(self) -> Table:
        table = Table(title=escape(f"{self.suite.name}: {self.suite_dir}"), title_justify="left")
        for column in ("entry", "seeds", "metric", "value (mean ± std)", "threshold", "verdict", "reference"):
            table.add_column(column, justify="right" if column.startswith("value") else "left")
        for r in self.entries:
            table.add_row(*(escape(cell) for cell in _row(r)))
        return table


def _threshold(entry: Entry) -> str:
    parts = [f">= {entry.threshold:.4g}"] if entry.threshold is not None else []
    if entry.min_rise is not None:
        parts.append(f"rise >= {entry.min_rise:.4g}")
    return ", ".join(parts) or "-"


def _row(r: EntryResult) -> list[str]:
    e = r.entry
    read = e.metric if e.window == 1 else f"{e.metric} (last {e.window})"
    value = "-" if r.value is None else f"{r.value:.4g} ± {r.std:.2g}"
    if r.rise is not None and e.min_rise is not None:
        value += f" (rise {r.rise:.3g})"
    refs = "; ".join(f"{x.value:g} ({x.source}{', ' + x.at if x.at else ''})" for x in e.references) or "-"
    return [e.name, ",".join(map(str, e.seeds)), read, value, _threshold(e), r.verdict, refs]


def _markdown(result: SuiteResult) -> str:
    head = ["entry", "seeds", "budget", "metric", "value (mean ± std)", "threshold", "verdict", "reference"]
    lines = [f"# Suite {result.suite.name}", "", result.suite.about, "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in result.entries:
        cells = _row(r)
        cells.insert(2, f"{r.entry.budget:,}")
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    lines += ["", "Value: the metric's final value (or the mean of its last `window` values) in each seed's "
              "metrics.csv, mean ± std over seeds. Reference: published numbers with their source, read as "
              "each names (they may use other budgets and protocols). IQM and 95% CIs per task: compare/.", ""]
    return "\n".join(lines)


def _sweep_of(entry: Entry, sweep_dir: Path) -> Sweep:
    """The entry's sweep: resumed when its directory holds one, else new (a directory left
    without sweep.json, by a stop while it was being written, ran nothing: it is made anew)."""
    if (sweep_dir / SWEEP_RECORD).is_file():
        return Sweep.resume(sweep_dir, None)
    if sweep_dir.exists():
        shutil.rmtree(sweep_dir)
    request = Request.parse(str(entry.pipeline), entry.sweep_overrides(), ",".join(map(str, entry.seeds)), [])
    return Sweep.new(request, sweep_dir, None)


def _prepare(suite: Suite, suite_dir: Path, fresh: bool) -> list[Sweep]:
    """Every entry's sweep, validated and written; a new suite whose entry is refused leaves nothing."""
    sweeps = []
    try:
        for entry in suite.entries:
            try:
                sweeps.append(_sweep_of(entry, suite_dir / entry.name))
            except HarlError as exc:
                kind = ConfigError if isinstance(exc, ConfigError) else HarlError
                raise kind(f"{suite.path}: entry \"{entry.name}\": {exc}") from None
    except BaseException:
        if fresh:
            shutil.rmtree(suite_dir, ignore_errors=True)
        raise
    return sweeps


def _run(sweeps: list[Sweep], jobs: int, address: str | None, max_retries: int, quiet: bool,
         console: Console) -> None:
    """The unfinished trials of every entry, together, by the sweep machinery's backends."""
    todo = [s for sweep in sweeps for s in sweep.states if s.status != "finished"]
    done = sum(len(sweep.states) for sweep in sweeps) - len(todo)
    where = f"on Ray ({address})" if address else "one at a time" if jobs == 1 else f"{jobs} at a time"
    console.print(f"{len(todo)} run{'s' if len(todo) != 1 else ''} to go ({done} finished); {where}",
                  highlight=False)
    if not todo:
        return
    try:
        run_trials(todo, Display(todo, console, quiet), jobs, address, max_retries, quiet)
    finally:
        for sweep in sweeps:
            sweep.write_records()


def _task_of_entry(sweep: Sweep) -> str:
    from harl.compare.runs import task_of

    env, task = task_of(read_toml(sweep.states[0].run_dir / "pipeline.toml"))
    return f"{env}_{task}"


def _outputs(suite: Suite, sweeps: list[Sweep], suite_dir: Path, reps: int) -> tuple[list[Path], list[str]]:
    """marl-eval JSON, harl compare's tables and figures, harl plot's curves: each skipped with a
    note when it cannot be made (a missing extra, no evaluated run yet)."""
    from harl.compare.marl_eval import export_results
    from harl.compare.report import compare
    from harl.plot import plot

    files: list[Path] = []
    notes: list[str] = []
    dirs = [sweep.sweep_dir for sweep in sweeps]
    labels = {str(sweep.sweep_dir): e.label for e, sweep in zip(suite.entries, sweeps) if e.label}
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("marl-eval JSON", lambda: export_results(dirs, suite_dir / "marl_eval.json", labels=labels)),
        ("IQM/CI tables", lambda: compare(dirs, suite_dir / "compare", labels=labels, reps=reps))]
    curves: dict[tuple[str, str], list[Path]] = {}
    for entry, sweep in zip(suite.entries, sweeps):
        curves.setdefault((_task_of_entry(sweep), entry.metric), []).append(sweep.sweep_dir)
    for (task, metric), paths in curves.items():
        out = suite_dir / "curves" / f"{task}-{metric}.png"
        steps.append((f"curves of {task}", functools.partial(plot, paths, metric, out)))
    for what, make in steps:
        try:
            made = make()
        except HarlError as exc:
            notes.append(f"no {what}: {exc}")
            continue
        if what == "IQM/CI tables":
            files += made.files
        elif what == "marl-eval JSON":
            files.append(made.path)
            notes += [f"marl-eval JSON: {n}" for n in made.notes]
        else:
            files.append(made[0])
    return files, notes


def _status(results: list[EntryResult], sweeps: list[Sweep]) -> int:
    statuses = {s.status for sweep in sweeps for s in sweep.states}
    if statuses & {"stopped", "not started", "waiting", "running"}:
        return 130
    return 0 if all(r.verdict in ("passed", "unjudged") for r in results) else 1


def _start(suite_file: str | Path | None, out: str | Path | None, resume: str | Path | None,
           jobs: int | None) -> tuple[Suite, Path, bool, int]:
    """(the suite, its directory, whether it is new, jobs): from the file, or from a suite directory."""
    if resume is not None:
        if suite_file is not None or out is not None:
            raise HarlError(f"--resume {resume} continues a suite in its own directory with the suite it "
                            "started with: give --resume DIR alone (no suite file, no --out)")
        suite_dir = Path(resume)
        try:
            record = json.loads((suite_dir / RECORD).read_text(encoding="utf-8"))
            suite = parse_suite(record["text"], Path(record["suite_file"]))
        except (OSError, ValueError, KeyError) as exc:
            raise HarlError(f"{suite_dir / RECORD}: cannot read the suite's record ({exc}); is this a "
                            "directory of harl suite?") from None
        return suite, suite_dir.resolve(), False, jobs or int(record.get("jobs", 1))
    if suite_file is None:
        raise HarlError("harl suite needs a suite file (e.g. harl suite benchmarks/suites/smoke.toml) or "
                        "--resume DIR")
    suite = load_suite(suite_file)
    suite_dir = Path(out) if out is not None else stamped(Path("runs"), f"{suite.name}-suite")
    if suite_dir.exists() and any(suite_dir.iterdir()):
        raise HarlError(f"--out {suite_dir}: not empty; a suite needs a new (or empty) directory (continue a "
                        f"stopped suite with harl suite --resume {suite_dir})")
    suite_dir.mkdir(parents=True, exist_ok=True)
    record = {"suite_file": str(suite.path), "text": Path(suite_file).read_text(encoding="utf-8"),
              "jobs": jobs or 1}
    (suite_dir / RECORD).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return suite, suite_dir.resolve(), True, jobs or 1


def run_suite(suite_file: str | Path | None = None, out: str | Path | None = None, *, jobs: int | None = None,
              ray: str | None = None, resume: str | Path | None = None, max_retries: int = 2,
              reps: int = 2000, quiet: bool = False, console: Console | None = None) -> SuiteResult:
    """Run (or ``resume``) a suite; write results.json, results.md, marl_eval.json, compare/ and curves/."""
    console = console or Console()
    address = ray_backend.ray_address(ray)
    if (jobs is not None and jobs < 1) or max_retries < 0:
        raise HarlError(f"--{'jobs' if jobs is not None and jobs < 1 else 'max-retries'}: expected a "
                        f"{'positive' if jobs is not None and jobs < 1 else 'non-negative'} integer")
    if address and jobs not in (None, 1):
        raise HarlError("--jobs is for local processes; on Ray the cluster's free CPUs decide how many runs "
                        "go at once")
    if address:
        ray_backend.import_ray()  # a missing extra before any directory is made
    suite, suite_dir, fresh, jobs = _start(suite_file, out, resume, jobs)
    with contextlib.ExitStack() as held:  # one driver per suite directory
        try:
            held.enter_context(take(suite_dir, "suite"))
        except HarlError:
            if fresh:
                shutil.rmtree(suite_dir, ignore_errors=True)
            raise
        sweeps = _prepare(suite, suite_dir, fresh)
        for note in (n for sweep in sweeps for n in sweep.notes):
            console.print(f"note: {note}", highlight=False, markup=False)
        console.print(f"suite {suite.name}: {suite_dir} ({len(suite.entries)} entries)", highlight=False)
        _run(sweeps, 1 if address else jobs, address, max_retries, quiet, console)
    results = [judge(entry, sweep.states) for entry, sweep in zip(suite.entries, sweeps)]
    result = SuiteResult(suite_dir, suite, results, exit_status=_status(results, sweeps))
    data = {"suite": suite.name, "suite_file": str(suite.path), "about": suite.about,
            "passed": result.exit_status == 0, "failures": result.failures,
            "entries": [r.to_json() for r in results]}
    (suite_dir / "results.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    (suite_dir / "results.md").write_text(_markdown(result), encoding="utf-8")
    result.files = [suite_dir / "results.json", suite_dir / "results.md"]
    files, notes = _outputs(suite, sweeps, suite_dir, reps)
    result.files += files
    result.notes += notes
    return result


def add_suite_arguments(p: Any) -> None:
    """``harl suite``'s options."""
    p.add_argument("suite", nargs="?", metavar="SUITE.toml", help="the suite file (benchmarks/suites/*.toml)")
    p.add_argument("--out", metavar="DIR", help="the suite directory (default runs/<name>-suite-<time>)")
    p.add_argument("--resume", metavar="DIR", help="continue a stopped suite: its unfinished runs only")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="runs at once, each its own process "
                   "(default 1; a resume keeps the suite's)")
    p.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS", help="run the runs as Ray tasks "
                   "(docs/ray.md)")
    p.add_argument("--max-retries", type=int, default=2, metavar="N", help="restart a run whose process or Ray "
                   "worker died up to N times (default 2)")
    p.add_argument("--reps", type=int, default=2000, metavar="N", help="bootstrap resamples of the IQM/CI "
                   "tables (default 2000)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
