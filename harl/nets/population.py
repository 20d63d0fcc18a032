"""Members' copies of one network as one batched network, and the optimiser step on them.

A population holds S members, each with its own modules and Adam optimisers (so each
checkpoints as a separate run would).  To act and to learn in one call, the members'
parameters of one network are stacked along a leading member axis
(``torch.func.stack_module_state``) and the network is called under ``torch.func.vmap``;
gradients come back stacked the same way.  ``MemberAdam`` then takes one Adam step for
every member at once (Adam is elementwise, so a stacked step is S independent steps; the
step counts are per member) after clipping each member's gradient norm on its own.
Nothing here knows an algorithm: ``harl.population.update`` says what is stacked when.

Why not ``harl.nets.stacked``'s ``baddbmm`` stacks: those batch the agents of one run, and only
feed-forward MLP actors with a Gaussian or categorical head, their gradients flowing back to each
agent's own parameters; a population batches every network of whole runs (critics, RNN actors,
any shape vmap can trace) and steps the members' optimisers itself, which a hand-written
layer-by-layer stack cannot cover.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, grad, stack_module_state, vmap

Tensors = dict[str, torch.Tensor]


class _Dispatch(nn.Module):
    """``forward(method, *args)`` calls ``module.method(*args)``: ``functional_call`` reaches any method."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, method: str, *args: Any) -> Any:
        return getattr(self.module, method)(*args)


class Stack:
    """One network of S members (same architecture), called as one.

    ``params`` / ``buffers``: the members' tensors stacked on a new first axis (copies: write
    ``params`` back with ``write_back`` after changing them).
    """

    def __init__(self, modules: Sequence[nn.Module]) -> None:
        self.modules = list(modules)
        params, buffers = stack_module_state(self.modules)
        self.params: Tensors = {f"module.{k}": v.detach() for k, v in params.items()}
        self.buffers: Tensors = {f"module.{k}": v for k, v in buffers.items()}
        self._template = _Dispatch(copy.deepcopy(self.modules[0]).to("meta"))

    def call(self, method: str, *args: Any, random: bool = False, pick: int = 0) -> Any:
        """``module.method(*args)`` of every member: each array in ``args`` has a leading member
        axis (None passes through).  ``random``: draws (action sampling) differ per member.
        ``pick``: keep the first ``pick`` outputs of a tuple (vmap returns tensors only)."""
        dims = tuple(None if a is None or not isinstance(a, torch.Tensor) else 0 for a in args)

        def one(p: Tensors, b: Tensors, *xs: Any) -> Any:
            out = functional_call(self._template, (p, b), (method, *xs))
            return out[:pick] if pick else out

        return vmap(one, in_dims=(0, 0, *dims), randomness="different" if random else "error")(
            self.params, self.buffers, *args)

    def grads(self, loss: Callable[..., tuple[torch.Tensor, Any]], params: Tensors, *args: Any) -> tuple[Tensors, Any]:
        """Per-member gradients of ``loss(call, *member_args) -> (scalar, aux)``, where ``call(method,
        *xs)`` runs the member's network; ``args`` carry the member axis first."""
        dims = tuple(None if a is None else 0 for a in args)

        def one(p: Tensors, b: Tensors, *xs: Any) -> tuple[torch.Tensor, Any]:
            return loss(lambda method, *ys: functional_call(self._template, (p, b), (method, *ys)), *xs)

        g, aux = vmap(grad(one, has_aux=True), in_dims=(0, 0, *dims))(params, self.buffers, *args)
        return g, aux

    @torch.no_grad()
    def write_back(self, params: Tensors | None = None) -> None:
        """Copy the stacked parameters into the members' own modules."""
        stacked = self.params if params is None else params
        for s, module in enumerate(self.modules):
            for name, p in module.named_parameters():
                p.copy_(stacked[f"module.{name}"][s])


def member_norms(grads: Tensors) -> torch.Tensor:
    """``(S,)`` the 2-norm of each member's whole gradient."""
    total = sum(g.reshape(g.shape[0], -1).pow(2).sum(1) for g in grads.values())
    return torch.as_tensor(total).sqrt()


def clip_member_grads(grads: Tensors, max_norm: float) -> torch.Tensor:
    """Clip each member's gradient to ``max_norm`` (0: no clip) as ``clip_grad_norm_`` does; the
    pre-clip norms."""
    norms = member_norms(grads)
    if max_norm > 0:
        scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for g in grads.values():
            g.mul_(scale.reshape(-1, *([1] * (g.dim() - 1))))
    return norms


class MemberAdam:
    """Adam on stacked parameters, its state read from (and written to) the members' own
    ``torch.optim.Adam`` optimisers, so a member's checkpoint is a separate run's.

    torch's Adam update (no weight decay, no amsgrad), per member: ``m = b1 m + (1 - b1) g``;
    ``v = b2 v + (1 - b2) g^2``; ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``.
    """

    def __init__(self, optimizers: Sequence[torch.optim.Optimizer], modules: Sequence[nn.Module]) -> None:
        self.optimizers = list(optimizers)
        self.modules = list(modules)
        group = self.optimizers[0].param_groups[0]
        self.lr = float(group["lr"])
        self.beta1, self.beta2 = (float(b) for b in group["betas"])
        self.eps = float(group["eps"])
        self.names = [f"module.{n}" for n, _ in self.modules[0].named_parameters()]
        self.exp_avg: Tensors = {}
        self.exp_avg_sq: Tensors = {}
        steps = []
        for opt, module in zip(self.optimizers, self.modules):
            states = [opt.state.get(p, {}) for p in module.parameters()]
            steps.append(float(states[0]["step"]) if states and "step" in states[0] else 0.0)
        self.step_count = torch.tensor(steps, dtype=torch.float64)
        for key, (_, first) in zip(self.names, self.modules[0].named_parameters()):
            self.exp_avg[key] = torch.zeros(len(self.modules), *first.shape, device=first.device)
            self.exp_avg_sq[key] = torch.zeros_like(self.exp_avg[key])
        for s, (opt, module) in enumerate(zip(self.optimizers, self.modules)):
            for key, p in zip(self.names, module.parameters()):
                state = opt.state.get(p)
                if state and "exp_avg" in state:
                    self.exp_avg[key][s].copy_(state["exp_avg"])
                    self.exp_avg_sq[key][s].copy_(state["exp_avg_sq"])

    @torch.no_grad()
    def step(self, params: Tensors, grads: Tensors) -> None:
        """One Adam step of every member (in place on ``params``)."""
        self.step_count += 1
        device = next(iter(params.values())).device
        bc1 = (1 - self.beta1 ** self.step_count).to(device)
        bc2_sqrt = (1 - self.beta2 ** self.step_count).sqrt().to(device)
        for key in self.names:
            p, g, m, v = params[key], grads[key], self.exp_avg[key], self.exp_avg_sq[key]
            shape = (-1, *([1] * (p.dim() - 1)))
            m.lerp_(g, 1 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
            denom = (v.sqrt() / bc2_sqrt.reshape(shape).to(v.dtype)).add_(self.eps)
            p.addcdiv_(m, denom * (bc1.reshape(shape).to(p.dtype) / self.lr), value=-1.0)

    @torch.no_grad()
    def write_back(self) -> None:
        """The state into each member's optimiser (what its checkpoint saves)."""
        for s, (opt, module) in enumerate(zip(self.optimizers, self.modules)):
            for key, p in zip(self.names, module.parameters()):
                state = opt.state[p]
                state["step"] = torch.tensor(float(self.step_count[s]))
                state["exp_avg"] = self.exp_avg[key][s].clone()
                state["exp_avg_sq"] = self.exp_avg_sq[key][s].clone()


def learn_steps(stack: Stack, adam: MemberAdam, loss: Callable[..., tuple[torch.Tensor, Any]],
                batches: Sequence[tuple[Any, ...]], max_grad_norm: float) -> list[tuple[torch.Tensor, Any]]:
    """One clipped Adam step of every member per batch in ``batches``; (pre-clip norms, aux) of each."""
    params = {k: v.clone() for k, v in stack.params.items()}
    out = []
    for args in batches:
        g, aux = stack.grads(loss, params, *args)
        norms = clip_member_grads(g, max_grad_norm)
        adam.step(params, g)
        out.append((norms, aux))
    stack.params = params
    stack.write_back()
    adam.write_back()
    return out
