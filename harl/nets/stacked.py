"""Several agents' on-policy actors of the same shapes, evaluated as one batched network.

Each agent keeps its own ``Actor`` (its parameters, its optimiser, its checkpoint entries);
a ``StackedActors`` reads their parameters stacked along a leading agent axis and runs the
MLP and the action head with batched matmuls (``baddbmm``), so ``A`` agents cost the
operations of one.  Inputs and outputs carry the agent axis first: observations
``(A, N, d)``, actions and per-dimension log-probs ``(A, N, k)``, entropies ``(A, N)``.

The arithmetic is the per-agent loop's, grouped differently: results agree with each
actor's own ``act`` / ``evaluate`` to float rounding (``tests/nets/test_stacked.py``, with
the same inputs and the same noise).  Sampling draws one block of noise for the group, so
the random numbers reach the agents in another order than the loop's.

What stacks: feed-forward actors on the ``MLP`` base with a Gaussian or categorical head.
``signature`` says which actors may share a stack (None: this actor does not stack).

The parts any stack of actors shares live here too: ``ParamStack`` (the parameters read
stacked, cached while they do not change), ``layers_signature`` and ``run_layers`` (a
``Sequential`` of ``Linear``, ``LayerNorm`` and activations run over the agent axis).  The
off-policy actors stack through them (``harl.policy.off_policy_stack``).

Why not ``torch.func.vmap`` as ``harl.nets.population``: that batches whole population members
(any network, RNNs too, stacked copies written back after its own Adam step); this batches the
agents of one run, whose parameters stay their own ``Actor``'s under their own optimisers, read
as a cached stacked view in the hot acting loop, where vmap would add its per-call dispatch
(``functional_call``, batching rules) to a step of a few small matmuls (not measured against
this), and LayerNorm folding and fp32 edge layers are done by hand here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from harl.nets.heads import (
    _LOG_SQRT_2PI,
    CategoricalHead,
    GaussianHead,
    _categorical_sample,
    _entropy,
    _masked_logits,
    add_up,
)
from harl.nets.mlp import MLP
from harl.nets.plain import EdgeLinear

Params = dict[str, torch.Tensor]


ACTIVATIONS = (nn.ReLU, nn.Tanh, nn.ELU, nn.LeakyReLU, nn.Hardswish, nn.Identity)
"""The parameter-free layers ``run_layers`` calls as they are."""


def layers_signature(body: nn.Module) -> tuple[Any, ...] | None:
    """What two ``Sequential`` stacks must share to run as one (None: ``body`` holds a layer
    ``run_layers`` cannot run): each layer's kind and shape."""
    if not isinstance(body, nn.Sequential):
        return None
    layers: list[tuple[Any, ...]] = []
    for layer in body:
        if isinstance(layer, nn.Linear):
            layers.append(("linear", tuple(layer.weight.shape), isinstance(layer, EdgeLinear)))
        elif isinstance(layer, nn.LayerNorm):
            if not layer.elementwise_affine or layer.bias is None:
                return None
            layers.append(("norm", tuple(layer.normalized_shape), layer.eps))
        elif isinstance(layer, ACTIVATIONS):
            layers.append((type(layer).__name__, repr(layer)))
        else:
            return None
    return tuple(layers)


def signature(actor: nn.Module) -> tuple[Any, ...] | None:
    """What two on-policy actors must share to be stacked (None: ``actor`` cannot be): the MLP's
    layer kinds and shapes, the head's kind, sizes and std coefficients, dtype and device."""
    base, head = getattr(actor, "base", None), getattr(actor, "head", None)
    if not isinstance(base, MLP) or getattr(actor, "rnn", None) is not None:
        return None
    if not isinstance(head, (GaussianHead, CategoricalHead)):
        return None
    layers = layers_signature(base.body)
    if layers is None:
        return None
    if isinstance(head, GaussianHead):
        head_sig: tuple[Any, ...] = ("gaussian", tuple(head.mean.weight.shape), head.std_x_coef, head.std_y_coef)
    else:
        head_sig = ("categorical", tuple(head.logits.weight.shape), tuple(head.sizes))
    first = next(actor.parameters())
    return (layers, head_sig, first.dtype, str(first.device))


Affine = tuple[torch.Tensor, torch.Tensor] | None
"""A LayerNorm's scale and shift, ``(A, 1, n)`` each, not yet applied (see ``features``)."""


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, affine: Affine = None) -> torch.Tensor:
    """``(w x + b) @ weight + bias`` for ``x (A, N, i)``, ``weight (A, i, o)``, ``bias (A, 1, o)``
    (``params``' layout), ``(w, b)`` the pending ``affine`` folded into the weight and bias."""
    if affine is not None:
        scale, shift = affine
        weight, bias = weight * scale.transpose(1, 2), torch.baddbmm(bias, shift, weight)
    return torch.baddbmm(bias, x, weight)


class FrozenParams(dict[str, torch.Tensor]):
    """The stacked parameters of modules that never change (``ParamStack(frozen=True)``): each
    ``Linear``'s weight and bias with the LayerNorm before it folded in are kept (``folds``), so
    acting step after step does not fold them again."""

    def __init__(self, params: Params) -> None:
        super().__init__(params)
        self.folds: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}


def linear(params: Params, name: str, x: torch.Tensor, affine: Affine = None, edge: bool = False) -> torch.Tensor:
    """The stacked ``Linear`` called ``name`` (its parameters ``name.weight``, ``name.bias``) on ``x``;
    ``edge``: an ``EdgeLinear``, fp32 even under bf16 autocast as the per-agent layer is."""
    weight, bias = params[name + ".weight"], params[name + ".bias"]
    if affine is not None and isinstance(params, FrozenParams):
        if name not in params.folds:
            scale, shift = affine
            params.folds[name] = (weight * scale.transpose(1, 2), torch.baddbmm(bias, shift, weight))
        (weight, bias), affine = params.folds[name], None
    if edge and torch.is_autocast_enabled(x.device.type):
        with torch.autocast(x.device.type, enabled=False):
            return _linear(x.float(), weight, bias, affine)
    return _linear(x, weight, bias, affine)


def run_layers(params: Params, body: nn.Sequential, prefix: str, x: torch.Tensor
               ) -> tuple[torch.Tensor, Affine]:
    """``body`` (one of ``layers_signature``'s) on ``x (A, N, d)`` with the stacked parameters whose
    names start with ``prefix``: the output ``(A, N, width)`` and the affine part of a last
    LayerNorm still to apply (None: none).

    A LayerNorm's scale and shift are folded into the ``Linear`` after it,
    ``W (w x + b) + c = (W w) x + (W b + c)``, so each agent's activations go through one
    normalisation pass and one batched matmul; ``finish`` applies one left at the end."""
    affine: Affine = None
    for j, layer in enumerate(body):
        if isinstance(layer, nn.Linear):
            x = linear(params, f"{prefix}{j}", x, affine, isinstance(layer, EdgeLinear))
            affine = None
        elif isinstance(layer, nn.LayerNorm):
            x = F.layer_norm(x, layer.normalized_shape, None, None, layer.eps)
            affine = (params[f"{prefix}{j}.weight"], params[f"{prefix}{j}.bias"])
        else:
            x = layer(x)
    return x, affine


def finish(x: torch.Tensor, affine: Affine) -> torch.Tensor:
    """``x`` with a pending LayerNorm affine applied (``run_layers``' output as the network's)."""
    return x if affine is None else x * affine[0] + affine[1]


class ParamStack:
    """Modules of one architecture whose parameters are read stacked along a leading agent axis.

    Each module keeps its own parameters (its optimiser, its checkpoint entries); the stack
    is a view made on demand, so nothing has to be written back.  ``frozen``: the modules never
    change (a self-play pool's snapshots), so the stack is read once and never checked again."""

    def __init__(self, modules: Sequence[nn.Module], frozen: bool = False) -> None:
        self.modules = list(modules)
        self.frozen = frozen
        self.template: Any = self.modules[0]
        self.names = [name for name, _ in self.template.named_parameters()]
        self._cache: tuple[tuple[tuple[int, int], ...], Params] | None = None

    def __len__(self) -> int:
        return len(self.modules)

    def _versions(self) -> tuple[tuple[int, int], ...]:
        return tuple((p.data_ptr(), p._version) for m in self.modules for p in m.parameters())

    def params(self, grad: bool = False) -> Params:
        """Every parameter stacked and laid out for the batched calls: a weight ``(A, in, out)``
        (transposed), a bias or norm vector ``(A, 1, n)``.  ``grad``: in the autograd graph (an
        update; gradients reach each module's own parameters); else a copy kept until some
        module's parameters change (acting reuses it step after step)."""
        if grad:
            return self._stacked()
        if self.frozen and self._cache is not None:
            return self._cache[1]
        key = self._versions()
        if self._cache is None or self._cache[0] != key:
            with torch.no_grad():
                stacked = self._stacked()
                self._cache = (key, FrozenParams(stacked) if self.frozen else stacked)
        return self._cache[1]

    def _stacked(self) -> Params:
        per = [dict(m.named_parameters()) for m in self.modules]
        out = {}
        for n in self.names:
            x = torch.stack([p[n] for p in per])
            out[n] = x.transpose(1, 2) if x.dim() == 3 else x.unsqueeze(1)
        return out


class StackedActors(ParamStack):
    """The on-policy actors of ``actors`` (one signature) as one network over a leading agent axis."""

    def __init__(self, actors: Sequence[nn.Module], frozen: bool = False) -> None:
        sigs = {signature(a) for a in actors}
        if None in sigs or len(sigs) != 1:
            raise ValueError("StackedActors: the actors differ in shape or do not stack (see signature)")
        super().__init__(actors, frozen)
        self.actors = self.modules

    def features(self, params: Params, obs: torch.Tensor) -> tuple[torch.Tensor, Affine]:
        """The MLP's output of ``obs (A, N, d)``, ``(A, N, width)``, and the affine part of its last
        LayerNorm still to apply, folded into the head's ``Linear`` (``run_layers``)."""
        return run_layers(params, self.template.base.body, "base.body.", obs)

    def _gaussian(self, params: Params, x: torch.Tensor, affine: Affine) -> tuple[torch.Tensor, torch.Tensor]:
        head = self.template.head
        mean = linear(params, "head.mean", x, affine)
        return mean, torch.sigmoid(params["head.log_std"] / head.std_x_coef) * head.std_y_coef

    def _log_probs(self, params: Params, x: torch.Tensor, affine: Affine,
                   avail: torch.Tensor | None) -> list[torch.Tensor]:
        head = self.template.head
        logits = _masked_logits(linear(params, "head.logits", x, affine), avail)
        if head.action_dim == 1:
            return [torch.log_softmax(logits, -1)]
        return [torch.log_softmax(part, -1) for part in logits.split(head.sizes, -1)]

    def act(self, obs: torch.Tensor, avail: torch.Tensor | None, deterministic: bool = False,
            noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(actions, per-dimension log-probs), each ``(A, N, k)``, as each actor's ``act``.

        ``noise``: the Gaussian head's standard-normal draws ``(A, N, k)`` (a test passes the
        loop's), or the categorical head's exponential draws ``(A, N, sum of the sizes)`` (its
        Gumbel-max noise); by default one draw for the group."""
        params = self.params()
        x, affine = self.features(params, obs)
        if isinstance(self.template.head, GaussianHead):
            mean, std = self._gaussian(params, x, affine)
            if deterministic:
                action = mean
            else:
                action = mean + std * (torch.randn_like(mean) if noise is None else noise)
            return action, GaussianHead._log_prob(self.template.head, mean, std, action)
        actions, log_probs = [], []
        draws = [None] * len(self.template.head.sizes) if noise is None else noise.split(self.template.head.sizes, -1)
        for log_p, draw in zip(self._log_probs(params, x, affine, avail), draws):
            a = _categorical_sample(log_p, deterministic, draw)
            actions.append(a)
            log_probs.append(log_p.gather(-1, a.unsqueeze(-1)))
        return torch.stack(actions, -1).float(), torch.cat(log_probs, -1)

    def evaluate(self, params: Params, obs: torch.Tensor, actions: torch.Tensor, avail: torch.Tensor | None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """(per-dimension log-probs ``(A, N, k)``, entropies ``(A, N)``) of ``actions``, as each
        actor's ``evaluate``; ``params`` from ``params(grad=True)`` for a gradient step."""
        x, affine = self.features(params, obs)
        if isinstance(self.template.head, GaussianHead):
            mean, std = self._gaussian(params, x, affine)
            entropy = (0.5 + _LOG_SQRT_2PI + std.log()).sum(-1).expand(mean.shape[0], mean.shape[1])
            return GaussianHead._log_prob(self.template.head, mean, std, actions), entropy
        index = actions.long()
        log_probs, entropies = [], []
        for j, log_p in enumerate(self._log_probs(params, x, affine, avail)):
            log_probs.append(log_p.gather(-1, index[..., j : j + 1]))
            entropies.append(_entropy(log_p))
        return torch.cat(log_probs, -1), add_up(entropies)


def group_agents(actors: Sequence[nn.Module | None],
                 sign: Callable[[nn.Module], Hashable | None] = signature) -> list[list[int]]:
    """The agents (indices into ``actors``, one actor per agent) in groups that stack: each group's
    actors share a ``sign`` (the on-policy ``signature`` by default); an actor that does not stack
    (``sign`` None) is a group of its own.  Groups are ordered by their first agent."""
    groups: dict[Any, list[int]] = {}
    out: list[list[int]] = []
    for i, actor in enumerate(actors):
        sig = None if actor is None else sign(actor)
        if sig is None:
            out.append([i])
            continue
        if sig not in groups:
            groups[sig] = []
            out.append(groups[sig])
        groups[sig].append(i)
    return out
