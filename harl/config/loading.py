"""Pipeline files: TOML -> validated, frozen attrs configs.

A pipeline is one TOML table per slot.  Slots with variants carry ``kind``, looked up in
``harl.registry``; each kind is an attrs config class whose fields are the table's keys.
Loading is strict: unknown keys, wrong scalar types (8.7 is not an integer, "false" is not
a boolean), unknown kinds and out-of-range values are all reported in one ``ConfigError``,
one line per problem (wording: ``harl.config.messages``).
"""

from __future__ import annotations

import difflib
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override

from harl import registry
from harl.config.checks import cross_checks
from harl.config.messages import SettingTypeError, fix_for, override_of, problems, show
from harl.config.overrides import apply_overrides
from harl.config.renames import renamed
from harl.config.spec import NESTED_SLOTS, SINGLE_SLOTS, TOP_SLOTS, PipelineSpec
from harl.config.teams import (
    ROLE_SLOT,
    TEAM_KEYS,
    TEAM_SLOTS,
    TeamConfig,
    TeamSpec,
    role_learns,
    team_problems,
)
from harl.errors import ConfigError, MissingExtraError
from harl.settings import InvalidSetting

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _strict_int(value: Any, _: type) -> int:
    if not _is_int(value):
        raise SettingTypeError("an integer", value, "write a whole number", _is_int)
    return value


def _is_finite(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value)


def _strict_float(value: Any, _: type) -> float:
    if not _is_number(value):
        raise SettingTypeError("a number", value, "write a number", _is_number)
    if not math.isfinite(value):  # TOML has inf and nan; no setting means them
        raise SettingTypeError("a finite number", value, "write a finite number", _is_finite)
    return float(value)


def _strict_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise SettingTypeError("a boolean (true or false)", value, "write true or false without quotes",
                               lambda v: isinstance(v, bool))
    return value


def _strict_str(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise SettingTypeError("a string", value, "write it in double quotes")
    return value


def _is_int_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(_is_int(v) for v in value)


def _int_tuple(value: Any, _: type) -> tuple[int, ...]:
    if not _is_int_list(value):
        raise SettingTypeError("a list of integers", value, "write a list of whole numbers", _is_int_list)
    return tuple(value)


def _table(value: Any, _: type) -> dict[str, Any]:
    """A free-form table (``[env.kwargs]``): any TOML values, passed on as they are."""
    if not isinstance(value, dict):
        raise SettingTypeError("a table", value)
    return dict(value)


class Loader:
    """Owns the cattrs converter and the kind dispatch of every slot (through the registry)."""

    def __init__(self) -> None:
        self.converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
        c = self.converter
        c.register_structure_hook(int, _strict_int)
        c.register_structure_hook(float, _strict_float)
        c.register_structure_hook(bool, _strict_bool)
        c.register_structure_hook(str, _strict_str)
        c.register_structure_hook_func(lambda t: t == tuple[int, ...], _int_tuple)
        c.register_structure_hook_func(lambda t: t == dict[str, Any], _table)
        c.register_unstructure_hook(tuple, list)
        self._plain: dict[type, Callable[[Any, type], Any]] = {}
        self.defaults: Mapping[str, str] = {}
        """slot -> the kind a table without ``kind`` gets: the pipeline's family's (``use_family_of``)."""
        self.single: dict[str, type] = dict(SINGLE_SLOTS)
        """slot -> config class of the slots without ``kind``: ``[policy]``'s is the family's (``use_family_of``)."""

    def use_family_of(self, data: Mapping[str, Any]) -> None:
        """Tables without ``kind`` get the defaults of the family of ``data``'s collector (a value-
        decomposition pipeline need not name its episode buffer); the slot's default otherwise."""
        self.defaults = {}
        self.single = dict(SINGLE_SLOTS)
        collector = data.get("collector", {})
        try:
            entry = self.entry("collector", collector if isinstance(collector, dict) else {})
            names = entry.family if isinstance(entry.family, tuple) else (entry.family,)
            family = registry.family(names[0])
            self.defaults = dict(getattr(family, "defaults", {}))
            self.single["policy"] = getattr(family, "policy_config", None) or SINGLE_SLOTS["policy"]
        except (InvalidSetting, KeyError, ValueError):  # reported where the collector table is structured
            pass

    def _structure_fn(self, slot: str, cls: type) -> Callable[[Any, type], Any]:
        """cattrs' function for ``cls``; a nested slot's field (``objective``) dispatches on its kind."""
        if cls not in self._plain:
            # Any, not AttributeOverride: mypy would check a ``**dict`` of overrides against cattrs'
            # own keyword options (``_cattrs_use_linecache: bool``, ...) too.
            nested: dict[str, Any] = {}
            for inner in NESTED_SLOTS:
                parent, _, name = inner.rpartition(".")
                if parent == slot and name in attrs.fields_dict(cls):
                    nested[name] = override(struct_hook=self._slot_hook(inner))
            if slot == ROLE_SLOT:  # a role's setting named after a slot is that slot's table ([teams.NAME.script])
                for name in attrs.fields_dict(cls):
                    if name in registry.SLOTS:
                        nested[name] = override(struct_hook=self._slot_hook(name))
            self._plain[cls] = make_dict_structure_fn(
                cls, self.converter, _cattrs_forbid_extra_keys=True, _cattrs_detailed_validation=True, **nested
            )
        return self._plain[cls]

    def structure_config(self, cls: type, data: Any) -> Any:
        """A table of a class that is not a slot's (``[teams.NAME]``'s ``TeamConfig``), as strictly."""
        if not isinstance(data, dict):
            raise SettingTypeError("a table", data)
        return self._structure_fn("", cls)(data, cls)

    def structure_team(self, table: dict[str, Any]) -> TeamConfig:
        """A ``[teams.NAME]`` table (its stage tables left out): ``agents`` and ``reward``, and its role
        (``role``, a registered kind) from every other key (the role's own: ``of``, ``checkpoint``, ...)."""
        entry = _registered(ROLE_SLOT, "role", table.get("role", _roles()[0]), _roles())
        own = {key: value for key, value in table.items() if key in TEAM_KEYS and key != "role"}
        settings = {key: value for key, value in table.items() if key not in TEAM_KEYS}
        allowed = sorted({*TEAM_KEYS, *attrs.fields_dict(entry.config)})
        errors: list[Exception] = [InvalidSetting(key, f'unknown key for role = "{entry.kind}"{_near(key, allowed)}; '
                                                  f"valid keys: {', '.join(allowed)}", suggest_default=False)
                                   for key in sorted(set(settings) - set(allowed))]
        config = role = None
        try:
            config = self.structure_config(TeamConfig, own)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a located message
            errors.append(exc)
        try:
            role = self._structure_fn(ROLE_SLOT, entry.config)(
                {key: value for key, value in settings.items() if key in allowed}, entry.config)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a located message
            errors.append(exc)
        if errors or config is None:
            raise cattrs.BaseValidationError("the team's table", errors, TeamConfig)
        return attrs.evolve(config, role=role)

    def _slot_hook(self, slot: str) -> Callable[[Any, Any], Any]:
        """cattrs' hook for a nested slot's table: structured as its own ``kind`` says."""
        return lambda data, _: self.structure_slot(slot, data)

    def entry(self, slot: str, data: dict[str, Any]) -> registry.Entry:
        """The registry entry a table's ``kind`` names (the slot's default without one)."""
        entries = registry.kinds(slot)
        names = [e.kind for e in entries]
        return _registered(slot, "kind", data.get("kind", self.defaults.get(slot, names[0])), names)

    def structure_slot(self, slot: str, data: Any) -> Any:
        if not isinstance(data, dict):
            raise SettingTypeError("a table", data)
        if slot in self.single:
            return self._structure_fn(slot, self.single[slot])(data, self.single[slot])
        cls = self.entry(slot, data).config
        for inner in NESTED_SLOTS:  # a nested table left out gets its family's default kind too
            parent, _, name = inner.rpartition(".")
            if parent == slot and inner in self.defaults and name not in data and name in attrs.fields_dict(cls):
                data = {**data, name: {}}
        if "kind" not in attrs.fields_dict(cls):  # a user's class: its kind is the table's, not a key
            data = {k: v for k, v in data.items() if k != "kind"}
        return self._structure_fn(slot, cls)(data, cls)

    def class_at(self, slot: str, data: Any) -> type | None:
        """The config class of the table of ``slot`` (given its raw data); None for no slot."""
        if slot in self.single:
            return self.single[slot]
        if slot not in registry.SLOTS:
            return None
        try:
            return self.entry(slot, data if isinstance(data, dict) else {}).config
        except InvalidSetting:
            return registry.kinds(slot)[0].config

    def unstructure(self, spec: PipelineSpec) -> dict[str, Any]:
        """Raw tables of ``spec``, each kind written as the pipeline names it."""
        out = {}
        for name in TOP_SLOTS:
            config = getattr(spec, name)
            out[name] = self._unstructure(name, config)
        if spec.teams:  # as written: a team's tables replace the pipeline's, which hold every default
            out["teams"] = {team.name: dict(team.tables) for team in spec.teams}
        return out

    def _unstructure(self, slot: str, config: Any) -> dict[str, Any]:
        table = self.converter.unstructure(config, unstructure_as=type(config))
        for inner in NESTED_SLOTS:
            parent, _, name = inner.rpartition(".")
            if parent == slot and name in table:
                table[name] = self._unstructure(inner, getattr(config, name))
        if slot in SINGLE_SLOTS or "kind" in table:
            return table
        return {"kind": registry.kind_name(config), **table}


def table_at(data: dict[str, Any], path: Iterable[str]) -> Any:
    for part in path:
        data = data.get(part, {}) if isinstance(data, dict) else {}
    return data


_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such pipeline file; {_near_pipelines(path)}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a pipeline file (it is not UTF-8 text)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the pipeline file ({exc.strerror})") from None
    return parse_toml(text, str(path))


SHIPPED_PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"
"""The pipelines shipped with harl: ``pipelines/`` of the checkout harl is installed from (an editable
install's; a wheel holds none)."""


def shipped_pipelines() -> str:
    """Where the shipped pipelines are, by absolute path, for messages read from any folder."""
    if SHIPPED_PIPELINES.is_dir():
        return f"the shipped ones are in {SHIPPED_PIPELINES}"
    return ("the shipped ones are in the pipelines/ folder of harl's source repository (an installed wheel "
            "holds none): write your own, or pass a checkout's pipelines/<name>.toml")


def _near_pipelines(path: Path) -> str:
    """``did you mean A, B or C?``: the closest ``*.toml`` files (by name, without the suffix)
    in the path's folder, or when that folder does not exist in ``pipelines/`` of the working
    folder, else in the shipped ones (by absolute path); else where the shipped pipelines are."""
    folder = next((f for f in (path.parent, Path("pipelines")) if f.is_dir()), SHIPPED_PIPELINES)
    stems = sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []
    near = [str(folder / f"{stem}.toml") for stem in difflib.get_close_matches(path.stem, stems, n=3)]
    if not near:
        return shipped_pipelines()
    return "did you mean " + " or ".join([", ".join(near[:-1]), near[-1]] if len(near) > 1 else near) + "?"


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """``tomllib.loads`` whose error names the file, line and column and quotes the line."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        reason = str(exc)
        found = _TOML_POSITION.search(reason)
        if found is None:
            what = reason.removesuffix(" (at end of document)")
            where = " at the end of the file" if what != reason else ""
            raise ConfigError(f"{source}: malformed TOML{where}: {what[:1].lower() + what[1:]}") from None
        line, column = int(found.group(1)), int(found.group(2))
        lines = text.splitlines()
        what = reason[:found.start()]
        what = what[:1].lower() + what[1:]
        bad = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        raise ConfigError(
            f"{source}: malformed TOML at line {line}, column {column}: {what}"
            + (f' in "{bad}"' if bad else "")
        ) from None


def structure_pipeline(data: dict[str, Any], source: str, loader: Loader | None = None,
                       origins: dict[tuple[str, ...], str] | None = None,
                       team: tuple[str, dict[str, Any]] | None = None) -> PipelineSpec:
    """Validate raw tables into a spec; every problem becomes one line of one ConfigError.

    A line reads ``SOURCE: key.path: what was expected, what was found; what to write``,
    and names the ``--set`` that wrote the key when there was one (see ``origins``).
    ``team``: (name, its own tables) when ``data`` is a team's pipeline; a problem in one of the
    team's tables is reported at ``teams.NAME.<table>``.
    """
    loader = loader or Loader()
    loader.use_family_of(data)
    origins = origins or {}
    data = renamed(data, loader, source, origins)  # old keys in their new places, with a deprecation warning
    found: list[tuple[list[str], str, BaseException | None]] = []
    tables = (*TOP_SLOTS, "teams")  # [teams.NAME] is a table of the pipeline too
    for key in sorted(set(data) - set(tables)):
        hint = difflib.get_close_matches(key, tables, n=1)
        near = f' (did you mean "{hint[0]}"?)' if hint else ""
        found.append(([key], f"unknown table{near}; valid tables: {', '.join(tables)}", None))
    built: dict[str, Any] = {}
    for slot in TOP_SLOTS:
        try:
            built[slot] = loader.structure_slot(slot, data.get(slot, {}))
        except Exception as exc:  # noqa: BLE001 - every failure becomes a located message
            found.extend(problems(exc, [slot]))
    if not found:
        found.extend((path, message, None) for path, message in cross_checks(built))
    if not found and "teams" in data:
        built["teams"] = _structure_teams(data, source, loader, origins, found)
    if team is not None:  # the team's own tables are where its problems are
        found = [(["teams", team[0], *path] if path and path[0] in team[1] else path, message, cause)
                 for path, message, cause in found]
    missing = [cause for _, _, cause in found if isinstance(cause, MissingExtraError)]
    if missing:  # a package to install comes first: the other problems may be its echoes
        raise missing[0]
    if found:
        lines = []
        for path, message, cause in found:
            override = override_of(path, origins)
            where = ".".join(path) + (f" (from {override})" if override else "")
            try:
                fix = fix_for(loader.class_at(".".join(path[:-1]), table_at(data, path[:-1])), path, cause, override) if cause is not None else ""
            except Exception:  # noqa: BLE001 - advice is optional; the problem still shows
                fix = ""
            lines.append(f"{source}: {where}: {message}{fix}")
        raise ConfigError("\n".join(lines))
    return PipelineSpec(**built)


def _structure_teams(data: dict[str, Any], source: str, loader: Loader, origins: dict[tuple[str, ...], str],
                     found: list[tuple[list[str], str, BaseException | None]]) -> tuple[TeamSpec, ...]:
    """``[teams.NAME]`` tables: each a ``TeamConfig``, its ``script`` table a registered script kind,
    and for a learning team its pipeline (the pipeline's tables, the team's own in their place)."""
    raw = data["teams"]
    if not isinstance(raw, dict) or not raw:
        found.append((["teams"], "expected one table per team: [teams.NAME] with agents = [...]", None))
        return ()
    base = {key: value for key, value in data.items() if key != "teams"}
    teams: list[TeamSpec] = []
    for name, table in raw.items():
        wrong = team_name_problem(name)
        if wrong:
            found.append((["teams", toml_key(name)], wrong, None))
            continue
        if not isinstance(table, dict):
            found.append((["teams", name], "expected a table: [teams.NAME] with agents = [...] and role", None))
            continue
        own = {key: value for key, value in table.items() if key in TEAM_SLOTS}
        try:
            config = loader.structure_team({key: value for key, value in table.items() if key not in TEAM_SLOTS})
        except Exception as exc:  # noqa: BLE001 - every failure becomes a located message
            found.extend(problems(exc, ["teams", name]))
            continue
        spec = None
        if role_learns(config.role):
            try:
                spec = structure_pipeline({**base, **own}, source, loader, origins, team=(name, own))
            except ConfigError as exc:
                found.append((["teams", name], str(exc).replace(f"{source}: ", ""), None))
                continue
        elif own:
            found.append((["teams", name, sorted(own)[0]], f'a {registry.kind_name(config.role)} team has no stages '
                          f"of its own; remove [teams.{name}.{sorted(own)[0]}], or set role = \"learning\"", None))
        teams.append(TeamSpec(name, config, spec, dict(table)))
    found.extend((path, message, None) for path, message in team_problems(teams))
    return tuple(teams)


def _registered(slot: str, key: str, kind: Any, names: list[str]) -> registry.Entry:
    """The registry entry ``kind`` names in ``slot`` (``key`` = "kind", or "role" for a team), or one
    clear error: not a string, a user's ``module:Name`` that does not load, or an unknown name."""
    if not isinstance(kind, str):
        raise InvalidSetting(key, f"expected a string, got {show(kind)}; one of: {', '.join(names)}")
    try:
        entry = registry.resolve(slot, kind)
    except ValueError as exc:
        raise InvalidSetting(key, str(exc), suggest_default=False) from None
    if entry is None:
        hint = difflib.get_close_matches(kind, names, n=1)
        near = f'; did you mean "{hint[0]}"?' if hint else ""
        raise InvalidSetting(key, f'unknown {key} "{kind}" (expected one of: {", ".join(names)}, '
                             f'or "module:Name" of your own){near}')
    return entry


def _roles() -> list[str]:
    return [e.kind for e in registry.kinds(ROLE_SLOT)]


def _near(key: str, keys: Iterable[str]) -> str:
    hint = difflib.get_close_matches(key, list(keys), n=1)
    return f' (did you mean "{hint[0]}"?)' if hint else ""


_TEAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def toml_key(name: str) -> str:
    """``name`` as a TOML key path writes it: bare when it can be, else in double quotes."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else '"' + name.replace('"', '\\"') + '"'


def team_name_problem(name: str) -> str:
    """Why ``name`` cannot name a team ("" when it can): a team's name becomes the name of its
    networks' module (``nn.ModuleDict`` keys: no ".", no attribute of the dict's own), its metrics'
    column prefix (``NAME_train_return``) and ``--team NAME``, so it is a plain identifier."""
    from torch import nn

    if not _TEAM_NAME.fullmatch(name):
        fixed = re.sub(r"[^A-Za-z0-9_]", "_", name)
        fixed = fixed if _TEAM_NAME.fullmatch(fixed) else f"team_{fixed}"
        return (f"a team's name is a plain identifier (ASCII letters, digits and _, not starting with a digit), as "
                f"it names the team's networks, its metrics columns ({fixed}_train_return) and --team; rename "
                f"the table, e.g. [teams.{fixed}]")
    if hasattr(nn.ModuleDict(), name):
        return (f"{name!r} is the name of a method of the teams' module (torch's ModuleDict) and cannot name a "
                f"team; rename the table, e.g. [teams.{name}_team]")
    return ""


def load_spec_and_notes(path: str | Path, overrides: Iterable[str] = ()) -> tuple[PipelineSpec, list[str]]:
    """Read, override, validate.  Returns the spec and notes to show the user."""
    path = Path(path)
    loader = Loader()
    data = read_toml(path)
    loader.use_family_of(data)
    origins: dict[tuple[str, ...], str] = {}
    data, notes = apply_overrides(data, overrides, loader, origins)
    return structure_pipeline(data, str(path), loader, origins), notes


