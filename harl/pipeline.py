"""Pipeline files: TOML -> validated, frozen attrs configs (and back).

A pipeline is one TOML table per slot.  Slots with variants carry ``kind``; each kind is
an attrs config class whose fields are the table's keys.  Loading is strict: unknown
keys, wrong scalar types (8.7 is not an integer, "false" is not a boolean), unknown
kinds and out-of-range values are all reported as ``FILE: key.path: what was expected,
what was found; what to write instead`` in one ``ConfigError``, one line per problem.
"""

from __future__ import annotations

import datetime
import difflib
import math
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn

from harl.buffers.replay import ReplayConfig
from harl.buffers.rollout import RolloutConfig
from harl.collect.off_policy import OffPolicyCollectorConfig
from harl.collect.on_policy import OnPolicyCollectorConfig
from harl.envs.registry import ENV_KINDS
from harl.errors import ConfigError
from harl.evaluate import EvaluatorConfig
from harl.policy.actor import PolicyConfig
from harl.returns.gae import GAEConfig
from harl.returns.n_step import NStepConfig
from harl.run_config import CheckpointConfig, LoggingConfig, RunConfig
from harl.settings import InvalidSetting
from harl.update.objectives.a2c import A2CConfig
from harl.update.objectives.d3qn import D3QNConfig
from harl.update.objectives.ddpg import DDPGConfig
from harl.update.objectives.ppo import PPOConfig
from harl.update.objectives.sac import SACConfig
from harl.update.objectives.td3 import TD3Config
from harl.update.objectives.trpo import TRPOConfig
from harl.update.q_critic import JointQCriticConfig, QCriticConfig
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

    # Slots with variants hold one of ``slot_kinds()[slot]``; the Loader picks it by kind.
    run: RunConfig
    env: Any
    collector: Any
    buffer: Any
    returns: Any
    critic: Any
    updater: Any
    policy: PolicyConfig
    evaluator: EvaluatorConfig
    logging: LoggingConfig
    checkpoint: CheckpointConfig


def slot_kinds() -> dict[str, list[type]]:
    """Every slot and its config classes; slots with one untagged class have no ``kind``."""
    return {
        "run": [RunConfig],
        "env": list(ENV_KINDS),
        "collector": [OnPolicyCollectorConfig, OffPolicyCollectorConfig],
        "buffer": [RolloutConfig, ReplayConfig],
        "returns": [GAEConfig, NStepConfig],
        "critic": [VCriticConfig, QCriticConfig, JointQCriticConfig],
        "updater": [SequentialConfig, SimultaneousConfig],
        "updater.objective": [PPOConfig, TRPOConfig, A2CConfig, DDPGConfig, TD3Config, SACConfig, D3QNConfig],
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


# --------------------------------------------------------------------------- values


def toml_literal(value: Any) -> str:
    """``value`` written as TOML source (lists on one line, big integers with ``_``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:_}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_literal(v)}" for k, v in value.items()) + "}"
    import tomli_w

    return tomli_w.dumps({"v": value})[len("v = "):].rstrip("\n")


def show(value: Any) -> str:
    """A value found in a pipeline, for messages: as TOML writes it; a table is "a table"."""
    if isinstance(value, dict):
        return "a table"
    try:
        return toml_literal(value)
    except TypeError:
        return repr(value)


def parse_value(raw: str) -> Any:
    """A ``--set`` value: a TOML literal (``3``, ``[64,64]``, ``"x"``), else the bare word."""
    raw = raw.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw
    # No setting is a date or time: "2024-01-01" on the command line is meant as text.
    return raw if isinstance(value, (datetime.date, datetime.time)) else value


# --------------------------------------------------------------------------- structuring


class SettingTypeError(TypeError):
    """A value of the wrong TOML type; ``advice`` says how to write a right one."""

    def __init__(self, expected: str, value: Any, advice: str = "",
                 accepts: Callable[[Any], bool] | None = None) -> None:
        super().__init__(f"expected {expected}, got {show(value)}")
        self.expected = expected
        self.value = value
        self.advice = advice
        self.accepts = accepts or (lambda _: False)


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
        c.register_structure_hook_func(lambda t: t == dict[str, Any], _table)
        c.register_unstructure_hook(tuple, list)
        # Nested slots are found by their field type (a union or a single class).  The hook
        # must exist before the parents' structure functions are generated: cattrs looks up
        # each field's hook once, when it generates the function.
        self._slot_of_type: dict[Any, str] = {}
        for slot in NESTED_SLOTS:
            parent, _, name = slot.rpartition(".")
            for cls in self.slots[parent]:
                field_type = attrs.fields_dict(attrs.resolve_types(cls))[name].type
                self._slot_of_type[field_type] = slot
        c.register_structure_hook_func(lambda t: t in self._slot_of_type,
                                       lambda d, t: self.structure_slot(self._slot_of_type[t], d))
        self._plain: dict[type, Callable[[Any, type], Any]] = {}
        for classes in self.slots.values():
            for cls in classes:
                self._plain[cls] = make_dict_structure_fn(
                    cls, c, _cattrs_forbid_extra_keys=True, _cattrs_detailed_validation=True
                )

    def structure_slot(self, slot: str, data: Any) -> Any:
        if not isinstance(data, dict):
            raise SettingTypeError("a table", data)
        classes = self.slots[slot]
        kinds = [kind_of(c) for c in classes]
        if kinds[0] is None:
            return self._plain[classes[0]](data, classes[0])
        kind = data.get("kind", kinds[0])
        if not isinstance(kind, str):
            raise InvalidSetting("kind", f"expected a string, got {show(kind)}; "
                                 f"one of: {', '.join(kinds)}")
        if kind not in kinds:
            hint = difflib.get_close_matches(kind, kinds, n=1)
            near = f'; did you mean "{hint[0]}"?' if hint else ""
            raise InvalidSetting("kind", f'unknown kind "{kind}" (expected one of: {", ".join(kinds)}){near}')
        cls = classes[kinds.index(kind)]
        return self._plain[cls](data, cls)

    def unstructure(self, spec: PipelineSpec) -> dict[str, Any]:
        return {name: self.converter.unstructure(getattr(spec, name)) for name in TOP_SLOTS}


def _class_at(loader: Loader, path: Sequence[str], data: Any) -> type | None:
    """The config class of the table at ``path`` (given that table's raw data)."""
    slot = ".".join(path)
    if slot not in loader.slots:
        return None
    classes = loader.slots[slot]
    kinds = [kind_of(c) for c in classes]
    kind = data.get("kind", kinds[0]) if isinstance(data, dict) else kinds[0]
    return classes[kinds.index(kind)] if kind in kinds else classes[0]


def _table_at(data: dict[str, Any], path: Sequence[str]) -> Any:
    for part in path:
        data = data.get(part, {}) if isinstance(data, dict) else {}
    return data


def _problems(exc: BaseException, path: list[str]
              ) -> Iterable[tuple[list[str], str, BaseException]]:
    """Flatten cattrs' exception groups into (key path, message, cause) triples."""
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
            yield path + [key], f"unknown key{near}; valid keys: {', '.join(allowed)}", exc
    elif isinstance(exc, InvalidSetting):
        yield path + [exc.key], exc.message, exc
    elif isinstance(exc, SettingTypeError):
        yield path, str(exc), exc
    else:
        yield path, f"{type(exc).__name__}: {exc}", exc


def _example(path: Sequence[str], value: Any, override: str | None) -> str:
    """How to write ``value`` at ``path``: as a file line, or as ``--set`` for an override."""
    if override is None:
        return f"{path[-1]} = {toml_literal(value)}"
    literal = value if isinstance(value, str) and parse_value(value) == value else toml_literal(value)
    return f"--set {shlex.quote('.'.join(path) + '=' + literal)}"


def _fix(loader: Loader, data: dict[str, Any], path: Sequence[str], cause: BaseException,
         override: str | None) -> str:
    """The second half of a message: what to write instead (empty when the message says it)."""
    if isinstance(cause, SettingTypeError) and cause.expected == "a table":
        dotted = ".".join(path)
        return (f"; write it as a [{dotted}] table" if override is None
                else f"; set its keys one by one, e.g. --set {dotted}.KEY=VALUE")
    if not isinstance(cause, (SettingTypeError, InvalidSetting)) or path[-1] == "kind":
        return ""
    if isinstance(cause, InvalidSetting) and not cause.suggest_default:
        return ""
    cls = _class_at(loader, path[:-1], _table_at(data, path[:-1]))
    field = attrs.fields_dict(cls).get(path[-1]) if cls is not None else None
    if field is None:
        return ""
    default = field.default.factory() if isinstance(field.default, attrs.Factory) else field.default
    if default is None:  # an optional key: TOML has no null, so "not set" is "left out"
        advice = f"{cause.advice}, " if isinstance(cause, SettingTypeError) else ""
        return f"; {advice}or leave {path[-1]} out (it is not set by default)"
    if isinstance(cause, SettingTypeError):
        value = cause.value
        if isinstance(value, str):
            unquoted = parse_value(value)
            if not isinstance(unquoted, str) and cause.accepts(unquoted):
                return f"; remove the quotes: {_example(path, unquoted, override)}"
        if isinstance(default, str) and isinstance(value, (int, float)):
            return f"; quote it: {_example(path, str(value), override)}"
        return f"; {cause.advice}, e.g. {_example(path, default, override)} (the default)"
    return f"; for example {_example(path, default, override)} (the default)"


def _override_of(path: Sequence[str], origins: dict[tuple[str, ...], str]) -> str | None:
    """The ``--set`` that wrote ``path`` (or a table above it), if any."""
    for n in range(len(path), 0, -1):
        if tuple(path[:n]) in origins:
            return origins[tuple(path[:n])]
    return None


def _cross_checks(built: dict[str, Any]) -> Iterable[tuple[list[str], str]]:
    """Settings that are valid alone but not together."""
    updater, policy = built.get("updater"), built.get("policy")
    if isinstance(updater, SequentialConfig) and policy is not None and policy.share_parameters:
        yield (["updater", "kind"],
               '"sequential" updates agents one after another, which needs one actor per agent, '
               "but policy.share_parameters = true makes one actor for all; set "
               'policy.share_parameters = false, or updater.kind = "simultaneous"')
    yield from _recurrent_checks(built)
    yield from _off_policy_checks(built)


def _recurrent_checks(built: dict[str, Any]) -> Iterable[tuple[list[str], str]]:
    """Recurrent actors train on sequences cut from on-policy rollouts."""
    policy, collector = built.get("policy"), built.get("collector")
    if policy is None or collector is None or policy.recurrent == "none":
        return
    if not isinstance(collector, OnPolicyCollectorConfig):
        yield (["policy", "recurrent"],
               f'"{policy.recurrent}" needs on-policy rollouts, but collector.kind = "{collector.kind}" '
               'has no recurrent actors; set policy.recurrent = "none"')
    elif policy.recurrent == "chunked" and collector.rollout_length % policy.chunk_length:
        length = collector.rollout_length
        near = max(d for d in range(1, min(policy.chunk_length, length) + 1) if length % d == 0)
        yield (["policy", "chunk_length"],
               f"expected a divisor of collector.rollout_length ({length}), got "
               f"{policy.chunk_length}; for example chunk_length = {near}")


OFF_POLICY_KINDS = {
    "buffer": (ReplayConfig,), "returns": (NStepConfig,), "critic": (QCriticConfig, JointQCriticConfig),
    "updater.objective": (DDPGConfig, TD3Config, SACConfig, D3QNConfig),
}
"""Per slot, the config classes that belong to the off-policy family (collector "off_policy")."""

OFF_POLICY_FIX = {"buffer": 'buffer.kind = "replay"', "returns": 'returns.kind = "n_step"',
                  "critic": 'critic.kind = "q" ("joint_q" for d3qn)',
                  "updater.objective": "updater.objective.kind = one of ddpg, td3, sac, d3qn"}


def _off_policy_checks(built: dict[str, Any]) -> Iterable[tuple[list[str], str]]:
    """The off-policy family's slots go together; so do d3qn and joint_q, td3 and twin critics."""
    collector, updater, critic = built.get("collector"), built.get("updater"), built.get("critic")
    if collector is None or updater is None:
        return
    off = isinstance(collector, OffPolicyCollectorConfig)
    slots = {"buffer": built.get("buffer"), "returns": built.get("returns"), "critic": critic,
             "updater.objective": updater.objective}
    for slot, config in slots.items():
        if config is None or isinstance(config, OFF_POLICY_KINDS[slot]) == off:
            continue
        kind = kind_of(type(config))
        if off:
            yield (slot.split(".") + ["kind"],
                   f'"{kind}" belongs to the on-policy family, but collector.kind = "off_policy"; set '
                   f'{OFF_POLICY_FIX[slot]} (or collector.kind = "on_policy")')
        else:
            yield (slot.split(".") + ["kind"],
                   f'"{kind}" belongs to the off-policy family, but collector.kind = "{collector.kind}"; '
                   'set collector.kind = "off_policy" (with a replay buffer, n_step returns and a Q critic)')
    if not off:
        return
    objective, policy = updater.objective, built.get("policy")
    both_off = (isinstance(critic, OFF_POLICY_KINDS["critic"])
                and isinstance(objective, OFF_POLICY_KINDS["updater.objective"]))
    if both_off and isinstance(objective, D3QNConfig) != isinstance(critic, JointQCriticConfig):
        if isinstance(objective, D3QNConfig):
            yield (["critic", "kind"], '"q" cannot score d3qn\'s joint greedy actions; set critic.kind = "joint_q"')
        else:
            yield (["critic", "kind"], f'"joint_q" serves only d3qn, not "{objective.kind}"; set critic.kind = "q"')
    if isinstance(objective, TD3Config) and isinstance(critic, QCriticConfig) and not critic.twin:
        yield (["critic", "twin"], 'td3 takes the minimum of twin critics in its targets; set critic.twin = true '
               '(or updater.objective.kind = "ddpg")')
    if policy is not None and policy.share_parameters and isinstance(updater, SimultaneousConfig):
        yield (["policy", "share_parameters"], "off-policy objectives keep one actor per agent; set "
               "policy.share_parameters = false")


# --------------------------------------------------------------------------- overrides


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b.c=value``; the value is a TOML literal, or a bare word taken as a string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part.strip() for part in key.split(".")):
        raise ConfigError(
            f"--set {text}: expected KEY=VALUE with a dotted key path, e.g. --set run.seed=3"
        )
    return [part.strip() for part in key.split(".")], parse_value(raw)


def apply_overrides(data: dict[str, Any], overrides: Iterable[str], loader: Loader,
                    origins: dict[tuple[str, ...], str] | None = None
                    ) -> tuple[dict[str, Any], list[str]]:
    """Set each override into the raw tables; returns the data and notes for the user.

    When an override changes a slot's ``kind``, keys the new kind does not have are
    dropped (they belonged to the old kind) and reported in the notes.  ``origins``, when
    given, records which ``--set`` wrote each key path (messages name it).
    """
    notes: list[str] = []
    for text in overrides:
        path, value = parse_override(text)
        table = data
        for depth, part in enumerate(path[:-1]):
            nxt = table.setdefault(part, {})
            if not isinstance(nxt, dict):
                where = ".".join(path[:depth + 1])
                raise ConfigError(
                    f"--set {text}: {where} is a value ({show(nxt)}), not a table, so it has no "
                    f'key "{path[depth + 1]}"; set it with --set {where}=VALUE'
                )
            table = nxt
        table[path[-1]] = value
        if origins is not None:
            origins[tuple(path)] = f"--set {text}"
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

_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such pipeline file; the shipped ones are in pipelines/") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a pipeline file (it is not UTF-8 text)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the pipeline file ({exc.strerror})") from None
    return parse_toml(text, str(path))


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
                       origins: dict[tuple[str, ...], str] | None = None) -> PipelineSpec:
    """Validate raw tables into a spec; every problem becomes one line of one ConfigError.

    A line reads ``SOURCE: key.path: what was expected, what was found; what to write``,
    and names the ``--set`` that wrote the key when there was one (see ``origins``).
    """
    loader = loader or Loader()
    origins = origins or {}
    found: list[tuple[list[str], str, BaseException | None]] = []
    for key in sorted(set(data) - set(TOP_SLOTS)):
        hint = difflib.get_close_matches(key, TOP_SLOTS, n=1)
        near = f' (did you mean "{hint[0]}"?)' if hint else ""
        found.append(([key], f"unknown table{near}; valid tables: {', '.join(TOP_SLOTS)}", None))
    built: dict[str, Any] = {}
    for slot in TOP_SLOTS:
        try:
            built[slot] = loader.structure_slot(slot, data.get(slot, {}))
        except Exception as exc:  # noqa: BLE001 - every failure becomes a located message
            found.extend(_problems(exc, [slot]))
    if not found:
        found.extend((path, message, None) for path, message in _cross_checks(built))
    if found:
        lines = []
        for path, message, cause in found:
            override = _override_of(path, origins)
            where = ".".join(path) + (f" (from {override})" if override else "")
            try:
                fix = _fix(loader, data, path, cause, override) if cause is not None else ""
            except Exception:  # noqa: BLE001 - advice is optional; the problem still shows
                fix = ""
            lines.append(f"{source}: {where}: {message}{fix}")
        raise ConfigError("\n".join(lines))
    return PipelineSpec(**built)


def load_pipeline(path: str | Path, overrides: Iterable[str] = ()) -> tuple[PipelineSpec, list[str]]:
    """Read, override, validate.  Returns the spec and notes to show the user."""
    path = Path(path)
    loader = Loader()
    data = read_toml(path)
    origins: dict[tuple[str, ...], str] = {}
    data, notes = apply_overrides(data, overrides, loader, origins)
    return structure_pipeline(data, str(path), loader, origins), notes


DUMP_HEADER = ("# The resolved pipeline of this run: every key of every stage, defaults included\n"
               "# (an optional key that is not set is left out).  harl train --resume reads it;\n"
               "# harl stages explains each key.\n")


def dump_pipeline(spec: PipelineSpec) -> str:
    """The fully resolved pipeline as TOML (every key, defaults included)."""
    lines = [DUMP_HEADER]

    def table(name: str, content: dict[str, Any]) -> None:
        lines.append(f"[{name}]")
        nested = []
        for key, value in content.items():
            if value is None:
                continue  # an optional key that is not set: TOML has no null, leaving it out says so
            if isinstance(value, dict):
                nested.append((f"{name}.{key}", value))
            else:
                lines.append(f"{key} = {toml_literal(value)}")
        lines.append("")
        for sub_name, sub in nested:
            table(sub_name, sub)

    for name, content in Loader().unstructure(spec).items():
        table(name, content)
    return "\n".join(lines)


TYPE_NAMES = {"int": "integer", "float": "number", "bool": "boolean", "str": "string",
              "tuple[int, ...]": "list of integers", "dict[str, Any]": "table"}


def describe_stages() -> list[tuple[str, str | None, type, list[tuple[str, str, str, str]]]]:
    """(slot, kind, class, [(key, type, default, doc)]) for every stage kind."""
    rows = []
    for slot, classes in slot_kinds().items():
        for cls in classes:
            keys = []
            for f in attrs.fields(cls):
                if f.name == "kind" or (slot + "." + f.name) in NESTED_SLOTS:
                    continue
                default = f.default.factory() if isinstance(f.default, attrs.Factory) else f.default
                type_name = str(f.type if isinstance(f.type, str) else getattr(f.type, "__name__", f.type))
                optional = type_name.endswith(" | None")
                type_name = type_name.removesuffix(" | None")
                type_name = TYPE_NAMES.get(type_name, type_name) + (" (optional)" if optional else "")
                keys.append((f.name, type_name, "(not set)" if default is None else toml_literal(default),
                             f.metadata.get("doc", "")))
            rows.append((slot, kind_of(cls), cls, keys))
    return rows
