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
"""

from __future__ import annotations

from collections.abc import Sequence
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

Params = dict[str, torch.Tensor]


def signature(actor: nn.Module) -> tuple[Any, ...] | None:
    """What two actors must share to be stacked (None: ``actor`` cannot be): the MLP's layer
    kinds and shapes, the head's kind, sizes and std coefficients, dtype and device."""
    base, head = getattr(actor, "base", None), getattr(actor, "head", None)
    if not isinstance(base, MLP) or getattr(actor, "rnn", None) is not None:
        return None
    if not isinstance(head, (GaussianHead, CategoricalHead)):
        return None
    layers: list[tuple[Any, ...]] = []
    for layer in base.body:
        if isinstance(layer, nn.Linear):
            layers.append(("linear", tuple(layer.weight.shape)))
        elif isinstance(layer, nn.LayerNorm):
            if not layer.elementwise_affine or layer.bias is None:
                return None
            layers.append(("norm", tuple(layer.normalized_shape), layer.eps))
        elif isinstance(layer, (nn.ReLU, nn.Tanh, nn.ELU, nn.LeakyReLU)):
            layers.append((type(layer).__name__, repr(layer)))
        else:
            return None
    if isinstance(head, GaussianHead):
        head_sig: tuple[Any, ...] = ("gaussian", tuple(head.mean.weight.shape), head.std_x_coef, head.std_y_coef)
    else:
        head_sig = ("categorical", tuple(head.logits.weight.shape), tuple(head.sizes))
    first = next(actor.parameters())
    return (tuple(layers), head_sig, first.dtype, str(first.device))


Affine = tuple[torch.Tensor, torch.Tensor] | None
"""A LayerNorm's scale and shift, ``(A, 1, n)`` each, not yet applied (see ``features``)."""


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, affine: Affine = None) -> torch.Tensor:
    """``(w x + b) @ weight + bias`` for ``x (A, N, i)``, ``weight (A, i, o)``, ``bias (A, 1, o)``
    (``params``' layout), ``(w, b)`` the pending ``affine`` folded into the weight and bias."""
    if affine is not None:
        scale, shift = affine
        weight, bias = weight * scale.transpose(1, 2), torch.baddbmm(bias, shift, weight)
    return torch.baddbmm(bias, x, weight)


class StackedActors:
    """The actors of ``actors`` (one signature) as one network over a leading agent axis."""

    def __init__(self, actors: Sequence[nn.Module]) -> None:
        sigs = {signature(a) for a in actors}
        if None in sigs or len(sigs) != 1:
            raise ValueError("StackedActors: the actors differ in shape or do not stack (see signature)")
        self.actors = list(actors)
        self.template: Any = self.actors[0]
        self.names = [name for name, _ in self.template.named_parameters()]
        self._cache: tuple[tuple[tuple[int, int], ...], Params] | None = None

    def __len__(self) -> int:
        return len(self.actors)

    def _versions(self) -> tuple[tuple[int, int], ...]:
        return tuple((p.data_ptr(), p._version) for a in self.actors for p in a.parameters())

    def params(self, grad: bool = False) -> Params:
        """Every parameter stacked and laid out for the batched calls: a weight ``(A, in, out)``
        (transposed), a bias or norm vector ``(A, 1, n)``.  ``grad``: in the autograd graph (an
        update; gradients reach each actor's own parameters); else a copy kept until some
        actor's parameters change (acting reuses it step after step)."""
        if grad:
            return self._stacked()
        key = self._versions()
        if self._cache is None or self._cache[0] != key:
            with torch.no_grad():
                self._cache = (key, self._stacked())
        return self._cache[1]

    def _stacked(self) -> Params:
        per = [dict(a.named_parameters()) for a in self.actors]
        out = {}
        for n in self.names:
            x = torch.stack([p[n] for p in per])
            out[n] = x.transpose(1, 2) if x.dim() == 3 else x.unsqueeze(1)
        return out

    def features(self, params: Params, obs: torch.Tensor) -> tuple[torch.Tensor, Affine]:
        """The MLP's output of ``obs (A, N, d)``, ``(A, N, width)``, and the affine part of its last
        LayerNorm still to apply (None: none).

        A LayerNorm's scale and shift are folded into the ``Linear`` after it (every LayerNorm
        here has one: the next hidden layer or the head), ``W (w x + b) + c = (W w) x + (W b + c)``,
        so each agent's activations go through one normalisation pass and one batched matmul."""
        x, affine = obs, None
        for j, layer in enumerate(self.template.base.body):
            prefix = f"base.body.{j}."
            if isinstance(layer, nn.Linear):
                x = _linear(x, params[prefix + "weight"], params[prefix + "bias"], affine)
                affine = None
            elif isinstance(layer, nn.LayerNorm):
                x = F.layer_norm(x, layer.normalized_shape, None, None, layer.eps)
                affine = (params[prefix + "weight"], params[prefix + "bias"])
            else:
                x = layer(x)
        return x, affine

    def _gaussian(self, params: Params, x: torch.Tensor, affine: Affine) -> tuple[torch.Tensor, torch.Tensor]:
        head = self.template.head
        mean = _linear(x, params["head.mean.weight"], params["head.mean.bias"], affine)
        return mean, torch.sigmoid(params["head.log_std"] / head.std_x_coef) * head.std_y_coef

    def _log_probs(self, params: Params, x: torch.Tensor, affine: Affine,
                   avail: torch.Tensor | None) -> list[torch.Tensor]:
        head = self.template.head
        logits = _masked_logits(_linear(x, params["head.logits.weight"], params["head.logits.bias"], affine), avail)
        if head.action_dim == 1:
            return [torch.log_softmax(logits, -1)]
        return [torch.log_softmax(part, -1) for part in logits.split(head.sizes, -1)]

    def act(self, obs: torch.Tensor, avail: torch.Tensor | None, deterministic: bool = False,
            noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(actions, per-dimension log-probs), each ``(A, N, k)``, as each actor's ``act``.

        ``noise``: the Gaussian head's standard-normal draws ``(A, N, k)`` (a test passes the
        loop's); by default one ``randn`` for the group."""
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
        for log_p in self._log_probs(params, x, affine, avail):
            a = _categorical_sample(log_p, deterministic)
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


def group_agents(actors: Sequence[nn.Module | None]) -> list[list[int]]:
    """The agents (indices into ``actors``, one actor per agent) in groups that stack: each group's
    actors share a ``signature``; an actor that does not stack is a group of its own.  Groups are
    ordered by their first agent."""
    groups: dict[Any, list[int]] = {}
    out: list[list[int]] = []
    for i, actor in enumerate(actors):
        sig = None if actor is None else signature(actor)
        if sig is None:
            out.append([i])
            continue
        if sig not in groups:
            groups[sig] = []
            out.append(groups[sig])
        groups[sig].append(i)
    return out
