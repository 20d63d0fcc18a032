"""``[policy] compile``: the on-policy minibatch step as compiled graphs (issue 49).

A minibatch step is loss, backward, gradient clip and the optimiser's step.  Compiled
(``compile = "on"``), it is two graphs that inductor builds once, at the first update:

    loss   = compiled_loss(rows)          # forward; AOTAutograd compiles its backward with it
    loss.backward()                       # runs that compiled backward graph
    norm   = compiled_clip_and_step()     # the gradient-norm clip and Adam's step, one graph

``torch.compile(..., dynamic=False)``: the shapes are the rollout's and the minibatch's, fixed
for a run.  The learning rate goes into the step graph as a tensor, so a schedule (``[updater]
lr_decay``) changes a number the graph reads instead of a constant it was compiled with (a
float would recompile the step at every new rate).  The compiled step equals the eager one to
float rounding (tests/update/test_compiled_step.py).

``"auto"`` compiles where the run earns the compile back; see ``worth_compiling``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import torch

from harl.policy.config import COMPILE_MODES
from harl.update.common import clip_grads

__all__ = ("COMPILE_MODES", "AutoCompile", "CompiledStep", "compile_mode", "compiled", "worth_compiling")


INDUCTOR_OPTIONS: dict[str, Any] = {"cpp_wrapper": True}
"""Inductor options of every graph compiled here: its C++ wrapper, whose steps measured 3-6 % less CPU than
the Python wrapper's (MAPPO SMAX 3m actor 14.7 against 15.2 ms, HAPPO spread actor 16.5 against 17.6 ms
per minibatch step) for a compile about 1.4x as long (docs/performance.md)."""

F = TypeVar("F", bound=Callable[..., Any])


def compile_mode(value: Any) -> str:
    """``[policy] compile`` as one of ``COMPILE_MODES`` (the old ``true`` / ``false`` mean "on" / "off")."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def compiled(fn: F) -> F:
    """``fn`` compiled for fixed shapes with this module's inductor options."""
    return torch.compile(fn, dynamic=False, options=dict(INDUCTOR_OPTIONS) or None)  # type: ignore[return-value]


class CompiledStep:
    """zero_grad, backward, clip to ``max_grad_norm`` (0: none) and ``optimizer.step()``; the clip and the
    step as one compiled graph.  ``step(loss)`` returns the pre-clip gradient norm, as
    ``harl.update.common.optimizer_step(..., report_norm=True)`` does."""

    def __init__(self, optimizer: torch.optim.Optimizer, parameters: Iterable[torch.Tensor],
                 max_grad_norm: float) -> None:
        self.optimizer = optimizer
        self.parameters = list(parameters)
        self.max_grad_norm = max_grad_norm
        self._rates = [torch.tensor(float(group["lr"])) for group in optimizer.param_groups]
        self._clip_and_step = compiled(self._eager_clip_and_step)

    def _eager_clip_and_step(self) -> torch.Tensor:
        norm = clip_grads(self.parameters, self.max_grad_norm)
        self.optimizer.step()
        return norm

    def step(self, loss: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        groups = self.optimizer.param_groups
        rates = [group["lr"] for group in groups]
        for group, held, rate in zip(groups, self._rates, rates):
            held.fill_(float(rate))
            group["lr"] = held
        try:
            return self._clip_and_step()
        finally:  # the optimiser's state_dict and set_lr keep seeing plain floats
            for group, rate in zip(groups, rates):
                group["lr"] = rate


def worth_compiling(steps: int, compile_s: float, saved_per_step_s: float) -> bool:
    """``"auto"``'s rule: compile when the ``steps`` minibatch steps left to run, each ``saved_per_step_s``
    faster compiled, save more than the ``compile_s`` the compile takes."""
    return saved_per_step_s > 0 and steps * saved_per_step_s > compile_s


COMPILE_SECONDS = 80.0
"""What ``"auto"`` takes one learner's compile (its loss and its step, a cold inductor cache) to cost: the
upper end of 24-80 s measured at load 1-13 (217-325 s at load 12-22)."""

SAVED_FRACTION = 0.1
"""The share of an eager update that ``"auto"`` takes the compiled step to save: measured 0.0 (HAPPO's
4,096-row 128-128 actor) to 0.22 (MAPPO's 2,400-row 128x3 actor), CPU time per minibatch step."""


class AutoCompile:
    """``[policy] compile = "auto"`` for an updater's ``learners`` (those whose ``compile`` says "auto").

    The first update runs eager and is timed (``seconds``); at the second, whose ``progress`` is
    ``1 / n`` of the run's ``n`` updates, the updates left, each ``SAVED_FRACTION`` of that time
    faster compiled, are weighed against ``COMPILE_SECONDS`` per learner (``worth_compiling``), and
    the learners compile from then on, or never."""

    def __init__(self, learners: Sequence[Any]) -> None:
        self.learners = [learner for learner in learners if getattr(learner, "compile", "off") == "auto"]
        self.calls = 0
        self.seconds = 0.0
        self.decided = not self.learners

    def start(self) -> float:
        return time.perf_counter()

    def finish(self, started: float, progress: float) -> None:
        """After an update that began at ``started`` (``start()``) at ``progress`` of the run."""
        if self.decided:
            return
        self.calls += 1
        if progress <= 0:  # the first update: the eager time per update
            self.seconds = time.perf_counter() - started
            return
        self.decided = True
        left = round((self.calls - 1) * (1.0 - progress) / progress)
        if worth_compiling(left, COMPILE_SECONDS * len(self.learners), SAVED_FRACTION * self.seconds):
            for learner in self.learners:
                learner.enable_compile()
