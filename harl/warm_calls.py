"""Calls of a compiled graph that skip dynamo's guard evaluation where the graph is known to fit.

Every call of a ``torch.compile``d function first evaluates its guards: one check per tensor it reads
(the inputs, and every parameter, buffer and env tensor reached through ``self``) and per Python value
it was traced with: 15-31 µs a call here, for the compiled MPE collection step (~200 µs a call, 128
a rollout) and a fused minibatch step (~1.4 ms) alike (docs/performance.md, "Guards").

``WarmCalls(fn, kind)`` calls ``fn`` as it is the first time a *kind* of call is seen: what can change
between the calls of one run (``call_kind``: grad mode, the default dtype, each tensor argument's
shape, dtype, device and ``requires_grad``, lists and tuples walked, each number's value; a caller adds
what else the function reads that could change, the networks' ``training`` flags).  Once a call of a
kind has returned, later calls of that kind run under ``torch.compiler.set_stance("default",
skip_guard_eval_unsafe=True)``: dynamo then runs only the guards that tell its cached graphs apart.

That stance is "unsafe" because a change the guards would have caught goes unnoticed; here the kind
catches the changes a run can make (a new shape, grad mode, eval mode); what it does not cover
(rebinding an attribute the graph reads, a number held in an attribute) does not happen inside a
run: the callers hold their graphs' objects fixed.  The equivalence is tested
(``tests/test_warm_calls.py``), and the fixed-seed compiled runs' metrics are unchanged.
``HARL_GUARDS=1`` in the environment keeps every guard (a check when a compiled run misbehaves).
On a torch without the stance (before 2.6) every call keeps its guards.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Hashable
from typing import Any

import torch

__all__ = ("WarmCalls", "call_kind")


def _stance_available() -> bool:
    stance = getattr(torch.compiler, "set_stance", None)
    return stance is not None and "skip_guard_eval_unsafe" in inspect.signature(stance).parameters


_SKIP = _stance_available()


def call_kind(args: tuple[Any, ...]) -> tuple[Hashable, ...]:
    """What a compiled graph's guards check of a call that can change between calls of one run: grad
    mode, the default dtype, every tensor argument's shape, dtype, device and ``requires_grad``, and
    every number's or string's value (lists and tuples walked)."""
    kind: list[Hashable] = [torch.is_grad_enabled(), torch.get_default_dtype()]
    stack = list(args)
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            kind.append((x.shape, x.dtype, x.device.type, x.requires_grad))
        elif isinstance(x, (list, tuple)):
            kind.append(len(x))
            stack.extend(x)
        elif isinstance(x, (bool, int, float, str)) or x is None:
            kind.append(x)  # dynamo specialises on such values (dynamic=False)
        else:
            kind.append(repr(type(x)))
    return tuple(kind)


class WarmCalls:
    """``fn`` (a ``torch.compile``d function), its guards skipped for kinds of call it has run before.

    ``kind(args)`` says what kind a call is (default ``call_kind``); a caller whose arguments' shapes
    are fixed, or who knows more of what the graph reads (the networks' ``training`` flags), gives its
    own, built on ``call_kind``.
    """

    def __init__(self, fn: Callable[..., Any],
                 kind: Callable[[tuple[Any, ...]], Hashable] = call_kind) -> None:
        self.fn = fn
        self.kind = kind
        self.seen: set[Hashable] = set()
        self.skipping = _SKIP and os.environ.get("HARL_GUARDS", "") != "1"
        self.warm_calls = 0
        """Calls that ran with the guards skipped (for tests and profiles)."""
        self._skip: Any = None

    def __call__(self, *args: Any) -> Any:
        if not self.skipping:
            return self.fn(*args)
        kind = self.kind(args)
        if kind not in self.seen:
            out = self.fn(*args)
            self.seen.add(kind)
            return out
        self.warm_calls += 1
        if self._skip is None:  # made once (making it sets the stance; leaving it restores the one before)
            self._skip = torch.compiler.set_stance("default", skip_guard_eval_unsafe=True)
            self._skip.__exit__(None, None, None)
        with self._skip:
            return self.fn(*args)
