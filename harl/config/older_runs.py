"""What a run's resolved pipeline, written by an older harl, means where a default has changed since.

A resolved pipeline (a run's ``pipeline.toml``) holds every key of every stage, so a key it lacks was
not there when it was written: the run trained with that key's old default.  ``older_defaults``
writes the old value in before the spec is built, so a resume, an evaluation or an export of the run
builds the networks it trained (and the suites' ``revise`` sees that a run made before the change is
not what the entry makes now).  A pipeline file a user writes is never read this way.
"""

from __future__ import annotations

from typing import Any

from harl.config.loading import table_at

CHANGED: tuple[tuple[tuple[str, ...], frozenset[str], str, Any], ...] = (
    # MAT's one-hot agent ids (on since 2026-12-08, as MAT's envs give them)
    (("updater", "objective"), frozenset({"mat", "mat_dec"}), "agent_id", False),
)
"""(table, its kinds, key, the default before the change)."""


def older_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a resolved pipeline's tables), each changed key it lacks set to its old default."""
    teams = data.get("teams")
    for pipeline in [data, *(teams.values() if isinstance(teams, dict) else ())]:
        for path, kinds, key, old in CHANGED:
            table = table_at(pipeline, path)
            if isinstance(table, dict) and table.get("kind") in kinds and key not in table:
                table[key] = old
    return data
