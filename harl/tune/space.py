"""A search space file: which pipeline keys ``harl tune`` searches, and how it scores and prunes.

::

    [params]                                   # a pipeline key path per parameter
    "updater.objective.lr" = { log_uniform = [1e-4, 2e-3] }
    "updater.objective.clip" = { uniform = [0.1, 0.3] }
    "updater.objective.epochs" = { int = [5, 15] }                # int: also log = true, step = 2
    "policy.hidden_sizes" = { categorical = [[64, 64], [128, 128]] }
    "updater.objective.kind" = { categorical = ["ppo", "a2c"] }
    "updater.objective.clip_" = ...                               # conditional: only for one choice
        # = { uniform = [0.1, 0.3], when = { "updater.objective.kind" = "ppo" } }

    [objective]
    statistic = "mean"          # mean | iqm, of the last `last` evaluations of the trial's seeds
    last = 3

    [pruner]
    kind = "median"             # median | halving | none
    warmup = 2                  # evaluations before a trial can be pruned
    startup_trials = 5          # median: trials that end before any is pruned

    [sampler]
    kind = "tpe"                # tpe | random
    seed = 0                    # one job at a time: the same seed proposes the same trials
    startup_trials = 10         # tpe: random trials before the model proposes

Every problem is one line ``FILE:LINE: where: what was found; what to write``, all of them in
one ``ConfigError``; each parameter's bounds (and choices) are also loaded into the pipeline,
so a key the pipeline does not have, or a value it refuses, is reported with the pipeline's
own words.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from harl.config.loading import load_spec_and_notes, parse_toml
from harl.config.messages import toml_literal
from harl.errors import ConfigError

DISTRIBUTIONS = ("uniform", "log_uniform", "int", "categorical")
TABLES: dict[str, dict[str, tuple[Any, tuple[str, ...] | None]]] = {
    "params": {},
    "objective": {"statistic": ("mean", ("mean", "iqm")), "last": (3, None)},
    "pruner": {"kind": ("median", ("median", "halving", "none")), "warmup": (2, None), "startup_trials": (5, None),
               "reduction_factor": (3, None)},
    "sampler": {"kind": ("tpe", ("tpe", "random")), "seed": (0, None), "startup_trials": (10, None)},
}
"""Table -> key -> (default, allowed words or None for a non-negative integer)."""


@attrs.frozen
class Param:
    """One searched key: its distribution and, for a conditional one, when it exists."""

    key: str
    distribution: str
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    step: int = 1
    choices: tuple[Any, ...] = ()
    when: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    """(key of a categorical param, the choices for which this one exists), all must hold."""
    line: int = 0

    def suggest(self, trial: Any, chosen: dict[str, Any]) -> Any:
        """Optuna's proposal for this key (None when its ``when`` does not hold for ``chosen``)."""
        if any(key not in chosen or chosen[key] not in values for key, values in self.when):
            return None
        if self.distribution == "categorical":
            labels = [label(c) for c in self.choices]  # Optuna stores plain values: a list as its TOML text
            return self.choices[labels.index(trial.suggest_categorical(self.key, labels))]
        if self.distribution == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high), step=self.step, log=self.log)
        return trial.suggest_float(self.key, self.low, self.high, log=self.distribution == "log_uniform")

    def describe(self) -> str:
        if self.distribution == "categorical":
            text = f"categorical {', '.join(toml_literal(c) for c in self.choices)}"
        else:
            text = f"{self.distribution} [{toml_literal(self.low)}, {toml_literal(self.high)}]"
            text += " log" if self.log else ""
        when = " and ".join(f"{k} in {', '.join(toml_literal(v) for v in vs)}" for k, vs in self.when)
        return text + (f" when {when}" if when else "")


@attrs.frozen
class Space:
    path: Path
    text: str
    params: tuple[Param, ...]
    statistic: str = "mean"
    last: int = 3
    pruner: str = "median"
    warmup: int = 2
    startup_trials: int = 5
    reduction_factor: int = 3
    sampler: str = "tpe"
    seed: int = 0
    sampler_startup_trials: int = 10

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:16]

    def suggest(self, trial: Any) -> dict[str, Any]:
        """The trial's values: {key: value} of the params that exist for its choices, in file order."""
        chosen: dict[str, Any] = {}
        for param in self.params:
            value = param.suggest(trial, chosen)
            if value is not None:
                chosen[param.key] = value
        return chosen

    def values_of(self, params: dict[str, Any]) -> dict[str, Any]:
        """Optuna's stored params (categorical choices as their TOML text) as pipeline values."""
        out = {}
        for param in self.params:
            if param.key in params:
                value = params[param.key]
                if param.distribution == "categorical":
                    labels = [label(c) for c in param.choices]
                    value = param.choices[labels.index(value)] if value in labels else value
                out[param.key] = value
        return out


def label(choice: Any) -> Any:
    """A categorical choice as Optuna stores it: a plain value as it is, a list or table as its TOML text."""
    return choice if isinstance(choice, (str, int, float, bool)) else toml_literal(choice)


def overrides_of(values: dict[str, Any]) -> list[str]:
    """``--set`` strings of a trial's values."""
    return [f"{key}={toml_literal(value)}" for key, value in values.items()]


def _line(text: str, key: str, table: str) -> int:
    """The line of ``key`` (quoted or bare) in ``[table]`` (or written ``table.key``), 0 if not found."""
    lines = text.splitlines()
    current = ""
    pattern = re.compile(r'^\s*(?:"' + re.escape(key) + r'"|' + re.escape(key) + r")\s*=")
    for n, line in enumerate(lines, 1):
        header = re.match(r"^\s*\[([^\]]+)\]", line)
        if header:
            current = header.group(1).strip()
            if current == f'{table}."{key}"' or current == f"{table}.{key}":
                return n
            continue
        if current == table and pattern.match(line):
            return n
    for n, line in enumerate(lines, 1):
        if key in line:
            return n
    return 0


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


class _Problems:
    def __init__(self, path: Path, text: str) -> None:
        self.path, self.text = path, text
        self.lines: list[str] = []

    def add(self, table: str, key: str, message: str) -> None:
        line = _line(self.text, key, table) if key else next(
            (n for n, text in enumerate(self.text.splitlines(), 1) if re.match(rf"^\s*\[{re.escape(table)}\]", text)), 0)
        where = f"[{table}] {key!r}".replace("'", '"') if table == "params" else f"{table}.{key}" if key else f"[{table}]"
        self.lines.append(f"{self.path}{f':{line}' if line else ''}: {where}: {message}")

    def raise_any(self) -> None:
        if self.lines:
            raise ConfigError("\n".join(self.lines))


def _param(key: str, raw: Any, problems: _Problems, line: int) -> Param | None:
    example = f'"{key}" = {{ log_uniform = [1e-4, 1e-3] }}'
    if not isinstance(raw, dict):
        problems.add("params", key, f"expected a table naming a distribution, got {toml_literal(raw)}; write e.g. "
                     f"{example} (distributions: {', '.join(DISTRIBUTIONS)})")
        return None
    named = [k for k in raw if k in DISTRIBUTIONS]
    extra = sorted(set(raw) - set(DISTRIBUTIONS) - {"when", "log", "step"})
    if extra:
        hint = difflib.get_close_matches(extra[0], [*DISTRIBUTIONS, "when", "log", "step"], n=1)
        near = f' (did you mean "{hint[0]}"?)' if hint else ""
        problems.add("params", key, f"unknown key {extra[0]!r}{near}; a parameter has one of "
                     f"{', '.join(DISTRIBUTIONS)}, and may have when (int: also log, step)".replace("'", '"'))
        return None
    if len(named) != 1:
        problems.add("params", key, ("no distribution" if not named else f"two distributions ({', '.join(named)})")
                     + f"; give exactly one of {', '.join(DISTRIBUTIONS)}, e.g. {example}")
        return None
    kind = named[0]
    value = raw[kind]
    if ("log" in raw or "step" in raw) and kind != "int":
        problems.add("params", key, f"{'log' if 'log' in raw else 'step'} goes with int; for a float write "
                     "log_uniform = [low, high] instead of uniform")
        return None
    when = raw.get("when", {})
    if "when" in raw and (not isinstance(when, dict) or not when):
        problems.add("params", key, 'when: expected a table of a categorical parameter and its choice(s), e.g. '
                     'when = { "updater.objective.kind" = "ppo" }')
        return None
    conditions = tuple((k, tuple(v) if isinstance(v, list) else (v,)) for k, v in when.items())
    if kind == "categorical":
        if not isinstance(value, list) or len(value) < 2:
            problems.add("params", key, f"categorical needs two choices or more, got {toml_literal(value)}; "
                         "a key with one value is not searched: set it in the pipeline (or with --set) instead")
            return None
        labels = [toml_literal(c) for c in value]
        if len(set(labels)) < len(labels):
            repeated = next(x for x in labels if labels.count(x) > 1)
            problems.add("params", key, f"the choice {repeated} appears twice; each choice once")
            return None
        return Param(key, kind, choices=tuple(value), when=conditions, line=line)
    if (not isinstance(value, list) or len(value) != 2 or not all(_is_number(v) for v in value)):
        problems.add("params", key, f"{kind} expects [low, high], two numbers, got {toml_literal(value)}; "
                     f"e.g. {kind} = {'[5, 15]' if kind == 'int' else '[0.1, 0.3]'}")
        return None
    low, high = value
    log = bool(raw.get("log", False)) or kind == "log_uniform"
    step = raw.get("step", 1)
    if kind == "int" and not all(isinstance(v, int) for v in value):
        problems.add("params", key, f"int expects two integers, got {toml_literal(value)}; for a float write "
                     f"uniform = {toml_literal(value)}")
        return None
    if low >= high:
        what = "empty" if low == high else "inverted"
        fix = (f"a key with one value is not searched: set it with --set {key}={toml_literal(low)}" if low == high
               else f"write it low first: {kind} = [{toml_literal(high)}, {toml_literal(low)}]")
        problems.add("params", key, f"the range {toml_literal(value)} is {what}; {fix}")
        return None
    if log and low <= 0:
        problems.add("params", key, f"{kind}{' log' if kind == 'int' else ''} needs a positive low bound, got "
                     f"{toml_literal(low)}; use uniform for a range that reaches 0 or below")
        return None
    if kind == "int" and (not isinstance(step, int) or step < 1 or (log and step != 1)):
        problems.add("params", key, f"step: expected a positive integer (1 with log = true), got {toml_literal(step)}")
        return None
    return Param(key, kind, float(low) if kind != "int" else low, float(high) if kind != "int" else high,
                 log=log and kind == "int", step=step, when=conditions, line=line)


def _settings(data: dict[str, Any], problems: _Problems) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for table in sorted(set(data) - set(TABLES)):
        hint = difflib.get_close_matches(table, list(TABLES), n=1)
        near = f' (did you mean "{hint[0]}"?)' if hint else ""
        problems.add(table, "", f"unknown table{near}; a space file has {', '.join(f'[{t}]' for t in TABLES)}")
    for table, keys in TABLES.items():
        if table == "params":
            continue
        given = data.get(table, {})
        if not isinstance(given, dict):
            problems.add(table, "", f"expected a table, got {toml_literal(given)}")
            continue
        for key in sorted(set(given) - set(keys)):
            hint = difflib.get_close_matches(key, list(keys), n=1)
            near = f' (did you mean "{hint[0]}"?)' if hint else ""
            problems.add(table, key, f"unknown key{near}; valid keys: {', '.join(keys)}")
        for key, (default, allowed) in keys.items():
            value = given.get(key, default)
            if allowed is not None and value not in allowed:
                problems.add(table, key, f"expected one of {', '.join(map(repr, allowed))}, got {toml_literal(value)}; "
                             f'e.g. {key} = "{default}" (the default)'.replace("'", '"'))
            elif allowed is None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                problems.add(table, key, f"expected a non-negative integer, got {toml_literal(value)}; "
                             f"e.g. {key} = {default} (the default)")
            name = f"sampler_{key}" if table == "sampler" and key == "startup_trials" else \
                {("pruner", "kind"): "pruner", ("sampler", "kind"): "sampler",
                 ("objective", "statistic"): "statistic"}.get((table, key), key)
            out[name] = value
    if isinstance(out.get("last"), int) and out["last"] < 1:
        problems.add("objective", "last", "expected 1 or more evaluations, got 0; e.g. last = 3 (the default)")
    return out


def read_space(path: str | Path, pipeline: str | Path, overrides: Sequence[str] = ()) -> Space:
    """Read and validate a space file against ``pipeline`` (with ``overrides``): a ``Space``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"--space {path}: no such space file; a space is a TOML file whose [params] name the "
                          'pipeline keys to search, e.g. "updater.objective.lr" = { log_uniform = [1e-4, 1e-3] } '
                          "(docs/tune.md)") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--space {path}: not a space file (it is not UTF-8 text)") from None
    except OSError as exc:
        raise ConfigError(f"--space {path}: cannot read the space file ({exc.strerror})") from None
    data = parse_toml(text, str(path))
    problems = _Problems(path, text)
    settings = _settings(data, problems)
    raw_params = data.get("params", {})
    params: list[Param] = []
    if not isinstance(raw_params, dict) or not raw_params:
        problems.add("params", "", 'no parameter to search; add e.g. [params] "updater.objective.lr" = '
                     "{ log_uniform = [1e-4, 1e-3] }")
    else:
        for key, raw in raw_params.items():
            param = _param(key, raw, problems, _line(text, key, "params"))
            if param is not None:
                params.append(param)
    problems.raise_any()
    _check_conditions(params, problems)
    problems.raise_any()
    _check_against_pipeline(params, pipeline, list(overrides), problems)
    problems.raise_any()
    return Space(path, text, tuple(params), **settings)


def _check_conditions(params: Sequence[Param], problems: _Problems) -> None:
    seen: dict[str, Param] = {}
    for param in params:
        if param.key.partition("=")[0] == "run.seed":
            problems.add("params", param.key, "seeds are --seeds, not a searched key")
        for key, values in param.when:
            parent = seen.get(key)
            if parent is None or parent.distribution != "categorical":
                problems.add("params", param.key, f'when: "{key}" is not a categorical parameter above this one; '
                             "a condition names a categorical parameter written earlier in [params]")
                continue
            labels = [toml_literal(c) for c in parent.choices]
            for value in values:
                if toml_literal(value) not in labels:
                    problems.add("params", param.key, f'when: {toml_literal(value)} is not a choice of "{key}" '
                                 f"({', '.join(labels)})")
        seen[param.key] = param


def _extremes(params: Sequence[Param]) -> Iterator[tuple[Param, list[Any]]]:
    """Each param with the values that bound it (its low and high, each choice) and, for a
    conditional one, the ``--set`` strings of the choices it exists under."""
    by_key = {p.key: p for p in params}
    for param in params:
        context = [f"{key}={toml_literal(values[0])}" for key, values in param.when]
        for key, _values in param.when:  # the condition's own conditions, one level up
            context = [f"{k}={toml_literal(v[0])}" for k, v in by_key[key].when] + context
        candidates = param.choices if param.distribution == "categorical" else (param.low, param.high)
        yield param, [(int(v) if param.distribution == "int" else v, context) for v in candidates]


def _check_against_pipeline(params: Sequence[Param], pipeline: str | Path, overrides: list[str],
                            problems: _Problems) -> None:
    """Each value a param can take (its bounds, each choice) loaded into the pipeline, under its conditions."""
    for param, candidates in _extremes(params):
        for value, context in candidates:
            text = f"{param.key}={toml_literal(value)}"
            try:
                load_spec_and_notes(pipeline, [*overrides, *context, text])
            except ConfigError as exc:
                found = str(exc).split("\n")
                mine = [line for line in found if f"(from --set {text})" in line] or found
                message = "; ".join(line.replace(f" (from --set {text})", "") for line in mine)
                problems.add("params", param.key, f"{toml_literal(value)} does not go into the pipeline: {message}")
                break


def check_fit(space: Space, pipeline: str | Path, overrides: Sequence[str] = (), members: int = 1) -> None:
    """Each bound and choice of the space checked against memory as a run checks it before building
    anything (``harl.envs.footprint.check_sizes``; ``members``: a population's seeds), once, before the
    first trial: a value that cannot fit would fail every trial that draws it.  One ``ConfigError``,
    a line per key, naming the value and the bound to lower."""
    from harl.compose import resolve_device
    from harl.envs.footprint import check_sizes
    from harl.errors import HarlError, ResourceError

    problems = _Problems(space.path, space.text)
    for param, candidates in _extremes(space.params):
        for value, context in candidates:
            text = f"{param.key}={toml_literal(value)}"
            try:
                spec = load_spec_and_notes(pipeline, [*overrides, *context, text])[0]
                check_sizes(spec, f"{pipeline} with {text}", resolve_device(spec.run.device, str(pipeline)), members)
            except ResourceError as exc:
                bound = ("that choice" if param.distribution == "categorical" else
                         "its high bound" if value == param.high else "its low bound")
                problems.add("params", param.key, f"{toml_literal(value)} cannot fit in memory, so every trial "
                             f"that drew it would fail: {' '.join(str(exc).split())}; change {bound} so that every "
                             "value of the space fits")
                break
            except HarlError:  # not a size: the trial that draws it says what, in the run's own words
                continue
    problems.raise_any()
