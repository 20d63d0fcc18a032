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
import json
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from harl import registry
from harl.config.loading import read_toml
from harl.errors import ConfigError, HarlError
from harl.rundir.lock import take
from harl.rundir.naming import stamped
from harl.rundir.signals import exit_status, first_signal
from harl.suite.results import EntryResult, judge
from harl.suite.spec import Entry, Suite, load_suite, parse_suite
from harl.sweep import ray_backend
from harl.sweep.local import driver_stops
from harl.sweep.plan import RECORD as SWEEP_RECORD
from harl.sweep.plan import Request, Sweep, run_trials
from harl.sweep.state import Display, TrialState, wrapped

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

    def table(self) -> SuiteTable:
        """The results for a terminal: a table where it fits, else an entry per paragraph, then the
        published references and the notes, each broken at spaces (``SuiteTable``)."""
        return SuiteTable(self)


UNFINISHED = ("stopped", "not started", "waiting", "running")
"""Trial statuses of a suite that has not run to its end (a resume runs them)."""


def _seeds(seeds: tuple[int, ...]) -> str:
    """``1-5`` for 1,2,3,4,5; ``1,3,7-9`` for 1,3,7,8,9: the seeds in a few characters."""
    runs: list[list[int]] = []
    for seed in seeds:
        if runs and seed == runs[-1][-1] + 1:
            runs[-1].append(seed)
        else:
            runs.append([seed])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(map(str, r)) for r in runs)


def _threshold(entry: Entry) -> str:
    parts = [f">= {entry.threshold:.4g}"] if entry.threshold is not None else []
    if entry.min_rise is not None:
        parts.append(f"rise >= {entry.min_rise:.4g}")
    return ", ".join(parts) or "-"


def _read(entry: Entry) -> str:
    return entry.metric if entry.window == 1 else f"{entry.metric} (last {entry.window})"


def _value(r: EntryResult) -> str:
    """The mean ± std over seeds (one word-free cell: it never wraps)."""
    return "-" if r.value is None else f"{r.value:.4g} ± {r.std:.2g}"


def _rise(r: EntryResult) -> str:
    return f"rise {r.rise:.3g}" if r.rise is not None and r.entry.min_rise is not None else ""


def _references(entry: Entry) -> str:
    return "; ".join(f"{x.value:g} ({x.source}{', ' + x.at if x.at else ''})" for x in entry.references) or "-"


def _row(r: EntryResult) -> list[str]:
    """results.md's cells: entry, seeds, metric, value, threshold, verdict, reference."""
    e = r.entry
    value = _value(r) + (f" ({_rise(r)})" if _rise(r) else "")
    return [e.name, ",".join(map(str, e.seeds)), _read(e), value, _threshold(e), r.verdict, _references(e)]


class SuiteTable:
    """A suite's results in a terminal, whole at any width: no entry name cut to "on-polic...", no value
    broken over lines, no note broken mid-word.  A table of entry (and seeds), metric, mean ± std (the
    rise under it), threshold and verdict where its unbreakable cells fit the width (the stock smoke
    suite's at 80 columns); else a paragraph per entry.  Published references and the notes are lines
    below it, broken at spaces on a terminal (a path stays whole, for the reader to copy)."""

    def __init__(self, result: SuiteResult) -> None:
        self.result = result

    def grid(self) -> Table:
        table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
        table.add_column("entry (seeds)", no_wrap=True)
        table.add_column("metric", no_wrap=True)
        table.add_column("mean ± std", justify="right", no_wrap=True)
        table.add_column("threshold", no_wrap=True)
        table.add_column("verdict", no_wrap=True)
        for r in self.result.entries:
            e = r.entry
            value = _value(r) + (f"\n{_rise(r)}" if _rise(r) else "")
            metric = e.metric if e.window == 1 else f"{e.metric}\n(last {e.window})"
            name = Text(e.name)
            name.append(f"\nseeds {_seeds(e.seeds)}", style="dim")
            table.add_row(name, *(Text(cell) for cell in (metric, value, _threshold(e), r.verdict)))
        return table

    def paragraphs(self) -> list[str]:
        out = []
        for r in self.result.entries:
            e = r.entry
            rise = f" ({_rise(r)})" if _rise(r) else ""
            value = (_value(r) + rise).replace(" ", "\N{NO-BREAK SPACE}")  # a value never breaks over lines
            out.append(f"{e.name}: {r.verdict}\n  {_read(e)}, seeds {_seeds(e.seeds)}: {value}\n"
                       f"  threshold: {_threshold(e)}")
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from _lines(console, options, f"suite {self.result.suite.name}: {self.result.suite_dir}")
        table = self.grid()
        if Measurement.get(console, options.update_width(10_000), table).minimum <= options.max_width:
            yield table
        else:
            for paragraph in self.paragraphs():
                for line in paragraph.splitlines():
                    yield from _lines(console, options, line, "    " if line.startswith(" ") else "  ")
        for r in self.result.entries:
            if r.entry.references:
                yield from _lines(console, options, f"reference for {r.entry.name}: {_references(r.entry)}")
        for note in self.result.notes:
            yield from _lines(console, options, f"note: {note}")


def _lines(console: Console, options: ConsoleOptions, text: str, indent: str = "  ") -> RenderResult:
    """``text`` broken at spaces to the width on a terminal, later lines indented (``wrapped``); on a
    soft-wrapping console (harl's) no line is cut, on another rich folds what is longer than a line."""
    shown = Text(wrapped(console, text, indent, options.max_width))
    if console.soft_wrap:
        yield from console.render(shown, options.update(no_wrap=True, overflow="ignore"))
    else:
        yield from console.render(shown, options.update(no_wrap=False, overflow="fold"))


def _markdown(result: SuiteResult, compare_note: str | None, unfinished: int) -> str:
    """results.md: the table, what its numbers are, and where the comparison is (or why there is none:
    a link to a compare/ folder that was not written sent readers nowhere)."""
    head = ["entry", "seeds", "budget", "metric", "value (mean ± std)", "threshold", "verdict", "reference"]
    lines = [f"# Suite {result.suite.name}", "", result.suite.about, "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in result.entries:
        cells = _row(r)
        cells.insert(2, f"{r.entry.budget:,}")
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    lines += ["", "Value: the metric's final value (or the mean of its last `window` values) in each seed's "
              "metrics.csv, mean ± std over seeds. Reference: published numbers with their source, read as "
              "each names (they may use other budgets and protocols)."]
    if unfinished:
        lines += ["", f"**Incomplete**: {unfinished} run{'s have' if unfinished > 1 else ' has'} not finished, so "
                  "no verdict is final and no comparison, marl-eval JSON or curves were written; "
                  f"`harl suite --resume {result.suite_dir}` runs {'them' if unfinished > 1 else 'it'} and "
                  "writes them."]
    elif compare_note is None:
        lines += ["", "IQM and 95% CIs per task: [compare/results.md](compare/results.md); the learning curves "
                  "are in curves/, every run in marl-eval's JSON in marl_eval.json (a run without "
                  "absolute_metric.json has its last evaluation as its absolute metric)."]
    else:
        lines += ["", f"No IQM/CI tables (compare/): {compare_note}"]
    return "\n".join(lines) + "\n"


def _sweep_of(entry: Entry, sweep_dir: Path) -> Sweep:
    """The entry's sweep: resumed when its directory holds one, else new (a directory left
    without sweep.json, by a stop while it was being written, ran nothing: it is made anew)."""
    if (sweep_dir / SWEEP_RECORD).is_file():
        return Sweep.resume(sweep_dir, None)
    if sweep_dir.exists():
        shutil.rmtree(sweep_dir)
    request = Request.parse(str(entry.pipeline), entry.sweep_overrides(), ",".join(map(str, entry.seeds)), [])
    return Sweep.new(request, sweep_dir, None, vectorize=entry.vectorize)


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


def _batches(sweeps: list[Sweep]) -> list[tuple[list[TrialState], bool]]:
    """The unfinished trials in the entries' order, as the sweep backends take them: each vectorized
    entry's seeds as one batch (its populations hold one pipeline's seeds only), the trials of
    consecutive other entries together (so ``--jobs N`` keeps N runs going across entries)."""
    batches: list[tuple[list[TrialState], bool]] = []
    for sweep in sweeps:
        todo = [s for s in sweep.states if s.status != "finished"]
        if not todo:
            continue
        if sweep.vectorize or not batches or batches[-1][1]:
            batches.append((todo, sweep.vectorize))
        else:
            batches[-1][0].extend(todo)
    return batches


def _run(sweeps: list[Sweep], jobs: int, address: str | None, max_retries: int, quiet: bool,
         console: Console) -> None:
    """The unfinished trials of every entry, by the sweep machinery's backends: a vectorized entry's as
    populations, the others' together; after a stop signal no further batch starts."""
    batches = _batches(sweeps)
    todo = [s for batch, _ in batches for s in batch]
    done = sum(len(sweep.states) for sweep in sweeps) - len(todo)
    where = f"on Ray ({address})" if address else "one at a time" if jobs == 1 else f"{jobs} at a time"
    console.print(f"{len(todo)} run{'s' if len(todo) != 1 else ''} to go ({done} finished); {where}",
                  highlight=False)
    try:
        for batch, vectorize in batches:
            if first_signal():
                break
            run_trials(batch, Display(batch, console, quiet), jobs, address, max_retries, quiet, vectorize)
    finally:
        for sweep in sweeps:
            sweep.write_records()


def _task_of_entry(sweep: Sweep) -> str:
    from harl.compare.runs import task_of

    env, task = task_of(read_toml(sweep.states[0].run_dir / "pipeline.toml"))
    return f"{env}_{task}"


def entry_labels(suite: Suite, sweeps: list[Sweep]) -> dict[str, str]:
    """Each entry's name in the comparison, the curves' legends and marl-eval's JSON, by its sweep
    directory: its ``label``, else its algorithm (HAPPO, MATD3: ``harl.compare``'s name for what the
    pipeline composes); an algorithm with two unlabelled entries on one task takes the entry's name
    beside it, so that the two are not pooled as one."""
    from harl.compare.runs import algorithm_of

    named = [(e, sweep, e.label or algorithm_of(read_toml(sweep.states[0].run_dir / "pipeline.toml")),
              _task_of_entry(sweep)) for e, sweep in zip(suite.entries, sweeps)]
    taken = [(name, task) for _, _, name, task in named]
    return {str(sweep.sweep_dir): name if e.label or taken.count((name, task)) == 1 else f"{name} ({e.name})"
            for e, sweep, name, task in named}


@attrs.frozen
class Outputs:
    files: list[Path]
    notes: list[str]
    compare_note: str | None
    """Why there is no compare/ (None: it was written)."""


def _outputs(suite: Suite, sweeps: list[Sweep], suite_dir: Path, reps: int) -> Outputs:
    """marl-eval JSON, harl compare's tables and figures, the learning curves: each skipped with a
    note when it cannot be made (a missing extra, no evaluated run yet).  marl-eval's own notes are
    left to ``harl export-results``, where the JSON is the point: on a suite of several tasks they
    were three lines a newcomer could do nothing about (results.md says what the JSON holds)."""
    from harl.compare.figures import learning_curves_png
    from harl.compare.marl_eval import export_results
    from harl.compare.report import compare

    files: list[Path] = []
    notes: list[str] = []
    compare_note: str | None = None
    dirs = [sweep.sweep_dir for sweep in sweeps]
    labels = entry_labels(suite, sweeps)
    try:
        files.append(export_results(dirs, suite_dir / "marl_eval.json", labels=labels).path)
    except HarlError as exc:
        notes.append(f"no marl-eval JSON: {exc}")
    try:
        files += compare(dirs, suite_dir / "compare", labels=labels, reps=reps).files
    except HarlError as exc:
        compare_note = str(exc)
        notes.append(f"no IQM/CI tables (compare/): {exc}")
    curves: dict[tuple[str, str], list[tuple[str, list[Path]]]] = {}
    for entry, sweep in zip(suite.entries, sweeps):
        curves.setdefault((_task_of_entry(sweep), entry.metric), []).append(
            (labels[str(sweep.sweep_dir)], [sweep.sweep_dir]))
    for (task, metric), groups in curves.items():
        try:
            files.append(learning_curves_png(groups, metric, suite_dir / "curves" / f"{task}-{metric}.png"))
        except HarlError as exc:
            notes.append(f"no curves of {task}: {exc}")
    return Outputs(files, notes, compare_note)


def _replay_notes(suite: Suite, sweeps: list[Sweep]) -> list[str]:
    """A note for each entry with runs to go whose replay its checkpoints leave out: a suite is stopped
    and resumed (``--resume``), and such a run would then go on from an empty replay."""
    notes = []
    for entry, sweep in zip(suite.entries, sweeps):
        spec = sweep.states[0].spec
        if (any(s.status != "finished" for s in sweep.states) and not spec.checkpoint.replay_buffer
                and registry.family_of(spec.collector).keeps_replay):
            notes.append(f'entry "{entry.name}" keeps a replay its checkpoints leave out ([checkpoint] '
                         "replay_buffer = false): a run stopped and resumed would start it empty and go on "
                         "unlike an uninterrupted run; add \"checkpoint.replay_buffer=true\" to the entry's set "
                         "to resume exactly")
    return notes


def _unfinished(sweeps: list[Sweep]) -> int:
    return sum(s.status in UNFINISHED for sweep in sweeps for s in sweep.states)


def _status(results: list[EntryResult], sweeps: list[Sweep]) -> int:
    """128 + the first stop signal (130 Ctrl-C, 143 SIGTERM) when runs are left to do, else 0 when every
    verdict passed (or has no threshold), else 1."""
    if _unfinished(sweeps):
        return exit_status(first_signal() or signal.SIGINT)
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
    """Run (or ``resume``) a suite; write results.json, results.md, marl_eval.json, compare/ and curves/.

    SIGINT and SIGTERM (and SIGUSR1) stop it as Ctrl-C does, from the first run to the last file: the
    running trials stop after their iteration with a checkpoint, none starts, the results say
    "incomplete", and the exit status is 128 + the signal (``harl.sweep.local.driver_stops``)."""
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
    vectorized = [e.name for e in suite.entries if e.vectorize]
    if address and vectorized:
        if fresh:
            shutil.rmtree(suite_dir, ignore_errors=True)
        raise HarlError(f"{suite.path}: entry \"{vectorized[0]}\" has vectorize = true: a population trains its "
                        "seeds in one local process, not as Ray tasks; run the suite without --ray, or set "
                        "vectorize = false in that entry")
    with driver_stops(), _held(suite_dir, fresh):  # one driver per suite directory
        sweeps = _prepare(suite, suite_dir, fresh)
        for note in [*(n for sweep in sweeps for n in sweep.notes), *_replay_notes(suite, sweeps)]:
            console.print(f"note: {note}", highlight=False, markup=False)
        console.print(f"suite {suite.name}: {suite_dir} ({len(suite.entries)} entries)", highlight=False)
        _run(sweeps, 1 if address else jobs, address, max_retries, quiet, console)
        results = [judge(entry, sweep.states) for entry, sweep in zip(suite.entries, sweeps)]
        result = SuiteResult(suite_dir, suite, results, exit_status=_status(results, sweeps))
        data = {"suite": suite.name, "suite_file": str(suite.path), "about": suite.about,
                "passed": result.exit_status == 0, "complete": not _unfinished(sweeps),
                "failures": result.failures, "entries": [r.to_json() for r in results]}
        (suite_dir / "results.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        result.files = [suite_dir / "results.json", suite_dir / "results.md"]
        compare_note: str | None = None
        if _unfinished(sweeps):  # half-finished runs make no comparison, marl-eval JSON or curves
            result.notes.append(f"{_unfinished(sweeps)} run(s) have not finished: no comparison, marl-eval JSON "
                                "or curves yet (the resume writes them)")
        else:
            outputs = _outputs(suite, sweeps, suite_dir, reps)
            result.files += outputs.files
            result.notes += outputs.notes
            compare_note = outputs.compare_note
        (suite_dir / "results.md").write_text(_markdown(result, compare_note, _unfinished(sweeps)), encoding="utf-8")
    return result


@contextlib.contextmanager
def _held(suite_dir: Path, fresh: bool) -> Iterator[None]:
    """The suite directory's lock for the driver's life (a second driver of it stops here; a new
    directory it could not lock is removed)."""
    try:
        lock = take(suite_dir, "suite")
    except HarlError:
        if fresh:
            shutil.rmtree(suite_dir, ignore_errors=True)
        raise
    with lock:
        yield


def add_suite_arguments(p: Any) -> None:
    """``harl suite``'s options."""
    p.add_argument("suite", nargs="?", metavar="SUITE.toml", help="the suite file (benchmarks/suites/*.toml), or "
                   "'report': the results page from committed results (harl suite report [RESULTS] [--out PAGE])")
    p.add_argument("results", nargs="?", metavar="RESULTS", help="with report: the results folder (default "
                   "benchmarks/results)")
    p.add_argument("--out", metavar="DIR", help="the suite directory (default runs/<name>-suite-<time>); with "
                   "report: the page (default docs/results.md, its figures in results/ beside it)")
    p.add_argument("--check", action="store_true", help="with report: write nothing, exit 1 when the page "
                   "and the results disagree")
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
