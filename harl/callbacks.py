"""Callbacks: watch a run from Python, or stop it early.

::

    for each iteration:  stop = callback.on_iteration(row)        # the row metrics.csv gets, as numbers
    after an evaluation: stop = callback.on_evaluation(stats)     # harl.evaluator.EvalStats
    after a checkpoint:  callback.on_checkpoint(path)

Every hook is optional (a callback defines the ones it needs); a plain function is an
``on_iteration``.  A hook that returns ``True`` stops the run after this iteration with a
checkpoint, exactly as one Ctrl-C does: ``harl.resume`` continues it; anything but ``True``,
``False`` or ``None`` is a ``TypeError`` (a ``return "stop"`` would otherwise be lost).  An exception in a
hook stops the run too (the checkpoint of the finished iterations is still written) and
reaches the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

HOOKS = ("on_iteration", "on_evaluation", "on_checkpoint")

RowHook = Callable[[Mapping[str, Any]], "bool | None"]
"""A callback that is a function: called with each iteration's row; True stops the run."""


class Callback(Protocol):
    """Any subset of these methods (a Protocol lists them all; the Trainer calls those present)."""

    def on_iteration(self, row: Mapping[str, Any]) -> bool | None: ...

    def on_evaluation(self, stats: Any) -> bool | None: ...

    def on_checkpoint(self, path: Path) -> None: ...


class Callbacks:
    """The run's callbacks, called in order; ``True`` from any hook asks the run to stop."""

    def __init__(self, callbacks: Iterable[Callback | RowHook] = ()) -> None:
        self.callbacks = list(callbacks)
        for callback in self.callbacks:
            if not any(hasattr(callback, hook) for hook in HOOKS) and not callable(callback):
                raise TypeError(f"{callback!r} is not a callback: it has none of {', '.join(HOOKS)} "
                                "and is not a function of the row")

    def _call(self, hook: str, value: Any) -> bool:
        stop = False
        for callback in self.callbacks:
            method = getattr(callback, hook, None)
            if method is None and hook == "on_iteration" and not any(hasattr(callback, h) for h in HOOKS):
                method = callback  # a plain function
            if method is None:
                continue
            answer = method(value)
            if answer is not None and not isinstance(answer, bool):
                raise TypeError(f"callback {_name(callback)}: its {hook} hook returned {answer!r} "
                                f"({type(answer).__name__}); a hook returns True to stop the run, or "
                                "False / None to let it go on")
            stop = stop or answer is True
        return stop

    def on_iteration(self, row: Mapping[str, Any]) -> bool:
        return self._call("on_iteration", row)

    def on_evaluation(self, stats: Any) -> bool:
        return self._call("on_evaluation", stats)

    def on_checkpoint(self, path: Path) -> None:
        self._call("on_checkpoint", path)


def _name(callback: Any) -> str:
    """A callback as a message names it: its qualified name (a function) or its class's."""
    target = callback if callable(callback) and not hasattr(callback, "on_iteration") else type(callback)
    name = getattr(target, "__qualname__", None) or repr(callback)
    return f"{getattr(target, '__module__', '')}.{name}".lstrip(".")
