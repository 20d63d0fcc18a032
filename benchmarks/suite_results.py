"""Keep a suite's finished runs as small committed text files, and start a resume from them.

    python benchmarks/suite_results.py save SUITE_DIR benchmarks/results/NAME
    python benchmarks/suite_results.py restore benchmarks/results/NAME SUITE_DIR
    python benchmarks/suite_results.py revise SUITE_DIR NEW_SUITE.toml benchmarks/results/NAME COMMIT  # harl's venv

``save`` copies what a results page and a resume need, and nothing else (no checkpoints):
``suite.json`` (and the suite's ``results.json`` / ``results.md`` once written); per entry its ``sweep.json``, a ``trials.csv`` and
``summary.csv``; per *finished* run its resolved ``pipeline.toml`` and ``metrics.csv``; per
unfinished run its ``pipeline.toml`` alone, marked ``not started`` in ``trials.csv``.
Runs already saved are not copied again, so a run finished under one commit keeps its files.

``restore`` makes a suite directory from those files on a machine that has nothing else
(a fresh clone): ``harl suite --resume SUITE_DIR`` then keeps the finished runs and runs the
unfinished ones from scratch, since their checkpoints were never committed.

``revise`` moves a begun suite to an edited suite file at a later commit (a budget cut, an entry
added): an entry whose runs would be the same (its seeds and ``vectorize``, and the pipeline its
first run resolved, which the new entry must resolve to for that seed) keeps its runs, finished and stopped alike; a changed or removed entry's
directory goes, here and in the results, and ``harl suite --resume`` makes it anew. The
provenance names the new commit and records the revision (which entries were kept from which
commit), so a kept run's numbers are never presented as the new commit's without saying so.
``revise ... --dry-run`` first says which begun entries would be kept and which would run again,
changing nothing.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import shutil
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

RUN_FILES = ("pipeline.toml", "metrics.csv")
SUITE_FILES = ("suite.json", "results.json", "results.md")
ENTRY_FILES = ("sweep.json", "summary.csv")


def _trials(entry_dir: Path) -> list[dict[str, str]]:
    try:
        with (entry_dir / "trials.csv").open(newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def _write_trials(path: Path, rows: list[dict[str, str]]) -> None:
    if not rows:
        return
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _budget_reached(run: Path) -> bool:
    """Whether the run trained to its budget: its metrics.csv's last row is at ``run.total_env_steps``
    (a suite writes trials.csv only when it ends, so a suite still running says nothing yet)."""
    try:
        budget = tomllib.loads((run / "pipeline.toml").read_text(encoding="utf-8"))["run"]["total_env_steps"]
        with (run / "metrics.csv").open(newline="", encoding="utf-8") as f:
            steps = [row.get("env_steps") or "" for row in csv.DictReader(f)]
    except (OSError, KeyError, ValueError, csv.Error):
        return False
    steps = [s for s in steps if s.isdigit()]
    return bool(steps) and int(steps[-1]) >= int(budget)


def save(suite_dir: Path, dest: Path) -> list[str]:
    """Copy the suite's small files into ``dest``; return the runs newly saved as finished."""
    if not (suite_dir / "suite.json").is_file():
        raise SystemExit(f"{suite_dir}: no suite.json; is this a harl suite directory?")
    dest.mkdir(parents=True, exist_ok=True)
    for name in SUITE_FILES:
        if (suite_dir / name).is_file():
            shutil.copy2(suite_dir / name, dest / name)
    saved = []
    for entry_dir in sorted(p for p in suite_dir.iterdir() if (p / "sweep.json").is_file()):
        out = dest / entry_dir.name
        out.mkdir(exist_ok=True)
        for name in ENTRY_FILES:
            if (entry_dir / name).is_file():
                shutil.copy2(entry_dir / name, out / name)
        kept = {row["run_dir"] for row in _trials(out) if row.get("status") == "finished"}
        recorded = {row["run_dir"]: row.get("status") for row in _trials(entry_dir)}
        rows = []
        for run in sorted(p for p in entry_dir.iterdir() if (p / "pipeline.toml").is_file()):
            target = out / run.name
            finished = run.name in kept or recorded.get(run.name) == "finished" or _budget_reached(run)
            if run.name not in kept:  # a run saved as finished before keeps its files as they were
                target.mkdir(exist_ok=True)
                for name in RUN_FILES if finished else RUN_FILES[:1]:
                    if (run / name).is_file():
                        shutil.copy2(run / name, target / name)
                if finished:
                    saved.append(f"{entry_dir.name}/{run.name}")
                else:
                    (target / "metrics.csv").unlink(missing_ok=True)
            rows.append({"run_dir": run.name, "status": "finished" if finished else "not started"})
        _write_trials(out / "trials.csv", rows)
    return saved


def restore(results: Path, suite_dir: Path) -> None:
    """A suite directory from the saved files, ready for ``harl suite --resume``."""
    if suite_dir.exists() and any(suite_dir.iterdir()):
        raise SystemExit(f"{suite_dir}: not empty; restore into a new directory")
    # The sweep records name their runs relative to the suite directory, which Sweep.resume takes
    # from where it is: a plain copy is a resumable suite.
    shutil.copytree(results, suite_dir, dirs_exist_ok=True)


def _entries(text: str) -> dict[str, dict]:
    return {e["name"]: e for e in tomllib.loads(text).get("entry", []) if isinstance(e, dict) and "name" in e}


def _same_runs(entry_dir: Path, old: dict, new: dict, new_folder: Path) -> bool:
    """Whether the edited entry ``new`` would make the runs in ``entry_dir``: the same seeds and
    population, and its first run's resolved pipeline the same as the new entry resolves for that
    seed (so a renamed key or a moved comment changes nothing, a budget or a setting does)."""
    from harl.config.dump import dump_pipeline
    from harl.run.open import spec_of_run
    from harl.sweep.plan import Request, _validate

    if old.get("seeds") != new.get("seeds") or old.get("vectorize", False) != new.get("vectorize", False):
        return False
    runs = sorted(p for p in entry_dir.iterdir() if (p / "pipeline.toml").is_file())
    if not runs:
        return False
    ran = spec_of_run(runs[0])[0]
    request = Request.parse(str(new_folder / new["pipeline"]),
                            [*new.get("set", []), f"run.total_env_steps={new['budget']}"], str(ran.run.seed), [])
    return dump_pipeline(ran) == dump_pipeline(_validate(request)[0][0][1])


def revise(suite_dir: Path, suite_file: Path, results: Path, commit: str, dry_run: bool = False) -> list[str]:
    """Point ``suite_dir`` (and ``results``) at ``suite_file``; return the entries kept.

    ``dry_run``: change nothing, only say which begun entries would be kept (the others' runs are
    deleted by the real revise)."""
    record = json.loads((suite_dir / "suite.json").read_text(encoding="utf-8"))
    old, new = _entries(record["text"]), _entries(suite_file.read_text(encoding="utf-8"))
    kept = [n for n in new if n in old and (suite_dir / n).is_dir()
            and _same_runs(suite_dir / n, old[n], new[n], suite_file.resolve().parent)]
    if dry_run:
        return kept
    for folder in (suite_dir, results):
        for entry_dir in (p for p in folder.iterdir() if p.is_dir() and p.name in old and p.name not in kept):
            shutil.rmtree(entry_dir)
        for name in ("results.json", "results.md"):  # the old suite's: the resume writes the new ones
            (folder / name).unlink(missing_ok=True)
    record.update(suite_file=str(suite_file.resolve()), text=suite_file.read_text(encoding="utf-8"))
    (suite_dir / "suite.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    shutil.copy2(suite_dir / "suite.json", results / "suite.json")
    provenance = results / "provenance.json"
    data = json.loads(provenance.read_text(encoding="utf-8"))
    data.setdefault("revisions", []).append({
        "from": data["commit"], "to": commit, "date": datetime.date.today().isoformat(), "kept": kept,
        "note": "the kept entries' runs began (and their finished runs ran) at 'from'; every other entry "
                "runs at 'to'. One-team metrics are pinned bit-identical across harl's commits "
                "(tests/test_pinned_runs.py)"})
    data["commit"] = commit
    provenance.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("save", help="copy a suite's small files into a results folder")
    s.add_argument("suite_dir", type=Path)
    s.add_argument("dest", type=Path)
    r = sub.add_parser("restore", help="a suite directory from a results folder")
    r.add_argument("results", type=Path)
    r.add_argument("suite_dir", type=Path)
    v = sub.add_parser("revise", help="move a begun suite to an edited suite file at a later commit")
    v.add_argument("suite_dir", type=Path)
    v.add_argument("suite_file", type=Path)
    v.add_argument("results", type=Path)
    v.add_argument("commit")
    v.add_argument("--dry-run", action="store_true", help="change nothing: say which begun entries would be kept "
                   "and which would run again")
    args = parser.parse_args(argv)
    if args.command == "revise":
        kept = revise(args.suite_dir, args.suite_file, args.results, args.commit, args.dry_run)
        if args.dry_run:
            begun = sorted(p.name for p in args.suite_dir.iterdir() if p.is_dir())
            again = [n for n in begun if n not in kept]
            print(f"would keep: {', '.join(kept) or 'none'}; would run again: {', '.join(again) or 'none'} (nothing changed)")
        else:
            print(f"revised {args.suite_dir} to {args.suite_file} at {args.commit[:10]}; kept: {', '.join(kept) or 'none'}")
    elif args.command == "save":
        for run in save(args.suite_dir, args.dest):
            print(f"saved {run}")
    else:
        restore(args.results, args.suite_dir)
        print(f"restored {args.results} into {args.suite_dir}; continue with harl suite --resume {args.suite_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
