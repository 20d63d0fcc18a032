"""Pipeline files: TOML -> validated, frozen attrs configs (and back).

A pipeline is one TOML table per slot.  Slots with variants carry ``kind``; each kind is
an attrs config class whose fields are the table's keys.  Loading is strict: unknown
keys, wrong scalar types (8.7 is not an integer, "false" is not a boolean), unknown
kinds and out-of-range values are all reported as ``FILE: key.path: what was expected,
what was found`` in one ``ConfigError``.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn

from harl.buffers.rollout import RolloutConfig
from harl.collect.on_policy import OnPolicyCollectorConfig
from harl.envs.registry import ENV_KINDS
from harl.errors import ConfigError
from harl.evaluate import EvaluatorConfig
from harl.policy.actor import PolicyConfig
from harl.returns.gae import GAEConfig
from harl.run_config import CheckpointConfig, LoggingConfig, RunConfig
from harl.settings import InvalidSetting
from harl.update.objectives.ppo import PPOConfig
from harl.update.sequential import SequentialConfig
from harl.update.simultaneous import SimultaneousConfig
from harl.update.v_critic import VCriticConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@attrs.frozen
class PipelineSpec:
    """A whole pipeline: one config per slot."""

    run: RunConfig
    env: Any
    collector: OnPolicyCollectorConfig
    buffer: RolloutConfig
    returns: GAEConfig
    critic: VCriticConfig
    updater: SequentialConfig | SimultaneousConfig
    policy: PolicyConfig
    evaluator: EvaluatorConfig
    logging: LoggingConfig
    checkpoint: CheckpointConfig


def slot_kinds() -> dict[str, list[type]]:
    """Every slot and its config classes; slots with one untagged class have no ``kind``."""
    return {
        "run": [RunConfig],
        "env": list(ENV_KINDS),
        "collector": [OnPolicyCollectorConfig],
        "buffer": [RolloutConfig],
        "returns": [GAEConfig],
        "critic": [VCriticConfig],
        "updater": [SequentialConfig, SimultaneousConfig],
        "updater.objective": [PPOConfig],
        "policy": [PolicyConfig],
        "evaluator": [EvaluatorConfig],
        "logging": [LoggingConfig],
        "checkpoint": [CheckpointConfig],
    }


TOP_SLOTS = [f.name for f in attrs.fields(PipelineSpec)]
NESTED_SLOTS = {"updater.objective"}


def kind_of(cls: type) -> str | None:
    fields = attrs.fields_dict(cls)
    return fields["kind"].default if "kind" in fields else None


# --------------------------------------------------------------------------- structuring


class SettingTypeError(TypeError):
    def __init__(self, expected: str, value: Any) -> None:
        super().__init__(f"expected {expected}, got {show(value)}")


class UnknownKind(ValueError):
    pass


def show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    return repr(value)


def _strict_int(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingTypeError("an integer", value)
    return value


def _strict_float(value: Any, _: type) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SettingTypeError("a number", value)
    return float(value)


def _strict_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise SettingTypeError("a boolean (true or false)", value)
    return value


def _strict_str(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise SettingTypeError("a string", value)
    return value


def _int_tuple(value: Any, _: type) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)) or any(
        isinstance(v, bool) or not isinstance(v, int) for v in value
    ):
        raise SettingTypeError("a list of integers", value)
    return tuple(value)


class Loader:
    """Owns the cattrs converter and the kind dispatch of every slot."""

    def __init__(self) -> None:
        self.slots = slot_kinds()
        self.converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
        c = self.converter
        c.register_structure_hook(int, _strict_int)
        c.register_structure_hook(float, _strict_float)
        c.register_structure_hook(bool, _strict_bool)
        c.register_structure_hook(str, _strict_str)
        c.register_structure_hook_func(lambda t: t == tuple[int, ...], _int_tuple)
        c.register_unstructure_hook(tuple, list)
        self._plain: dict[type, Callable[[Any, type], Any]] = {}
        self._slot_of_type: dict[Any, str] = {}
        for slot, classes in self.slots.items():
            for cls in classes:
                self._plain[cls] = make_dict_structure_fn(
                    cls, c, _cattrs_forbid_extra_keys=True, _cattrs_detailed_validation=True
                )
        # Nested slots are found by their field type (a union or a single class).
        for slot in NESTED_SLOTS:
            parent, _, name = slot.rpartition(".")
            for cls in self.slots[parent]:
                field_type = attrs.fields_dict(attrs.resolve_types(cls))[name].type
                self._slot_of_type[field_type] = slot
        c.register_structure_hook_func(lambda t: t in self._slot_of_type,
                                       lambda d, t: self.structure_slot(self._slot_of_type[t], d))

    def structure_slot(self, slot: str, data: Any) -> Any:
        if not isinstance(data, dict):
            raise SettingTypeError("a table", data)
        classes = self.slots[slot]
        kinds = [kind_of(c) for c in classes]
        if kinds[0] is None:
            return self._plain[classes[0]](data, classes[0])
        kind = data.get("kind", kinds[0])
        if not isinstance(kind, str):
            raise InvalidSetting("kind", f"expected a string, got {show(kind)}")
        if kind not in kinds:
            hint = difflib.get_close_matches(kind, kinds, n=1)
            near = f"; did you mean '{hint[0]}'?" if hint else ""
            raise InvalidSetting("kind", f"unknown kind '{kind}' (expected one of: {', '.join(kinds)}){near}")
        cls = classes[kinds.index(kind)]
        return self._plain[cls](data, cls)

    def unstructure(self, spec: PipelineSpec) -> dict[str, Any]:
        return {name: self.converter.unstructure(getattr(spec, name)) for name in TOP_SLOTS}


def _class_at(loader: Loader, path: list[str], data: dict[str, Any]) -> type | None:
    """The config class a key path points into (for listing the valid keys)."""
    slot = ".".join(path)
    if slot not in loader.slots:
        return None
    classes = loader.slots[slot]
    kinds = [kind_of(c) for c in classes]
    kind = data.get("kind", kinds[0]) if isinstance(data, dict) else kinds[0]
    return classes[kinds.index(kind)] if kind in kinds else classes[0]


def _problems(exc: BaseException, path: list[str]) -> Iterable[tuple[list[str], str]]:
    """Flatten cattrs' exception groups into (key path, message) pairs."""
    if isinstance(exc, cattrs.ClassValidationError):
        with_notes, without = exc.group_exceptions()
        for sub, note in with_notes:
            yield from _problems(sub, path + [note.name])
        for sub in without:
            yield from _problems(sub, path)
    elif isinstance(exc, cattrs.BaseValidationError):
        for sub in exc.exceptions:
            yield from _problems(sub, path)
    elif isinstance(exc, ForbiddenExtraKeysError):
        allowed = sorted(f.name for f in attrs.fields(exc.cl))
        for key in sorted(exc.extra_fields):
            hint = difflib.get_close_matches(key, allowed, n=1)
            near = f' (did you mean "{hint[0]}"?)' if hint else ""
            yield path + [key], f"unknown key{near}; valid keys: {', '.join(allowed)}"
    elif isinstance(exc, InvalidSetting):
        yield path + [exc.key], exc.message
    elif isinstance(exc, (SettingTypeError, UnknownKind)):
        yield path, str(exc)
    else:
        yield path, f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- overrides


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b.c=value``; the value is a TOML literal, or a bare word taken as a string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(
            f"--set {text}: expected KEY=VALUE with a dotted key path, e.g. --set run.seed=3"
        )
    raw = raw.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: Iterable[str], loader: Loader
                    ) -> tuple[dict[str, Any], list[str]]:
    """Set each override into the raw tables; returns the data and notes for the user.

    When an override changes a slot's ``kind``, keys the new kind does not have are
    dropped (they belonged to the old kind) and reported in the notes.
    """
    notes: list[str] = []
    for text in overrides:
        path, value = parse_override(text)
        table = data
        for depth, part in enumerate(path[:-1]):
            nxt = table.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise ConfigError(
                    f"--set {text}: {'.'.join(path[:depth + 1])} is a value, not a table"
                )
            table = nxt
        table[path[-1]] = value
        slot = ".".join(path[:-1])
        if path[-1] == "kind" and slot in loader.slots and isinstance(value, str):
            cls = _class_at(loader, path[:-1], table)
            if cls is not None and kind_of(cls) == value:
                allowed = {f.name for f in attrs.fields(cls)}
                nested = {s.rpartition(".")[2] for s in NESTED_SLOTS if s.startswith(slot + ".")}
                for key in sorted(set(table) - allowed - nested):
                    del table[key]
                    notes.append(f"--set {text}: dropped {slot}.{key}, which kind '{value}' does not have")
    return data, notes


# --------------------------------------------------------------------------- loading


def read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such pipeline file; the shipped ones are in pipelines/") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the pipeline file ({exc.strerror})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: malformed TOML: {exc}") from None


def structure_pipeline(data: dict[str, Any], source: str, loader: Loader | None = None
                       ) -> PipelineSpec:
    loader = loader or Loader()
    problems: list[tuple[list[str], str]] = []
    for key in sorted(set(data) - set(TOP_SLOTS)):
        hint = difflib.get_close_matches(key, TOP_SLOTS, n=1)
        near = f' (did you mean "{hint[0]}"?)' if hint else ""
        problems.append(([key], f"unknown table{near}; valid tables: {', '.join(TOP_SLOTS)}"))
    built: dict[str, Any] = {}
    for slot in TOP_SLOTS:
        try:
            built[slot] = loader.structure_slot(slot, data.get(slot, {}))
        except Exception as exc:  # noqa: BLE001 - every failure becomes a located message
            problems.extend(_problems(exc, [slot]))
    if problems:
        lines = [f"{source}: {'.'.join(p)}: {m}" for p, m in problems]
        raise ConfigError("\n".join(lines))
    return PipelineSpec(**built)


def load_pipeline(path: str | Path, overrides: Iterable[str] = ()) -> tuple[PipelineSpec, list[str]]:
    """Read, override, validate.  Returns the spec and notes to show the user."""
    path = Path(path)
    loader = Loader()
    data = read_toml(path)
    overrides = list(overrides)
    data, notes = apply_overrides(data, overrides, loader)
    source = f"{path} (with --set overrides)" if overrides else str(path)
    return structure_pipeline(data, source, loader), notes


def dump_pipeline(spec: PipelineSpec) -> str:
    """The fully resolved pipeline as TOML (every key, defaults included)."""
    import tomli_w

    return tomli_w.dumps(Loader().unstructure(spec))


def describe_stages() -> list[tuple[str, str | None, type, list[tuple[str, str, str, str]]]]:
    """(slot, kind, class, [(key, type, default, doc)]) for every stage kind."""
    rows = []
    for slot, classes in slot_kinds().items():
        for cls in classes:
            keys = []
            for f in attrs.fields(cls):
                if f.name == "kind" or (slot + "." + f.name) in NESTED_SLOTS:
                    continue
                default = f.default
                if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                    default = default.factory()
                type_name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
                keys.append((f.name, str(type_name), show(list(default) if isinstance(default, tuple) else default),
                             f.metadata.get("doc", "")))
            rows.append((slot, kind_of(cls), cls, keys))
    return rows
