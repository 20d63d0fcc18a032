"""Action heads: features -> actions, per-dimension log-probabilities and entropy.

Log-probabilities are kept per action dimension, shape ``(batch, k)`` (``k`` = Box
dimensions, 1 for Discrete, sub-actions for MultiDiscrete), because the HA factor and the
PPO ratio aggregate them with ``prod`` or ``mean`` over that last axis.  Actions of every
head are float tensors of shape ``(batch, k)`` so one buffer layout fits all of them.

These are hand-rolled rather than ``torch.distributions`` objects: the rollout calls
them every env step and the distribution objects' argument checks cost more than the math.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from harl.nets.mlp import init_linear

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
MASKED_LOGIT = -1e10


class ActionHead(Protocol):
    """What an actor needs of its head: what ``make_head`` returns (``GaussianHead`` for a Box,
    ``CategoricalHead`` for Discrete and MultiDiscrete; both ``nn.Module``s, so an actor's head is its
    submodule)."""

    action_dim: int
    """``k``: columns of the stored action and of the per-dimension log-probabilities."""

    def sample(self, x: torch.Tensor, avail: torch.Tensor | None,
               deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]: ...

    def evaluate(self, x: torch.Tensor, actions: torch.Tensor,
                 avail: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]: ...

    def distribution(self, x: torch.Tensor, avail: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        """The distribution's parameters, chosen so that ``kl(old, ·)`` is smallest (0) at ``old``."""
        ...

    def kl(self, old: tuple[torch.Tensor, ...], new: tuple[torch.Tensor, ...]) -> torch.Tensor: ...


class GaussianHead(nn.Module):
    """Diagonal Gaussian with a state-independent std, ``sigmoid(p / x) * y`` as in HARL.

    Bounding the std by ``std_y_coef`` keeps exploration from blowing up; the env (or
    its adapter) clips samples into the Box.
    """

    def __init__(self, in_dim: int, action_dim: int, std_x_coef: float = 1.0,
                 std_y_coef: float = 0.5, gain: float = 0.01) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.mean = init_linear(nn.Linear(in_dim, action_dim), gain)
        self.std_x_coef = std_x_coef
        self.std_y_coef = std_y_coef
        self.log_std = nn.Parameter(torch.full((action_dim,), float(std_x_coef)))

    def _std(self) -> torch.Tensor:
        return torch.sigmoid(self.log_std / self.std_x_coef) * self.std_y_coef

    def _log_prob(self, mean: torch.Tensor, std: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return -((a - mean) ** 2) / (2 * std * std) - std.log() - _LOG_SQRT_2PI

    def sample(self, x: torch.Tensor, avail: torch.Tensor | None,
               deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
        mean, std = self.mean(x), self._std()
        action = mean if deterministic else mean + std * torch.randn_like(mean)
        return action, self._log_prob(mean, std, action)

    def evaluate(self, x: torch.Tensor, actions: torch.Tensor,
                 avail: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        mean, std = self.mean(x), self._std()
        entropy = (0.5 + _LOG_SQRT_2PI + std.log()).sum().expand(mean.shape[0])
        return self._log_prob(mean, std, actions), entropy

    def distribution(self, x: torch.Tensor, avail: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        """The distribution's parameters ``(mean, std)``, each ``(batch, k)``."""
        mean = self.mean(x)
        return mean, self._std().expand_as(mean)

    @staticmethod
    def kl(old: tuple[torch.Tensor, ...], new: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """``(batch,)`` KL(old || new) of two ``distribution`` outputs, summed over dimensions."""
        (mu0, s0), (mu1, s1) = old, new
        var_ratio = (s0 / s1) ** 2
        return 0.5 * (var_ratio + ((mu0 - mu1) / s1) ** 2 - 1 - var_ratio.log()).sum(-1)


def _masked_logits(logits: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
    return logits if avail is None else logits.masked_fill(avail == 0, MASKED_LOGIT)


def _categorical_sample(logits: torch.Tensor, deterministic: bool, draw: torch.Tensor | None = None) -> torch.Tensor:
    """The most likely category, or a sample; ``draw``: its standard-exponential noise (else drawn here)."""
    if deterministic:
        return logits.argmax(-1)
    # Gumbel-max: an exact categorical sample without building a distribution object.
    gumbel = -(torch.empty_like(logits).exponential_() if draw is None else draw).log()
    return (logits + gumbel).argmax(-1)


def _entropy(log_p: torch.Tensor) -> torch.Tensor:
    return -(log_p.exp() * log_p).sum(-1)


def add_up(terms: Iterable[torch.Tensor]) -> torch.Tensor:
    """``terms[0] + terms[1] + ...``, added in order (a running total: the sub-actions' log-probs,
    entropies or KLs, the same numbers as a loop from 0.0 gives)."""
    total: torch.Tensor | None = None
    for term in terms:
        total = term if total is None else total + term
    if total is None:
        raise ValueError("add_up: no terms")
    return total


class CategoricalHead(nn.Module):
    """Several independent categoricals: one for Discrete, one per sub-action for MultiDiscrete.

    ``avail`` is the concatenation of each sub-action's mask (1 = allowed).
    """

    def __init__(self, in_dim: int, sizes: list[int], gain: float = 0.01) -> None:
        super().__init__()
        self.sizes = list(sizes)
        self.action_dim = len(self.sizes)
        self.logits = init_linear(nn.Linear(in_dim, sum(self.sizes)), gain)

    def _log_probs(self, x: torch.Tensor, avail: torch.Tensor | None) -> list[torch.Tensor]:
        logits = _masked_logits(self.logits(x), avail)
        if self.action_dim == 1:
            return [torch.log_softmax(logits, -1)]
        return [torch.log_softmax(part, -1) for part in logits.split(self.sizes, -1)]

    def sample(self, x: torch.Tensor, avail: torch.Tensor | None,
               deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
        actions, log_probs = [], []
        for log_p in self._log_probs(x, avail):
            a = _categorical_sample(log_p, deterministic)
            actions.append(a)
            log_probs.append(log_p.gather(-1, a.unsqueeze(-1)))
        return torch.stack(actions, -1).float(), torch.cat(log_probs, -1)

    def evaluate(self, x: torch.Tensor, actions: torch.Tensor,
                 avail: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        index = actions.long()
        log_probs, entropies = [], []
        for j, log_p in enumerate(self._log_probs(x, avail)):
            log_probs.append(log_p.gather(-1, index[:, j : j + 1]))
            entropies.append(_entropy(log_p))
        return torch.cat(log_probs, -1), add_up(entropies)

    def distribution(self, x: torch.Tensor, avail: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        """The distribution's parameters: one ``(batch, n_j)`` table of masked logits per sub-action."""
        logits = _masked_logits(self.logits(x), avail)
        return (logits,) if self.action_dim == 1 else tuple(logits.split(self.sizes, -1))

    @staticmethod
    def kl(old: tuple[torch.Tensor, ...], new: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """``(batch,)`` KL(old || new) of two ``distribution`` outputs, summed over sub-actions."""
        terms = []
        for z0, z1 in zip(old, new):
            p0 = torch.log_softmax(z0, -1)
            terms.append((p0.exp() * (p0 - torch.log_softmax(z1, -1))).sum(-1))
        return add_up(terms)


def make_head(space: spaces.Space, in_dim: int, std_x_coef: float, std_y_coef: float,
              gain: float) -> ActionHead:
    """The head for a gymnasium action space (Box, Discrete, MultiDiscrete)."""
    if isinstance(space, spaces.Box):
        return GaussianHead(in_dim, int(np.prod(space.shape)), std_x_coef, std_y_coef, gain)
    if isinstance(space, spaces.Discrete):
        return CategoricalHead(in_dim, [int(space.n)], gain)
    if isinstance(space, spaces.MultiDiscrete):
        return CategoricalHead(in_dim, [int(n) for n in np.asarray(space.nvec).ravel()], gain)
    raise TypeError(f"unsupported action space {space!r} (expected Box, Discrete or MultiDiscrete)")


def avail_size(space: spaces.Space) -> int:
    """Width of the available-action mask for a space (0 for Box: it has none)."""
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.asarray(space.nvec).sum())
    return 0


def action_width(space: spaces.Space) -> int:
    """Columns of the stored action: Box dimensions, 1 for Discrete, sub-actions for MultiDiscrete."""
    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape))
    if isinstance(space, spaces.Discrete):
        return 1
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.asarray(space.nvec).size)
    raise TypeError(f"unsupported action space {space!r} (expected Box, Discrete or MultiDiscrete)")
