"""A suite file: what a benchmark suite runs and how each run is judged.

::

    [suite]
    name = "smoke"                       # optional: the file's stem
    about = "each family learns at a tiny budget"

    [[entry]]
    name = "happo-spread"                # the entry's sweep directory inside the suite's
    pipeline = "../../pipelines/happo_mpe_spread.toml"   # relative to this file
    seeds = [1]                          # or "1-5"
    budget = 40_000                      # run.total_env_steps of every seed
    set = ["evaluator.every_iterations=2"]               # more --set overrides (optional)
    vectorize = true                     # its seeds as one population (--vectorize; optional)
    metric = "train_return"              # a metrics.csv column (default eval_return)
    window = 3                           # the mean of its last 3 values (default 1: the final one)
    min_rise = 4.0                       # it must exceed the mean of the first 3 values by 4
    threshold = -70.0                    # ... and/or be at least -70 (both optional)
    note = "HARL's tuned config"         # where the pipeline's settings come from
    [[entry.reference]]                  # published numbers, shown beside harl's
    value = -53.1
    source = "HARL (Zhong et al. 2024), ..."
    spread = 2.0                         # its published std or CI half-width (optional)
    comparable = false                   # another return scale: shown, not judged (optional)

Every problem is one ``ConfigError`` that names the file, the entry and the key.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from harl.config.loading import parse_toml
from harl.errors import ConfigError, HarlError
from harl.sweep.grid import parse_seeds

SUITE_KEYS = ("name", "about")
ENTRY_KEYS = ("name", "pipeline", "seeds", "budget", "set", "vectorize", "metric", "window", "threshold",
              "min_rise", "label", "note", "reference")
REFERENCE_KEYS = ("value", "source", "at", "note", "spread", "comparable")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
NAME_BYTES = 200
"""The longest suite or entry name: it names a directory (``runs/<name>-suite-<time>``)."""

EVERY_RUN_COLUMNS = ("iteration", "env_steps", "episodes", "wall_time", "steps_per_s", "train_return",
                     "train_length", "eval_return", "eval_return_std", "eval_length")
"""The metrics.csv columns every harl run writes (the Trainer's own, before its stages' columns)."""


@attrs.frozen
class Reference:
    """A published number for an entry's task and algorithm, with where it was published."""

    value: float
    source: str
    at: str = ""
    """When it is read in the source (``1M env steps``, ``final``), free text."""
    note: str = ""
    spread: float = 0.0
    """The published spread around ``value`` (a std or a CI half-width, as the note says): the
    results page's verdict calls harl within the reference when its CI meets value ± spread."""
    comparable: bool = True
    """False when the reference's return is on another scale (another env version, another sum):
    shown for context, never judged."""


@attrs.frozen
class Entry:
    name: str
    pipeline: Path
    seeds: tuple[int, ...]
    budget: int
    overrides: tuple[str, ...] = ()
    metric: str = "eval_return"
    window: int = 1
    """The metric read is the mean of its last ``window`` values in metrics.csv (1: the final one)."""
    threshold: float | None = None
    """The metric (mean over seeds) must be at least this."""
    min_rise: float | None = None
    """The metric (mean over seeds) must exceed the mean of its first ``window`` values by this."""
    label: str | None = None
    """The algorithm's name in the comparison (default: harl.compare's name for the pipeline)."""
    note: str = ""
    references: tuple[Reference, ...] = ()
    vectorize: bool = False
    """Its seeds trained as one population (``harl train --seeds --vectorize``, docs/population.md):
    a suite's cost is seeds x budget, and a population shares the envs' and the acting's work."""

    @property
    def judged(self) -> bool:
        return self.threshold is not None or self.min_rise is not None

    def sweep_overrides(self) -> list[str]:
        return [*self.overrides, f"run.total_env_steps={self.budget}"]


@attrs.frozen
class Suite:
    path: Path
    """The suite file (its folder anchors the entries' relative pipeline paths)."""
    name: str
    about: str
    entries: tuple[Entry, ...]


def _unknown(source: str, where: str, table: Mapping[str, Any], allowed: Sequence[str]) -> None:
    for key in table:
        if key not in allowed:
            near = difflib.get_close_matches(key, allowed, n=1)
            hint = f' (did you mean "{near[0]}"?)' if near else ""
            raise ConfigError(f'{source}: {where}: unknown key "{key}"{hint}; the keys are {", ".join(allowed)}')


def _number(source: str, where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{source}: {where}: {key} = {value!r}: expected a finite number")
    return float(value)


def _text(source: str, where: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{source}: {where}: {key} = {value!r}: expected a string")
    return value


def _seeds(source: str, where: str, value: Any) -> tuple[int, ...]:
    if isinstance(value, str):
        try:
            return tuple(parse_seeds(value))
        except HarlError as exc:
            raise ConfigError(f"{source}: {where}: seeds = {value!r}: {str(exc).partition(': ')[2]}") from None
    if (isinstance(value, list) and value and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                  for s in value) and len(set(value)) == len(value)):
        return tuple(value)
    raise ConfigError(f"{source}: {where}: seeds = {value!r}: expected distinct non-negative integers, "
                      'e.g. seeds = [1, 2, 3] or seeds = "1-5"')


def _positive(source: str, where: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{source}: {where}: {key} = {value!r}: expected a positive integer")
    return value


def _stage_columns() -> set[str]:
    """The metrics.csv columns harl's updaters write, besides the per-agent ``agent<i>_<name>`` ones."""
    from harl.update.objectives.mat import TeamStats
    from harl.update.off_policy import CRITIC_STATS
    from harl.update.q_learning import LOSS_STATS
    from harl.update.v_critic import CriticStats

    return {"updates", "lr_scale", "agent_order", "value_loss", "critic_grad_norm", *CRITIC_STATS, *LOSS_STATS,
            *(f.name for f in attrs.fields(TeamStats)), *(f.name for f in attrs.fields(CriticStats))}


def _team_names(pipeline: Path) -> list[str]:
    """The ``[teams.NAME]`` of a pipeline file (none when it has no [teams] or cannot be read: its own
    validation, before any run, says what is wrong with it)."""
    from harl.config.loading import read_toml

    try:
        teams = read_toml(pipeline).get("teams", {})
    except (ConfigError, OSError):
        return []
    return [name for name, table in teams.items() if isinstance(table, dict)] if isinstance(teams, dict) else []


def metric_problem(metric: str, pipeline: Path) -> str | None:
    """Why no run of ``pipeline`` writes the metrics.csv column ``metric`` (None: one does, or may).

    Every run writes ``EVERY_RUN_COLUMNS``; an env's own evaluation numbers are ``eval_<name>`` (which
    depend on the env, so any such name passes but a near miss such as ``eval_retrun``); the updater's are its
    losses, ``agent<i>_<name>`` per agent; a ``[teams]`` pipeline's are ``<team>_<name>`` and
    ``rating_<team>``.  Read before any run starts: a name no run writes used to be found only after
    the whole suite had run."""
    if metric in EVERY_RUN_COLUMNS:
        return None
    longer = any(metric.startswith(c + "_") for c in EVERY_RUN_COLUMNS)  # eval_return_red: not a near miss
    near = [] if longer else difflib.get_close_matches(metric, EVERY_RUN_COLUMNS, n=1, cutoff=0.8)
    if metric.startswith("eval_") and not near:
        return None
    if not near:
        teams = _team_names(pipeline)
        if re.fullmatch(r"agent\d+_\w+", metric) or metric in _stage_columns() or any(
                metric.startswith((f"{team}_", f"rating_{team}")) for team in teams):
            return None
        near = difflib.get_close_matches(metric, [*EVERY_RUN_COLUMNS, *sorted(_stage_columns())], n=1)
    hint = f' (did you mean "{near[0]}"?)' if near else ""
    return (f"no harl run writes this column to metrics.csv{hint}; every run writes "
            f"{', '.join(c for c in EVERY_RUN_COLUMNS if c not in ('iteration', 'episodes'))}, an env's own "
            "evaluation numbers are eval_<name> (e.g. eval_win for SMAX), and the updater's columns are its "
            "losses (value_loss, agent0_policy_loss, ...); look at the header of a run's metrics.csv")


def _references(source: str, where: str, value: Any) -> tuple[Reference, ...]:
    tables = value if isinstance(value, list) else [value]
    out = []
    for k, table in enumerate(tables):
        here = f"{where}, reference {k + 1}"
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: {here}: expected a table with value and source "
                              '([[entry.reference]] value = 0.9, source = "...")')
        _unknown(source, here, table, REFERENCE_KEYS)
        for key in ("value", "source"):
            if key not in table:
                raise ConfigError(f'{source}: {here}: missing key "{key}" (a reference is a number and where '
                                  "it was published)")
        out.append(Reference(_number(source, here, "value", table["value"]),
                             _text(source, here, "source", table["source"]),
                             _text(source, here, "at", table.get("at", "")),
                             _text(source, here, "note", table.get("note", "")),
                             abs(_number(source, here, "spread", table.get("spread", 0.0))),
                             _flag(source, here, "comparable", table.get("comparable", True))))
    return tuple(out)


def _flag(source: str, where: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{source}: {where}: {key} must be true or false, not {value!r}")
    return value


def _entry(source: str, folder: Path, k: int, table: Any) -> Entry:
    where = f"[[entry]] {k + 1}"
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: {where}: expected a table ([[entry]] with name, pipeline, seeds, budget)")
    name = table.get("name")
    if isinstance(name, str):
        where += f' ("{name}")'
    _unknown(source, where, table, ENTRY_KEYS)
    for key in ("name", "pipeline", "seeds", "budget"):
        if key not in table:
            raise ConfigError(f'{source}: {where}: missing key "{key}" (every entry names its name, pipeline, '
                              "seeds and budget)")
    name = _text(source, where, "name", name)
    if not _NAME.match(name) or len(name.encode("utf-8")) > NAME_BYTES:
        raise ConfigError(f"{source}: {where}: name = {name!r}: letters, digits and . _ + - only, at most "
                          f"{NAME_BYTES} bytes (it names the entry's directory)")
    pipeline = folder / _text(source, where, "pipeline", table["pipeline"])
    if not pipeline.is_file():
        raise ConfigError(f'{source}: {where}: pipeline = "{table["pipeline"]}": no such file ({pipeline}); '
                          "a relative path is read from the suite file's folder")
    overrides = table.get("set", [])
    if not isinstance(overrides, list) or not all(isinstance(o, str) and "=" in o for o in overrides):
        raise ConfigError(f"{source}: {where}: set = {overrides!r}: expected a list of \"KEY=VALUE\" strings, "
                          'e.g. set = ["evaluator.every_iterations=2"]')
    for o in overrides:
        if o.partition("=")[0].strip() in ("run.seed", "run.total_env_steps"):
            raise ConfigError(f"{source}: {where}: set = [\"{o}\"]: the entry's seeds and budget set "
                              f"{o.partition('=')[0].strip()}; drop it from set")
    optional = {key: _number(source, where, key, table[key]) for key in ("threshold", "min_rise") if key in table}
    metric = _text(source, where, "metric", table.get("metric", "eval_return"))
    problem = metric_problem(metric, pipeline)
    if problem:
        raise ConfigError(f'{source}: {where}: metric = "{metric}": {problem}')
    return Entry(name=name, pipeline=pipeline.resolve(), seeds=_seeds(source, where, table["seeds"]),
                 budget=_positive(source, where, "budget", table["budget"]), overrides=tuple(overrides),
                 metric=metric,
                 window=_positive(source, where, "window", table.get("window", 1)),
                 threshold=optional.get("threshold"), min_rise=optional.get("min_rise"),
                 label=_text(source, where, "label", table["label"]) if "label" in table else None,
                 note=_text(source, where, "note", table.get("note", "")),
                 references=_references(source, where, table.get("reference", [])),
                 vectorize=_flag(source, where, "vectorize", table.get("vectorize", False)))


def parse_suite(text: str, path: Path) -> Suite:
    """The suite in ``text`` (the file ``path``'s content, or its copy in a suite directory)."""
    source = str(path)
    data = parse_toml(text, source)
    _unknown(source, "the file", data, ("suite", "entry"))
    head = data.get("suite", {})
    if not isinstance(head, dict):
        raise ConfigError(f"{source}: suite: expected a table ([suite] with name and about)")
    _unknown(source, "[suite]", head, SUITE_KEYS)
    tables = data.get("entry", [])
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"{source}: no [[entry]]: a suite names at least one run (an [[entry]] table with "
                          "name, pipeline, seeds and budget)")
    entries = tuple(_entry(source, path.parent, k, t) for k, t in enumerate(tables))
    names = [e.name for e in entries]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f'{source}: two entries are named "{repeated[0]}"; each entry needs its own name '
                          "(it names its directory)")
    return Suite(path.resolve(), _suite_name(source, head, path),
                 _text(source, "[suite]", "about", head.get("about", "")), entries)


def _suite_name(source: str, head: Mapping[str, Any], path: Path) -> str:
    """``[suite] name`` (default: the file's stem), which names the suite's directory
    ``runs/<name>-suite-<time>``: one plain name, as an entry's, so that it cannot leave ``runs/``."""
    if "name" not in head:
        return path.stem
    name = _text(source, "[suite]", "name", head["name"])
    if not _NAME.match(name) or len(name.encode("utf-8")) > NAME_BYTES:
        raise ConfigError(f"{source}: [suite]: name = {name!r}: letters, digits and . _ + - only, starting with a "
                          f"letter or digit, at most {NAME_BYTES} bytes (it names the suite's directory, "
                          'runs/<name>-suite-<time>); write one plain name, e.g. name = "smoke"')
    return name


def load_suite(path: str | Path) -> Suite:
    """The suite file at ``path``, validated (a ``ConfigError`` naming the file and key)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such suite file (the shipped ones are in benchmarks/suites/)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the suite file ({exc})") from None
    return parse_suite(text, path)
