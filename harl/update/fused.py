"""``[updater] compile``: a whole on-policy minibatch step as one function, and as one compiled graph.

One minibatch step of a learner (a PPO/A2C actor, a V critic) is, eagerly, a dozen Python calls and
some hundred ATen dispatches: the minibatch gathers, the forward pass, autograd's backward, the
gradient-norm clip over every parameter, and Adam's step parameter by parameter.  Here it is one pure
function of tensors (``FusedStep.function``)::

    (params, exp_avgs, exp_avg_sqs, coefs, *data, rows)
        -> (new params, new exp_avgs, new exp_avg_sqs, stats)

``torch.func.grad`` over ``torch.func.functional_call`` of the learner's own loss gives the gradients
(forward and backward in one trace), then the clip (``clip_grads``' arithmetic) and Adam's step
(``torch.optim.Adam``'s single-tensor arithmetic: ``lerp``, ``addcmul``, the bias corrections) on
them.  ``[updater] compile = "on"`` hands that function to ``torch.compile`` (inductor, its C++
wrapper, fixed shapes), so that the gathers, forward, backward, clip and Adam of a minibatch run as
one graph (``"off"``, the default, keeps the eager loop untouched).  The same function uncompiled is
what the fast tests hold against the eager step (``tests/update/test_fused_step.py``); compiled, the
``slow`` one.

What stays where it was: the network's parameters and Adam's state stay the module's and the
optimiser's own tensors (the new values are copied into them after each step, three ``foreach``
copies), so checkpoints, ``state_dict``, ``load_state_dict``, the learning-rate schedule (``coefs``
carries the rate and the bias corrections as numbers the graph reads, never constants it was
compiled with) and a switch back to eager all see one state.  The minibatch permutation is drawn
from the learner's generator as eagerly, so the steps see the same rows.

A learner takes the fused step only if its step is the plain one: Adam without weight decay,
amsgrad or maximise, one parameter group, a feed-forward network (``fusable`` says why not).

This is the one compiled update (issue 58): ``[policy] compile``, which compiled the same step as two
graphs before, is read as this key (``harl.config.renames``).
"""

from __future__ import annotations

import hashlib
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.optim.optimizer import _get_scalar_dtype

from harl.collect.compiled import record_compile_s, recorded_compile_s, use_cache_dir
from harl.settings import one_of, setting
from harl.update.compiled import compiled
from harl.warm_calls import WarmCalls, call_kind


def adam_defaults(optimizer: torch.optim.Optimizer) -> str | None:
    """Why ``optimizer`` is not the plain Adam the fused step reproduces (None: it is)."""
    if type(optimizer) is not torch.optim.Adam:
        return f"the optimiser is {type(optimizer).__name__}, not Adam"
    if len(optimizer.param_groups) != 1:
        return "the optimiser has several parameter groups"
    group = optimizer.param_groups[0]
    for key, plain in (("weight_decay", 0), ("amsgrad", False), ("maximize", False), ("capturable", False),
                       ("differentiable", False)):
        if group.get(key, plain) != plain:
            return f"Adam's {key} is {group[key]!r}"
    if group.get("fused"):
        return "Adam is the fused implementation"
    return None


class FusedStep:
    """One learner's minibatch step as one function: forward, backward, clip and Adam.

    ``module`` holds the parameters (those in ``parameters``, which the optimiser steps; any others
    and the buffers are read as they are), ``loss(module, *data)`` returns ``(loss, stats)``, ``stats``
    a ``(k,)`` tensor of what the learner reports.  ``step(*data)`` runs one step and returns
    ``(stats, pre-clip gradient norm)``.
    """

    def __init__(self, module: nn.Module, parameters: Sequence[torch.Tensor], optimizer: torch.optim.Optimizer,
                 loss: Callable[..., tuple[torch.Tensor, torch.Tensor]], max_grad_norm: float,
                 compile: bool = True, label: str = "the update") -> None:
        problem = adam_defaults(optimizer)
        if problem is not None:
            raise ValueError(f"the fused step needs plain Adam: {problem}")
        self.module = module
        self.parameters = list(parameters)
        wanted = {id(p) for p in self.parameters}
        self.objective = _Objective(module, loss)
        self.names = [f"net.{name}" for name, p in module.named_parameters() if id(p) in wanted]
        if len(self.names) != len(self.parameters):
            raise ValueError("the fused step's parameters must be the module's own")
        by_name = dict(self.objective.named_parameters())
        self.parameters = [by_name[name] for name in self.names]  # the module's order
        self.optimizer = optimizer
        self.loss = loss
        self.max_grad_norm = float(max_grad_norm)
        group = optimizer.param_groups[0]
        self.beta1, self.beta2 = (float(b) for b in group["betas"])
        self.eps = float(group["eps"])
        self.is_compiled = compile
        self.label = label
        self.compile_s = 0.0
        """Seconds the first (compiling) call took."""
        self._first = compile
        # A call's kind: the module's mode and the data's shapes (the parameters' and Adam's, the first
        # three arguments, are the learner's own for its life).
        self.function: Callable[..., Any] = self._function
        if compile:
            self.function = WarmCalls(compiled(self._function), lambda args: (module.training, call_kind(args[3:])))

    # ------------------------------------------------------------------ the function

    def _function(self, params: list[torch.Tensor], exp_avgs: list[torch.Tensor], exp_avg_sqs: list[torch.Tensor],
                  coefs: torch.Tensor, *data: Any) -> tuple[list[torch.Tensor], list[torch.Tensor],
                                                            list[torch.Tensor], torch.Tensor, torch.Tensor]:
        """One step: ``coefs`` = (learning rate / Adam's first bias correction, the square root of the
        second), as ``torch.optim.Adam`` computes them for this step."""
        names, objective = self.names, self.objective

        def loss(ps: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.func.functional_call(objective, dict(zip(names, ps)), data, strict=False,
                                              tie_weights=False)

        grads, stats = torch.func.grad(loss, has_aux=True)(params)
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        if self.max_grad_norm > 0:  # clip_grads: torch.nn.utils.clip_grad_norm_'s arithmetic
            scale = torch.clamp(self.max_grad_norm / (norm + 1e-6), max=1.0)
            grads = [g * scale for g in grads]
        step_size, root = coefs[0], coefs[1]
        new_p, new_m, new_v = [], [], []
        for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
            m = torch.lerp(m, g, 1 - self.beta1)
            v = v * self.beta2 + (1 - self.beta2) * g * g
            new_p.append(p - step_size * m / (v.sqrt() / root + self.eps))
            new_m.append(m)
            new_v.append(v)
        return new_p, new_m, new_v, stats, norm

    # ------------------------------------------------------------------ one step

    def _state(self) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
        """Adam's state of every parameter, made as ``torch.optim.Adam`` makes it where it has none yet."""
        state = self.optimizer.state
        for p in self.parameters:
            if not state[p]:
                state[p]["step"] = torch.tensor(0.0, dtype=_get_scalar_dtype())
                state[p]["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state[p]["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return ([state[p]["step"] for p in self.parameters], [state[p]["exp_avg"] for p in self.parameters],
                [state[p]["exp_avg_sq"] for p in self.parameters])

    def step(self, *data: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
        """One minibatch step on ``data`` (what ``loss`` takes after the module); ``(stats, norm)``.

        None: the compile failed (a network torch.compile cannot take whole), said in one line (a
        ``RuntimeWarning``); nothing was changed, and the learner takes its eager step instead."""
        steps, exp_avgs, exp_avg_sqs = self._state()
        count = float(steps[0]) + 1
        lr = float(self.optimizer.param_groups[0]["lr"])
        coefs = torch.tensor([lr / (1 - self.beta1 ** count), (1 - self.beta2 ** count) ** 0.5],
                             device=self.parameters[0].device)
        params = [p.detach() for p in self.parameters]
        if self._first:
            began = time.perf_counter()
            _announce(f"compiling {self.label}")
            try:
                out = self.function(params, exp_avgs, exp_avg_sqs, coefs, *data)
            except Exception as exc:  # noqa: BLE001 - any compile failure: eager instead, said once
                first = (str(exc).strip().splitlines() or [""])[0][:200]
                warnings.warn(f"updater.compile: {self.label} stays eager: the compile failed "
                              f"({type(exc).__name__}: {first})", RuntimeWarning, stacklevel=3)
                return None
            finally:
                _announce(None)
            self.compile_s = time.perf_counter() - began
            self._first = False
        else:
            out = self.function(params, exp_avgs, exp_avg_sqs, coefs, *data)
        new_p, new_m, new_v, stats, norm = out
        with torch.no_grad():
            torch._foreach_copy_(params, new_p)
            torch._foreach_copy_(exp_avgs, new_m)
            torch._foreach_copy_(exp_avg_sqs, new_v)
            torch._foreach_add_(steps, 1.0)
        return stats, norm


class _Objective(nn.Module):
    """The learner's ``loss`` as a module over ``module`` (its submodule ``net``), for ``functional_call``."""

    def __init__(self, module: nn.Module, loss: Callable[..., tuple[torch.Tensor, torch.Tensor]]) -> None:
        super().__init__()
        self.net = module
        self.loss = loss

    def forward(self, *data: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return self.loss(self.net, *data)


def _announce(text: str | None) -> None:
    """Tell the open progress views what long step is under way (None: it is over)."""
    from harl.logging.progress import show_activity

    show_activity(text)


# ---------------------------------------------------------------------- [updater] compile

MODES = ("off", "on", "auto")

COLD_COMPILE_S = 120.0
"""``auto``'s estimate of the fused steps' compile where none is recorded for this update (the
collection step's record, ``harl.collect.compiled.recorded_compile_s``, keyed by this update's
signature).  Measured on 2 busy cores (load 13-16): 537 s for the JaxMARL-settings IPPO's two
learners, 111 s for the torch-MPE HAPPO's four; a quiet machine takes less.  A run whose updates
have taken this long has run long enough that one compile costs at most what it has spent."""

TRIAL_UPDATES = 3
"""Compiled updates ``auto`` times (after the compiling one) before it keeps the compiled step."""


def compile_setting() -> Any:
    """``[updater] compile``, one key for the sequential and the simultaneous updater."""
    return setting(
        "off", "each on-policy minibatch step (forward, backward, gradient clip, Adam) of the PPO/A2C feed-forward "
        "actors and the V critics as one compiled graph (torch.compile, inductor; harl.update.fused): off; on "
        "(compiled at the first update); auto (eager until the eager updates have taken as long as the compile "
        "is expected to, then compiled, and kept only if the compiled updates measure faster than the eager "
        "ones). Other learners stay eager (docs/performance.md)", one_of(MODES))


def compile_checks(config: Any, built: Mapping[str, Any]) -> Iterator[tuple[list[str], str]]:
    """``compile = "on"`` where no learner could take the fused step is refused at load time, naming the key
    (``auto`` stays eager there)."""
    if getattr(config, "compile", "off") != "on":
        return
    objective = getattr(getattr(config, "objective", None), "kind", None)
    if objective not in ("ppo", "a2c"):
        yield (["updater", "compile"], f'"on" compiles the minibatch step of the PPO and A2C objectives, but '
               f'updater.objective.kind = "{objective}"; set updater.compile = "off" (or "auto": eager where it '
               "cannot compile)")
        return
    recurrent = getattr(built.get("policy"), "recurrent", "none")
    if recurrent != "none":
        yield (["updater", "compile"], f'"on" compiles the feed-forward networks\' minibatch step, but '
               f'policy.recurrent = "{recurrent}"; set updater.compile = "off" (or "auto": eager where it cannot '
               "compile)")


class CompileSwitch:
    """``[updater] compile`` for an updater's learners: which take the fused step, and when.

    ``"on"``: every learner that can (``fusable``) takes the compiled step from the first update.
    ``"auto"``: the updates run eager and are timed; once they have taken as long as the compile is
    expected to take (the last compile recorded for this update, ``COLD_COMPILE_S`` where none is), the
    learners compile (a ski-rental rule: a short run never compiles, a long one pays at most one compile
    more than compiling at once).  The compiling update is not counted; the ``TRIAL_UPDATES`` after it
    are, and if their median is not below the eager updates' median the learners go back to the eager
    step for the rest of the run (the compiled step is kept only where it measured faster).
    Learners that cannot take the step stay eager, with one line (a ``RuntimeWarning``) saying why.
    """

    def __init__(self, mode: str, learners: Sequence[Any]) -> None:
        self.mode = mode
        self.learners: list[Any] = []
        self.state = "off" if mode == "off" else "eager"
        """off | eager (``auto`` not yet compiled) | trial | compiled | dropped (measured slower)."""
        self.eager: list[float] = []
        self.trial: list[float] = []
        self.expected_s: float | None = None
        self.signature = ""
        self.compiling = False
        if mode == "off":
            return
        seen: set[int] = set()
        skipped = []
        for learner in learners:
            if id(learner) in seen:
                continue
            seen.add(id(learner))
            fusable = getattr(learner, "fusable", None)
            why = fusable() if fusable is not None else f"{type(learner).__name__} has no fused step"
            if why is None:
                self.learners.append(learner)
            else:
                skipped.append(why)
        if skipped:
            warnings.warn(f'updater.compile = "{mode}": {len(skipped)} learner(s) stay eager: '
                          f"{'; '.join(sorted(set(skipped)))}", RuntimeWarning, stacklevel=3)
        if not self.learners:
            self.state = "off"
        elif mode == "on":
            self._enable(True)

    def _enable(self, on: bool) -> None:
        if on:
            use_cache_dir()
            # every learner's step is the one function FusedStep._function, which dynamo compiles once per
            # learner (its guards on the learner): more learners than dynamo's limit would run uncompiled
            dynamo = torch._dynamo.config
            dynamo.recompile_limit = max(dynamo.recompile_limit, len(self.learners) + 8)
        for learner in self.learners:
            if on:
                learner.enable_fused()
            else:
                learner.fused = None
        self.state = ("compiled" if self.mode == "on" else "trial") if on else "dropped"
        self.compiling = on and self.mode == "auto"

    @property
    def active(self) -> bool:
        """Whether the learners take the fused step now."""
        return self.state in ("compiled", "trial")

    def start(self) -> float:
        return time.perf_counter()

    def finish(self, started: float, shapes: Any = None) -> None:
        """After an update that began at ``started`` (``start()``); ``shapes``: what the update's shapes
        are (the compile's record is kept per networks and shapes)."""
        if self.mode != "auto" or self.state in ("off", "compiled", "dropped"):
            return
        seconds = time.perf_counter() - started
        if self.state == "eager":
            self.eager.append(seconds)
            if self.expected_s is None:
                self.signature = signature(self.learners, shapes)
                recorded = recorded_compile_s(self.signature)
                self.expected_s = COLD_COMPILE_S if recorded is None else recorded
            if sum(self.eager) >= self.expected_s:
                self._enable(True)
            return
        if self.compiling:  # the compiling update: its compile is recorded, its time is not a step's
            self.compiling = False
            record_compile_s(self.signature, sum(learner.fused.compile_s for learner in self.learners
                                                 if learner.fused is not None))
            return
        self.trial.append(seconds)
        if len(self.trial) >= TRIAL_UPDATES:
            if statistics.median(self.trial) < statistics.median(self.eager[-max(TRIAL_UPDATES, 5):]):
                self.state = "compiled"
            else:
                self._enable(False)


def signature(learners: Sequence[Any], shapes: Any) -> str:
    """What the fused steps' compiled code depends on: torch, the networks, the learners' settings, the shapes."""
    parts = [torch.__version__, repr(shapes)]
    for learner in learners:
        module = getattr(learner, "actor", None) or getattr(learner, "critic", None)
        parts += [type(learner).__name__, repr(module), repr(getattr(learner, "config", None))]
    return "update:" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
