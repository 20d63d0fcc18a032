"""A shipped suite's runs are stopped and resumed across sessions; a replay left out of the
checkpoints comes back empty, and the resumed run then updates differently from an uninterrupted
one (mpe's HATD3 population was resumed that way four iterations before its end, and run again).
So every entry of a suite whose results are committed (``benchmarks/results/<suite>/``) whose
family keeps a replay saves it (``checkpoint.replay_buffer``)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from harl.config.loading import load_spec_and_notes
from harl.errors import MissingExtraError
from harl.registry import family_of
from harl.suite.spec import load_suite

SUITES = Path(__file__).resolve().parents[2] / "benchmarks" / "suites"

FINISHED_UNINTERRUPTED = {
    ("mpe", "qmix-spread-discrete"), ("mpe", "vdn-spread-discrete"), ("smax", "vdn-3m"), ("smax", "qmix-3m"),
}
"""Entries that finished before replays were saved, whose committed metrics show no resume mid-run
(``test_the_exempt_entries_show_no_resume``)."""


def _entries() -> list[tuple[str, Any]]:
    published = [p for p in sorted(SUITES.glob("*.toml")) if (SUITES.parent / "results" / p.stem).is_dir()]
    return [(path.stem, entry) for path in published for entry in load_suite(path).entries]


@pytest.mark.parametrize(("suite", "entry"), _entries(), ids=lambda v: v if isinstance(v, str) else v.name)
def test_an_entry_with_a_replay_saves_it_in_its_checkpoints(suite: str, entry: Any) -> None:
    try:
        spec, _ = load_spec_and_notes(entry.pipeline, entry.overrides)
    except MissingExtraError as exc:  # an env extra this venv lacks: the entry cannot be resolved here
        pytest.skip(f"{entry.pipeline} does not load here: {exc}")
    if not family_of(spec.collector).keeps_replay or (suite, entry.name) in FINISHED_UNINTERRUPTED:
        return
    assert spec.checkpoint.replay_buffer, (
        f"{suite}.toml entry {entry.name!r} keeps a replay its checkpoints leave out: "
        'add "checkpoint.replay_buffer=true" to its set')


@pytest.mark.parametrize(("suite", "name"), sorted(FINISHED_UNINTERRUPTED))
def test_the_exempt_entries_show_no_resume(suite: str, name: str) -> None:
    """A value-family run resumed with an empty replay has iterations without updates (it waits for
    a batch of episodes) after updates began; these entries' committed runs have none."""
    runs = sorted((SUITES.parent / "results" / suite / name).glob("*/metrics.csv"))
    assert runs, f"no committed runs of {suite}/{name}"
    for metrics in runs:
        updates = [float(r["updates"]) for r in csv.DictReader(metrics.open()) if r.get("updates")]
        first = next(i for i, u in enumerate(updates) if u > 0)
        assert all(u > 0 for u in updates[first:]), f"{metrics} was resumed mid-run"
