"""Sinks: where each iteration's metrics row goes (metrics.csv, TensorBoard, MLflow, W&B, yours).

::

    sinks = open_sinks(spec.logging, SinkContext(run_dir, pipeline_text, iteration, env_steps))  # the lifecycle
    for row in iterations: sink.write(row)         # the Trainer, after every iteration
    sink.close(newest_checkpoint)                   # the Trainer, when the run stops (any way)

A sink kind registers itself in harl's one registry (slot ``sink``) at the bottom of the module
that defines it, with the config class of its table::

    register_sink(MLflowConfig, MLflowSink, kind="mlflow")     # [logging.mlflow]

``metrics.csv`` is always written (resume and ``harl plot`` read it); the other built-in
kinds are switched on by their table (``[logging.tensorboard]``, ``[logging.mlflow]``,
``[logging.wandb]``, or the old shorthand ``tensorboard = true``).  A user's sink is
``[logging.sinks.NAME]`` with ``kind = "my_pkg.module:MyConfig"``, a config class its module
registered (``harl.register("sink", MyConfig, factory)``); its other keys are that class's fields.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs

from harl import registry


class Sink(Protocol):
    """Receives every iteration's row (column -> number, text or None) and the end of the run."""

    def write(self, row: Mapping[str, Any]) -> None: ...

    def close(self, checkpoint: Path | None) -> None:
        """The run stopped; ``checkpoint`` is its newest checkpoint (None: none was written)."""


@attrs.frozen
class SinkContext:
    """What a sink's factory gets besides its config: where the run lives and where it starts."""

    run_dir: Path
    pipeline_text: str
    """The resolved ``pipeline.toml`` (trackers log it as params)."""
    iteration: int = 0
    """The iteration the run starts from (0: a fresh run; k: resumed from checkpoint k)."""
    env_steps: int = 0
    """Env steps at that iteration (a resumed TensorBoard log hides events past it)."""
    note: Callable[[], str] = str
    """What is left of the run after a failed write (its newest intact checkpoint), for messages."""


Factory = Callable[[Any, SinkContext], Sink]


def register_sink(config: type, factory: Factory, *, kind: str | None = None, guarded: bool = False,
                  require: Callable[[], object] | None = None) -> registry.Entry:
    """Register ``config`` (an attrs class: the keys of its table) as a kind of harl's one
    registry's ``sink`` slot, built by ``factory(config, context)``.

    ``guarded``: a failure warns once and switches the sink off instead of stopping training
    (trackers); ``require``: raises ``MissingExtraError`` when the sink's package is absent
    (asked before the run directory exists).  Users call ``harl.register("sink", MyConfig, factory)``.
    """
    return registry.register("sink", config, factory, kind=kind, guarded=guarded, require=require)


def sink_kinds() -> list[registry.Entry]:
    return sorted(registry.kinds("sink"), key=lambda e: e.kind)


def entry_of(kind: str) -> registry.Entry:
    """The sink kind ``kind`` names: a built-in name or ``"module:ConfigClass"``; ValueError says why not."""
    found = registry.resolve("sink", kind)
    if found is None:
        names = ", ".join(e.kind for e in sink_kinds())
        raise ValueError(f'unknown sink kind "{kind}" (expected one of: {names}, or "module:Name" of your own)')
    return found


def _entry_of_class(config: Any) -> registry.Entry:
    registry.kinds("sink")  # harl's own sinks registered
    return registry.entry_of(config)


class Guarded:
    """A sink whose first failure (opening included) warns once and switches it off."""

    def __init__(self, name: str, open_sink: Callable[[], Sink]) -> None:
        self.name = name
        self.sink: Sink | None = None
        self._call(lambda: setattr(self, "sink", open_sink()))

    def _call(self, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - any tracker failure: warn, never stop training
            self.sink = None
            warnings.warn(f"{self.name}: {type(exc).__name__}: {exc}; training goes on without {self.name} "
                          "(metrics.csv and checkpoints are unaffected)", RuntimeWarning, stacklevel=3)

    def write(self, row: Mapping[str, Any]) -> None:
        if self.sink is not None:
            self._call(lambda: self.sink.write(row))  # type: ignore[union-attr]

    def close(self, checkpoint: Path | None) -> None:
        if self.sink is not None:
            self._call(lambda: self.sink.close(checkpoint))  # type: ignore[union-attr]
            self.sink = None


def open_sink(config: Any, context: SinkContext, name: str) -> Sink:
    """One sink from its config (a registered sink config class)."""
    entry = _entry_of_class(config)
    factory: Factory = entry.factory  # type: ignore[assignment]
    if entry.parts.get("guarded"):
        return Guarded(name, lambda: factory(config, context))
    return factory(config, context)


def require_sinks(configs: Mapping[str, Any]) -> None:
    """``MissingExtraError`` for a sink whose optional package is not installed."""
    for config in configs.values():
        require = _entry_of_class(config).parts.get("require")
        if require is not None:
            require()


def open_sinks(configs: Mapping[str, Any], context: SinkContext) -> list[Sink]:
    """The sinks of ``configs`` (name -> config, ``harl.config.run.sink_configs``), in that order.

    A failure while opening one closes those already open.
    """
    opened: list[Sink] = []
    try:
        for name, config in configs.items():
            opened.append(open_sink(config, context, name))
    except BaseException:
        close_sinks(opened, None)
        raise
    return opened


def close_sinks(sinks: list[Sink], checkpoint: Path | None) -> None:
    """Close every sink even if one raises; the first error is raised after all are closed."""
    error: BaseException | None = None
    for sink in sinks:
        try:
            sink.close(checkpoint)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, once every sink had its close
            error = error or exc
    if error is not None:
        raise error
