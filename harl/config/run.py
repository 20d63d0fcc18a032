"""``[run]``, ``[logging]`` and ``[checkpoint]``: settings of the run, not of any stage."""

from __future__ import annotations

import difflib
import importlib
from typing import Any

import attrs

from harl.errors import deprecated
from harl.logging.sink import entry_of
from harl.settings import InvalidSetting, in_range, one_of, positive, setting
from harl.settings import _show as show


def _device(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    from harl.settings import InvalidSetting

    ok = value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit())
    if not ok:
        raise InvalidSetting(attribute.name, f"expected one of: auto, cpu, cuda, cuda:N; got {value!r}")


NAME_BYTES = 200
"""The longest run name, in UTF-8 bytes: the directory adds ``-s<seed>-<time>[-N]`` within the 255 of most file systems."""
_NOT_IN_NAMES = '<>:"/\\|?*'
"""Characters some file system in use cannot hold in a name (Windows' and exFAT's list; ``/`` everywhere)."""


def _path_name(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    """A value that becomes one path component (``run.name``): one plain, portable file name."""
    fix = 'write one plain name, e.g. "happo-spread"'
    kinds = {"a path separator": [c for c in value if c in "/\\"],
             "a control character": [c for c in value if ord(c) < 32 or ord(c) == 127],
             "a character some file systems cannot hold": [c for c in value if c in _NOT_IN_NAMES and c not in "/\\"]}
    found = [f"{what} ({', '.join(repr(c) for c in dict.fromkeys(chars))})" for what, chars in kinds.items() if chars]
    if found:
        raise InvalidSetting(attribute.name, f"becomes the name of the run directory, got {value!r}, which holds "
                             f"{' and '.join(found)}; {fix}")
    if not value.strip() or value.startswith(".") or value.endswith(".") or value != value.strip():
        raise InvalidSetting(attribute.name, f"becomes the name of the run directory, got {value!r}; a name must "
                             f"not be empty, start with \".\" (\"..\" leaves the directory), end with \".\" or "
                             f"begin or end with a space; {fix}")
    if len(value.encode("utf-8")) > NAME_BYTES:
        raise InvalidSetting(attribute.name, f"becomes the name of the run directory, at most {NAME_BYTES} bytes, "
                             f"got {len(value.encode('utf-8'))}; {fix}")


@attrs.frozen
class RunConfig:
    """``[run]``."""

    name: str = setting("run", "run name; the run directory is <logging.dir>/<name>-s<seed>-<time>", _path_name)
    seed: int = setting(1, "seeds torch, numpy, python and the environments", in_range(0, None))
    total_env_steps: int = setting(10_000_000, "stop after this many env steps (over all envs)", positive())
    device: str = setting("auto", "auto (cuda when available), cpu, cuda or cuda:N", _device)
    torch_threads: int = setting(1, "torch CPU threads (0: torch's default); 1 suits small MLPs on few cores", in_range(0, None))
    precision: str = setting(
        "fp32",
        "off-policy gradient steps: fp32, or bf16 (bfloat16 autocast of the hidden layers' matmuls; first and last "
        "layers, losses and optimisers stay fp32; needs a CPU with AVX512-BF16 or AMX, or a GPU). On-policy runs take fp32",
        one_of(("fp32", "bf16")))
    population_update: str = setting(
        "auto",
        "harl train --seeds --vectorize: update the members as one batched (vmap) call, or one after another "
        "(per_member: a separate run's update, bit for bit); auto: batched on CUDA, per_member on the CPU, "
        "where it measured faster (docs/population.md)", one_of(("auto", "batched", "per_member")))


MOVED = {
    "mlflow_tracking_uri": ("mlflow", "tracking_uri"), "mlflow_experiment": ("mlflow", "experiment"),
    "wandb_project": ("wandb", "project"), "wandb_entity": ("wandb", "entity"), "wandb_mode": ("wandb", "mode"),
    "tracker_checkpoint": ("mlflow", "checkpoint"),
}
"""The old prefixed ``[logging]`` keys -> (their table, key); ``tracker_checkpoint`` goes to wandb's too."""

_WARNED: set[str] = set()
"""The old ``[logging]`` keys this process has warned about: each warns once, not at every load."""


def _sink_table(name: str, cls_path: str, value: Any) -> Any:
    """``[logging.NAME]`` of a built-in sink: a table, or the old shorthand ``NAME = true`` (false: off)."""
    # Found by name, as the registry finds stage packages: this module sits below the sinks.
    module, _, qualname = cls_path.partition(":")
    cls = getattr(importlib.import_module(module), qualname)
    if value is None or value is False:
        return None
    if value is True:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        return _structure(name, value, cls)
    raise InvalidSetting(name, f"expected a [logging.{name}] table (or {name} = true), got {show(value)}",
                         suggest_default=False)


TYPES: dict[str, tuple[type | tuple[type, ...], str]] = {"str": (str, "a string"), "bool": (bool, "a boolean (true or false)"), "int": (int, "an integer"),
         "float": ((int, float), "a number")}
"""A sink table's scalar field types and how a message names them (other types are not checked here)."""


def _structure(name: str, table: dict[str, Any], cls: type) -> Any:
    """A sink's table as its config class, as strictly as the loader reads a stage's: unknown keys,
    wrong scalar types and validators' ranges become one located ``InvalidSetting``."""
    fields = attrs.fields_dict(cls)
    for key, value in table.items():
        if key not in fields:
            hint = difflib.get_close_matches(key, list(fields), n=1)
            near = f' (did you mean "{hint[0]}"?)' if hint else ""
            raise InvalidSetting(f"{name}.{key}", f"unknown key{near}; valid keys: {', '.join(sorted(fields))}",
                                 suggest_default=False)
        expected = TYPES.get(str(fields[key].type))
        wrong_bool = isinstance(value, bool) and expected is not None and expected[0] is not bool
        if expected is not None and (not isinstance(value, expected[0]) or wrong_bool):
            raise InvalidSetting(f"{name}.{key}", f"expected {expected[1]}, got {show(value)}", suggest_default=False)
    try:
        return cls(**table)
    except InvalidSetting as exc:
        raise InvalidSetting(f"{name}.{exc.key}", exc.message, suggest_default=False) from None


def structure_sink(name: str, table: dict[str, Any], cls: type) -> Any:
    """A sink's table (its ``kind`` left out) as its config class; see ``_structure``."""
    return _structure(name, {k: v for k, v in table.items() if k != "kind"}, cls)


def _user_sinks(value: Any) -> dict[str, Any] | None:
    """``[logging.sinks.NAME]`` tables, each checked against its kind's config class (kept as tables)."""
    if not value:
        return None
    for name, table in value.items():
        if not isinstance(table, dict) or not isinstance(table.get("kind"), str):
            raise InvalidSetting(f"sinks.{name}", 'expected a table with kind = "my_pkg.module:MySinkConfig"',
                                 suggest_default=False)
        try:
            entry = entry_of(table["kind"])
        except ValueError as exc:
            raise InvalidSetting(f"sinks.{name}.kind", str(exc), suggest_default=False) from None
        _structure(f"sinks.{name}", {k: v for k, v in table.items() if k != "kind"}, entry.config)
    return dict(value)


def _moved(key: str) -> Any:
    table, name = MOVED[key]
    return attrs.field(default=None, metadata={"doc": f"old spelling of [logging.{table}] {name} (still read, "
                                                      "with a deprecation warning)"})


@attrs.frozen
class LoggingConfig:
    """``[logging]``: the progress display and the run's sinks besides metrics.csv, each its own table."""

    dir: str = setting("runs", "parent directory of run directories")
    progress: bool = setting(True, "rich progress display (a plain line per log_every iterations when not a terminal)")
    log_every: int = setting(10, "iterations between plain log lines when the output is not a terminal", positive())
    tensorboard: Any = attrs.field(
        default=None, converter=lambda v: _sink_table("tensorboard", "harl.logging.tensorboard:TensorBoardConfig", v),
        metadata={"doc": '[logging.tensorboard] (or tensorboard = true): every metric as TensorBoard scalars '
                         'in the run directory (pip install "harl[tensorboard]")'})
    mlflow: Any = attrs.field(
        default=None, converter=lambda v: _sink_table("mlflow", "harl.logging.mlflow_log:MLflowConfig", v),
        metadata={"doc": '[logging.mlflow] (or mlflow = true): the run in MLflow; keys tracking_uri, experiment, '
                         'checkpoint (pip install "harl[mlflow]")'})
    wandb: Any = attrs.field(
        default=None, converter=lambda v: _sink_table("wandb", "harl.logging.wandb_log:WandbConfig", v),
        metadata={"doc": '[logging.wandb] (or wandb = true): the run in Weights & Biases; keys project, entity, '
                         'mode, checkpoint (pip install "harl[wandb]")'})
    sinks: dict[str, Any] | None = attrs.field(
        default=None, converter=_user_sinks,
        metadata={"doc": 'your own sinks: [logging.sinks.NAME] kind = "my_pkg.module:MySinkConfig" and its keys'})
    mlflow_tracking_uri: str | None = _moved("mlflow_tracking_uri")
    mlflow_experiment: str | None = _moved("mlflow_experiment")
    wandb_project: str | None = _moved("wandb_project")
    wandb_entity: str | None = _moved("wandb_entity")
    wandb_mode: str | None = _moved("wandb_mode")
    tracker_checkpoint: bool | None = _moved("tracker_checkpoint")

    def __attrs_post_init__(self) -> None:
        """The old prefixed keys fold into their tables (a pipeline.toml of an older harl still resumes)."""
        for key, (table, name) in MOVED.items():
            value = getattr(self, key)
            if value is None:
                continue
            tables = ("mlflow", "wandb") if key == "tracker_checkpoint" else (table,)
            if key not in _WARNED:
                _WARNED.add(key)
                deprecated(f"[logging] {key}", " and ".join(f"[logging.{sink}] {name}" for sink in tables))
            for sink in tables:
                config = getattr(self, sink)
                if config is None:
                    continue
                default = attrs.fields_dict(type(config))[name].default
                if getattr(config, name) not in (default, value):
                    raise InvalidSetting(key, f"the old spelling of [logging.{sink}] {name}, which says "
                                         f"{show(getattr(config, name))}: write only [logging.{sink}] "
                                         f"{name} = {show(getattr(config, name))} and remove {key}",
                                         suggest_default=False)
                object.__setattr__(self, sink, attrs.evolve(config, **{name: value}))
            object.__setattr__(self, key, None)


@attrs.frozen
class CheckpointConfig:
    """``[checkpoint]``."""

    every_iterations: int = setting(50, "write a checkpoint every this many iterations (and always at the end)", positive())
    keep: int = setting(3, "checkpoints kept on disk (older ones are deleted)", positive())
    replay_buffer: bool = setting(False, "also save the replay buffer (off-policy): exact resume, at the cost of its size on disk")


def sink_configs(logging: LoggingConfig) -> dict[str, Any]:
    """Name -> config of every sink a ``[logging]`` asks for: metrics.csv first, then the
    built-in tables, then the user's ``[logging.sinks.NAME]`` in their order."""
    found: dict[str, Any] = {"csv": entry_of("csv").config()}
    found.update({name: getattr(logging, name) for name in ("tensorboard", "mlflow", "wandb")
                  if getattr(logging, name) is not None})
    for name, table in (logging.sinks or {}).items():
        found[f"sinks.{name}"] = structure_sink(f"sinks.{name}", table, entry_of(table["kind"]).config)
    return found
