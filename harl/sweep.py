"""Multi-seed runs: ``harl train PIPELINE --seeds 1,2,3 [--jobs N]``.

Each seed is an ordinary run (its own run directory, resumable with ``harl train
--resume``) inside one sweep directory ``<logging.dir>/<name>-sweep-<time>/``::

    happo-mpe-spread-sweep-20260101-120000/
        happo-mpe-spread-s1/   pipeline.toml  metrics.csv  checkpoints/  [train.log]
        happo-mpe-spread-s2/
        summary.csv            one line per seed: status, env steps, final evaluation

With ``--jobs 1`` the seeds run one after the other in this process.  With ``--jobs N``
up to N seeds run at once, each in its own ``python -m harl train --quiet`` process whose
output goes to ``train.log`` in its run directory; every process sets its own torch
threads (``[run] torch_threads``), so N jobs use about N cores.  A run is a function of
its pipeline and seed only, so a seed gives the same ``metrics.csv`` either way (except
the wall-clock columns).
"""

from __future__ import annotations

import contextlib
import csv
import math
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs
import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harl.errors import HarlError

_SEEDS = re.compile(r"^\d+(-\d+)?$")


def parse_seeds(text: str) -> list[int]:
    """``1,2,3`` or ``1-5`` or ``1-3,10``: distinct non-negative integers, in the given order."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not _SEEDS.match(part):
            raise HarlError(f"--seeds {text}: expected non-negative integers separated by commas, "
                            f"or ranges like 1-5 (e.g. --seeds 1,2,3); got {part!r}")
        first, _, last = part.partition("-")
        low, high = int(first), int(last or first)
        if high < low:
            raise HarlError(f"--seeds {text}: the range {part} is empty; write it low-high, e.g. {high}-{low}")
        seeds.extend(range(low, high + 1))
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise HarlError(f"--seeds {text}: seed {repeated[0]} appears twice; each seed is one run")
    return seeds


@attrs.frozen
class SeedResult:
    seed: int
    run_dir: Path
    status: str
    """finished, stopped, failed (exit N) or not started."""
    env_steps: int | None
    eval_return: float | None
    eval_return_std: float | None


def final_numbers(run_dir: Path) -> tuple[int | None, float | None, float | None]:
    """(env steps, last evaluation return, its std over episodes) from a run's metrics.csv."""
    path = run_dir / "metrics.csv"
    if not path.is_file():
        return None, None, None
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    env_steps = int(rows[-1]["env_steps"]) if rows else None
    evaluated = [r for r in rows if r.get("eval_return")]
    if not evaluated:
        return env_steps, None, None
    last = evaluated[-1]
    return env_steps, float(last["eval_return"]), float(last["eval_return_std"] or "nan")


def _env_steps_so_far(run_dir: Path) -> int:
    """The env steps of the last complete row of a run's metrics.csv (0 if none yet)."""
    try:
        lines = (run_dir / "metrics.csv").read_text(encoding="utf-8").splitlines()
        header = lines[0].split(",")
        return int(lines[-1].split(",")[header.index("env_steps")]) if len(lines) > 1 else 0
    except (OSError, IndexError, ValueError):
        return 0


class Sweep:
    """Runs one pipeline for several seeds; ``run()`` returns one ``SeedResult`` per seed."""

    def __init__(self, pipeline: str, overrides: Sequence[str], seeds: Sequence[int], jobs: int,
                 sweep_dir: Path | None, quiet: bool, console: Console) -> None:
        from harl.config.loading import load_pipeline

        if jobs < 1:
            raise HarlError(f"--jobs: expected a positive integer, got {jobs}")
        if any(o.partition("=")[0].strip() == "run.seed" for o in overrides):
            raise HarlError("--seeds sets run.seed for each run; drop --set run.seed=...")
        # Validate once, up front: a broken pipeline is one message, not one per seed.
        spec, self.notes = load_pipeline(pipeline, [*overrides, f"run.seed={seeds[0]}"])
        if sweep_dir is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            sweep_dir = Path(spec.logging.dir) / f"{spec.run.name}-sweep-{stamp}"
            n = 1
            while sweep_dir.exists():
                n += 1
                sweep_dir = sweep_dir.with_name(f"{spec.run.name}-sweep-{stamp}-{n}")
        elif sweep_dir.exists() and any(sweep_dir.iterdir()):
            raise HarlError(f"--run-dir {sweep_dir}: not empty; a sweep needs a new (or empty) directory")
        self.pipeline, self.overrides, self.seeds = pipeline, list(overrides), list(seeds)
        self.jobs, self.sweep_dir, self.quiet, self.console = jobs, sweep_dir, quiet, console
        self.name = spec.run.name
        self.total_env_steps = spec.run.total_env_steps
        self.tensorboard = spec.logging.tensorboard

    def run_dir(self, seed: int) -> Path:
        return self.sweep_dir / f"{self.name}-s{seed}"

    def run(self) -> list[SeedResult]:
        if self.tensorboard:
            from harl.logging.tensorboard import require_tensorboard

            require_tensorboard()
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        for note in self.notes:
            self.console.print(f"note: {note}", highlight=False)
        at_once = "one at a time" if self.jobs == 1 else f"{min(self.jobs, len(self.seeds))} at a time"
        self.console.print(f"sweep directory: {self.sweep_dir} (seeds {', '.join(map(str, self.seeds))}; "
                           f"{at_once})", highlight=False)
        statuses = self._in_process() if self.jobs == 1 else self._in_processes()
        results = [SeedResult(seed, self.run_dir(seed), statuses.get(seed, "not started"),
                              *final_numbers(self.run_dir(seed))) for seed in self.seeds]
        write_summary(self.sweep_dir / "summary.csv", results)
        return results

    def _in_process(self) -> dict[int, str]:
        from harl.run import start_run

        statuses: dict[int, str] = {}
        for seed in self.seeds:
            run_dir = self.run_dir(seed)
            try:
                trainer, _ = start_run(self.pipeline, [*self.overrides, f"run.seed={seed}"], run_dir)
            except HarlError as exc:
                self.console.print(f"seed {seed}: harl: {exc}", highlight=False, markup=False)
                statuses[seed] = "failed (exit 2)"
                continue
            self.console.print(f"seed {seed}: {run_dir}", highlight=False)
            try:
                result = trainer.train(quiet=self.quiet)
            except HarlError as exc:  # e.g. an environment crashed: the other seeds still run
                self.console.print(f"seed {seed}: harl: {exc}", highlight=False, markup=False)
                statuses[seed] = "failed (exit 2)"
                continue
            finally:
                trainer.stages.close()
            statuses[seed] = "stopped" if result.interrupted else "finished"
            if result.interrupted:
                break
        return statuses

    def command(self, seed: int) -> list[str]:
        """The ``python -m harl train`` command line of one seed's run."""
        sets = [arg for o in self.overrides for arg in ("--set", o)]
        return [sys.executable, "-m", "harl", "train", self.pipeline, *sets, "--set", f"run.seed={seed}",
                "--run-dir", str(self.run_dir(seed)), "--quiet"]

    def _in_processes(self) -> dict[int, str]:
        waiting = list(self.seeds)
        running: dict[int, subprocess.Popen[bytes]] = {}
        statuses: dict[int, str] = {}
        interrupts = 0
        live = not self.quiet and self.console.is_terminal
        progress = Progress(TextColumn("seed {task.fields[seed]}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("env steps  {task.fields[status]}"), TimeElapsedColumn(),
                            console=self.console, disable=not live)
        tasks = {seed: progress.add_task("", total=self.total_env_steps, seed=seed, status="waiting")
                 for seed in self.seeds}
        with progress, _terminate_on_error(running):
            while waiting or running:
                try:
                    while waiting and len(running) < self.jobs and not interrupts:
                        seed = waiting.pop(0)
                        running[seed] = self._start(seed)
                        progress.update(tasks[seed], status="running")
                    for seed, process in list(running.items()):
                        progress.update(tasks[seed], completed=_env_steps_so_far(self.run_dir(seed)))
                        code = process.poll()
                        if code is None:
                            continue
                        del running[seed]
                        statuses[seed] = {0: "finished", 130: "stopped"}.get(code, f"failed (exit {code})")
                        progress.update(tasks[seed], status=statuses[seed])
                        if not live:
                            self.console.print(f"seed {seed}: {statuses[seed]}", highlight=False)
                    time.sleep(0.5)
                except KeyboardInterrupt:
                    # A terminal's Ctrl-C reaches the runs too (one process group): each stops
                    # after its iteration, or at once on a second Ctrl-C.  Start no more.
                    interrupts += 1
                    waiting.clear()
                    if interrupts == 1:
                        self.console.print("Ctrl-C: the running seeds stop after their iteration, with a "
                                           "checkpoint (Ctrl-C again to stop them now)", highlight=False)
        return statuses

    def _start(self, seed: int) -> subprocess.Popen[bytes]:
        run_dir = self.run_dir(seed)
        run_dir.mkdir(parents=True, exist_ok=True)
        if not self.console.is_terminal or self.quiet:
            self.console.print(f"seed {seed}: {run_dir} (output in {run_dir / 'train.log'})", highlight=False)
        with (run_dir / "train.log").open("wb") as log:
            return subprocess.Popen(self.command(seed), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)


@contextlib.contextmanager
def _terminate_on_error(running: dict[int, subprocess.Popen[bytes]]) -> Iterator[None]:
    """If the sweep itself fails, stop the runs it started rather than leave them orphaned."""
    try:
        yield
    except BaseException:
        for process in running.values():
            process.terminate()
        for process in running.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)
        raise


def write_summary(path: Path, results: Sequence[SeedResult]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["seed", "status", "env_steps", "eval_return", "eval_return_std", "run_dir"])
        for r in results:
            writer.writerow([r.seed, r.status, "" if r.env_steps is None else r.env_steps,
                             _csv_number(r.eval_return), _csv_number(r.eval_return_std), r.run_dir])


def _csv_number(x: float | None) -> str:
    return "" if x is None or math.isnan(x) else f"{x:.6g}"


def summary_table(results: Sequence[SeedResult], title: str) -> Table:
    """Final evaluation return per seed (mean ± std over its episodes), then over seeds."""
    table = Table(title=escape(title), title_justify="left")
    table.add_column("seed", justify="right")
    table.add_column("status")
    table.add_column("env steps", justify="right")
    table.add_column("final eval return", justify="right")
    table.add_column("run")
    for r in results:
        ret = "-" if r.eval_return is None else f"{r.eval_return:.2f} ± {r.eval_return_std:.2f}"
        steps = "-" if r.env_steps is None else f"{r.env_steps:,}"
        table.add_row(str(r.seed), r.status, steps, ret, escape(r.run_dir.name))
    returns = np.array([r.eval_return for r in results if r.eval_return is not None])
    if len(returns):
        table.add_section()
        table.add_row(f"{len(returns)} seeds", "", "", f"[bold]{returns.mean():.2f} ± {returns.std():.2f}",
                      "over seeds")
    return table


def exit_code(results: Sequence[SeedResult]) -> int:
    """0 when every seed finished, 130 when stopped by Ctrl-C, else 1."""
    statuses = {r.status for r in results}
    if statuses <= {"finished"}:
        return 0
    if "stopped" in statuses or "not started" in statuses:
        return 130
    return 1


def follow_ups(sweep: Sweep, results: Sequence[SeedResult]) -> list[str]:
    """Lines after the table: how to resume stopped runs, start the others, find failures' output."""
    lines = []
    for r in results:
        if r.status == "stopped":
            lines.append(f"resume seed {r.seed} with: harl train --resume {r.run_dir}")
        elif r.status == "not started":
            command = shlex.join(["harl", *sweep.command(r.seed)[3:-1]])
            lines.append(f"start seed {r.seed} with: {command}")
        elif r.status.startswith("failed") and (r.run_dir / "train.log").is_file():
            lines.append(f"seed {r.seed} failed; its output: {r.run_dir / 'train.log'}")
    return lines
