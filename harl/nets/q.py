"""Q networks: twin-stacked MLPs (one batched matmul per layer) and the dueling head.

``full_precision`` keeps an output layer in fp32 under ``[run] precision = "bf16"``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from harl.nets.plain import OFF_POLICY_ACTIVATIONS, plain_mlp


def full_precision(x: torch.Tensor) -> contextlib.AbstractContextManager[None]:
    """Autocast off (fp32) for a network's output layer: cheap, and it keeps values and losses exact
    to fp32 rounding of the hidden features under the ``[run] precision = "bf16"`` setting."""
    if torch.is_autocast_enabled(x.device.type):
        return torch.autocast(x.device.type, enabled=False)
    return contextlib.nullcontext()


class StackedMLP(nn.Module):
    """``k`` MLPs of one shape (``plain_mlp``'s ``Linear -> activation`` stack) run as one.

    Layer ``j`` keeps the ``k`` weight matrices stacked, ``(k, out, in)``, so both twin
    critics take one batched matmul per layer (``baddbmm``) instead of one each.  Built from
    ``k`` ordinary ``plain_mlp`` networks, so it starts from the same initial weights (and
    draws the same random numbers) as the separate networks it replaces.  ``forward`` takes
    one input for all networks ``(..., in)`` and returns ``(k, ..., out)``.
    """

    def __init__(self, sizes: Sequence[int], activation: str, input_norm: bool, k: int) -> None:
        super().__init__()
        nets = [plain_mlp(sizes, activation, None, input_norm) for _ in range(k)]
        self.k = k
        self.sizes = list(sizes)
        self.activation = OFF_POLICY_ACTIVATIONS[activation]()
        linears = [[m for m in net if isinstance(m, nn.Linear)] for net in nets]
        self.weights = nn.ParameterList(nn.Parameter(torch.stack([lin[j].weight.detach() for lin in linears]))
                                        for j in range(len(sizes) - 1))
        self.biases = nn.ParameterList(nn.Parameter(torch.stack([lin[j].bias.detach() for lin in linears]).unsqueeze(1))
                                       for j in range(len(sizes) - 1))
        self.norm: nn.ParameterList | None = None
        if input_norm:
            norms = [m for net in nets if isinstance(m := net[0], nn.LayerNorm)]  # input_norm: a LayerNorm first
            self.norm = nn.ParameterList([nn.Parameter(torch.stack([n.weight.detach() for n in norms]).unsqueeze(1)),
                                          nn.Parameter(torch.stack([n.bias.detach() for n in norms]).unsqueeze(1))])

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        """Also reads checkpoints of the separate-network layout (``nets.<n>.<layer>.weight``)."""
        old = sorted(k for k in state_dict if k.startswith(prefix) and k[len(prefix):].split(".")[0].isdigit())
        if old:
            layers: dict[int, dict[str, list[torch.Tensor]]] = {}
            for key in old:
                n, layer, name = key[len(prefix):].split(".")
                layers.setdefault(int(layer), {}).setdefault(name, []).insert(int(n), state_dict.pop(key))
            ordered = [layers[i] for i in sorted(layers)]
            if self.norm is not None:
                norm, *ordered = ordered
                state_dict[prefix + "norm.0"] = torch.stack(norm["weight"]).unsqueeze(1)
                state_dict[prefix + "norm.1"] = torch.stack(norm["bias"]).unsqueeze(1)
            for j, tensors in enumerate(ordered):
                state_dict[f"{prefix}weights.{j}"] = torch.stack(tensors["weight"])
                state_dict[f"{prefix}biases.{j}"] = torch.stack(tensors["bias"]).unsqueeze(1)
        super()._load_from_state_dict(state_dict, prefix, *args)

    def first_input(self, x: torch.Tensor) -> torch.Tensor:
        """``(N, in)`` -> ``(k, N, in)``: the input each network's first layer sees."""
        if self.norm is None:
            return x.expand(self.k, *x.shape)
        return F.layer_norm(x, x.shape[-1:]) * self.norm[0] + self.norm[1]

    def hidden(self, pre: torch.Tensor, start: int) -> torch.Tensor:
        """From layer ``start``'s pre-activation ``(m, N, h)`` to the output ``(m, N, out)`` of the first m networks."""
        m = pre.shape[0]
        x = pre
        last = len(self.weights) - 1
        for j in range(start + 1, last):
            x = torch.baddbmm(self.biases[j][:m], self.activation(x), self.weights[j][:m].mT)
        if start == last:
            return x.float()
        with full_precision(x):  # under bf16 autocast the output layer still sums in fp32
            return torch.baddbmm(self.biases[last][:m], self.activation(x).float(), self.weights[last][:m].mT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        with full_precision(x):  # raw inputs keep fp32 under bf16 autocast, as the output layer does
            pre = torch.baddbmm(self.biases[0], self.first_input(x.reshape(-1, x.shape[-1]).float()),
                                self.weights[0].mT)
        return self.hidden(pre, 0).reshape(self.k, *lead, -1)

    def forward_each(self, x: torch.Tensor) -> torch.Tensor:
        """Network ``j`` on its own input ``x[j]``: ``(k, ..., in)`` -> ``(k, ..., out)``."""
        lead = x.shape[1:-1]
        flat = x.reshape(self.k, -1, x.shape[-1]).float()
        if self.norm is not None:
            flat = F.layer_norm(flat, flat.shape[-1:]) * self.norm[0] + self.norm[1]
        with full_precision(x):
            pre = torch.baddbmm(self.biases[0], flat, self.weights[0].mT)
        return self.hidden(pre, 0).reshape(self.k, *lead, -1)

    def one(self, x: torch.Tensor, index: int) -> torch.Tensor:
        """Network ``index`` alone on ``(..., in)`` -> ``(..., out)`` (an actor loss on Q1 needs no Q2)."""
        if self.norm is not None:
            x = F.layer_norm(x, x.shape[-1:]) * self.norm[0][index, 0] + self.norm[1][index, 0]
        last = len(self.weights) - 1
        with full_precision(x):
            x = self.activation(F.linear(x.float(), self.weights[0][index], self.biases[0][index, 0]))
        for j in range(1, last):
            x = self.activation(F.linear(x, self.weights[j][index], self.biases[j][index, 0]))
        with full_precision(x):
            return F.linear(x.float(), self.weights[last][index], self.biases[last][index, 0])


class EncodedStack(nn.Module):
    """``k`` Q networks that each read the state through their own encoder, then a ``StackedMLP``.

    HARL's ``ContinuousQNet`` gives every Q network its own ``PlainCNN`` on an image state;
    the caller joins each network's features with the actions (``features`` then
    ``forward`` / ``one``), so one image batch is convolved once per network.
    """

    def __init__(self, encoders: Sequence[nn.Module], mlp: StackedMLP) -> None:
        super().__init__()
        self.encoders = nn.ModuleList(encoders)
        self.mlp = mlp

    def features(self, state: torch.Tensor, index: int | None = None) -> torch.Tensor:
        """``(k, ..., F)`` every network's features, or ``(..., F)`` network ``index``'s."""
        if index is not None:
            return self.encoders[index](state)
        return torch.stack([encoder(state) for encoder in self.encoders])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp.forward_each(x)

    def one(self, x: torch.Tensor, index: int) -> torch.Tensor:
        return self.mlp.one(x, index)


class DuelingNet(nn.Module):
    """``V(x) + A(x, .) - mean A(x, .)`` over ``n`` outputs."""

    def __init__(self, in_dim: int, n: int, hidden_sizes: Sequence[int], activation: str,
                 dueling_hidden_sizes: Sequence[int], dueling_activation: str, input_norm: bool) -> None:
        super().__init__()
        self.base = plain_mlp([in_dim, *hidden_sizes], activation, activation, input_norm)
        self.value = plain_mlp([hidden_sizes[-1], *dueling_hidden_sizes, 1], dueling_activation)
        self.advantage = plain_mlp([hidden_sizes[-1], *dueling_hidden_sizes, n], dueling_activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.base(x)
        adv = self.advantage(x)
        return self.value(x) + adv - adv.mean(-1, keepdim=True)
