"""HARL's three dicts -> a harl pipeline (the converter's), with the runner class's updater kind.

The one thing a runner class adds to the conversion is ``[updater] kind``: HA runners
update agents one after another (``sequential``), MA runners all at once
(``simultaneous``).  Nothing else differs between them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from harl.config.loading import read_toml
from harl.errors import ConfigError

ONLY_IN = {"sequential": ("order",), "simultaneous": ("others_actions",)}
"""Keys of one updater kind that the other does not have (dropped when the kind changes)."""


def convert(args: dict[str, Any], algo_args: dict[str, Any], env_args: dict[str, Any]
            ) -> tuple[dict[str, Any], list[str]]:
    """The converter's pipeline tables and notes for HARL's ``(args, algo_args, env_args)``."""
    try:
        from harl.compat import pipeline_from_harl
    except ImportError:
        raise ConfigError(
            f"harl.runners: cannot convert HARL's config of algo \"{args.get('algo')}\" on env "
            f"\"{args.get('env')}\": harl.compat (the converter from HARL's dicts) is not installed "
            "in this harl; pass a harl pipeline with pipeline=\"pipelines/....toml\" instead"
        ) from None
    conversion = pipeline_from_harl(args["algo"], args["env"], args, algo_args, env_args)
    return copy.deepcopy(conversion.pipeline), list(conversion.notes)


def pipeline_tables(args: dict[str, Any], algo_args: dict[str, Any], env_args: dict[str, Any],
                    updater_kind: str, pipeline: str | Path | dict[str, Any] | None = None
                    ) -> tuple[dict[str, Any], list[str], str]:
    """(tables, notes, source): converted from HARL's dicts, or ``pipeline`` (a file or tables) as given.

    ``updater_kind`` is the runner class's; a differing kind is replaced, with a note.
    """
    if pipeline is None:
        data, notes = convert(args, algo_args, env_args)
        source = f"HARL config ({args.get('algo')} on {args.get('env')})"
    elif isinstance(pipeline, dict):
        data, notes, source = copy.deepcopy(pipeline), [], "pipeline"
    else:
        data, notes, source = read_toml(Path(pipeline)), [], str(pipeline)
    updater = data.setdefault("updater", {})
    kind = updater.get("kind", "sequential")
    if kind != updater_kind:
        for key in ONLY_IN.get(kind, ()):
            updater.pop(key, None)
        notes.append(f'updater.kind: "{kind}" replaced by "{updater_kind}", the kind of this runner class')
    updater["kind"] = updater_kind
    return data, notes, source
