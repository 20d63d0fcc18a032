"""The value family's ``[critic]``: how the agents' chosen Q values make the team's.

::

    mixer(q, state)     q (B, T, A): each agent's Q of its action; state (B, T, S)
      none  -> (B, T, A)  IQL: every agent learns its own Q on the team reward
      vdn   -> (B, T, 1)  Q_tot = sum_i Q_i
      qmix  -> (B, T, 1)  Q_tot = f_s(Q_1, ..., Q_A), monotonic in every Q_i

QMIX's mixer is a two-layer network over the agents' Qs whose weights are made from the
global state by hypernetworks and forced non-negative by ``abs`` (so dQ_tot/dQ_i >= 0 and the
per-agent argmaxes are the joint argmax): ``hidden = elu(q W1(s) + b1(s))``,
``Q_tot = hidden W2(s) + V(s)``.  Sizes as EPyMARL's ``QMixer``: ``mixing_embed_dim`` 32,
``hypernet_layers`` 2 with ``hypernet_embed`` 64, ``V(s)`` a ReLU layer of ``mixing_embed_dim``.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch
from torch import nn

from harl.registry import register
from harl.settings import in_range, kind_field, positive, setting


@attrs.frozen
class NoMixerConfig:
    """``[critic] kind = "none"``: no mixer (IQL): each agent's Q is trained on the team reward."""

    kind: str = kind_field("none")


@attrs.frozen
class VDNConfig:
    """``[critic] kind = "vdn"``: Q_tot is the sum of the agents' Qs (VDN)."""

    kind: str = kind_field("vdn")


@attrs.frozen
class QMixConfig:
    """``[critic] kind = "qmix"``: QMIX's monotonic mixer, weights from the state by hypernetworks."""

    kind: str = kind_field("qmix")
    mixing_embed_dim: int = setting(32, "width of the mixing layer (EPyMARL's mixing_embed_dim)", positive())
    hypernet_layers: int = setting(2, "layers of the hypernetworks that make the mixing weights: 1 (linear) or 2",
                                   in_range(1, 2))
    hypernet_embed: int = setting(64, "hidden width of 2-layer hypernetworks (EPyMARL's hypernet_embed)", positive())


class NoMixer(nn.Module):
    """IQL: the agents' Qs as they are, one target per agent."""

    mixes = False

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return q


class VDNMixer(nn.Module):
    """VDN: ``Q_tot = sum_i Q_i``."""

    mixes = True

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return q.sum(-1, keepdim=True)


def _hypernet(state_dim: int, out: int, layers: int, embed: int) -> nn.Module:
    if layers == 1:
        return nn.Linear(state_dim, out)
    return nn.Sequential(nn.Linear(state_dim, embed), nn.ReLU(), nn.Linear(embed, out))


class QMixer(nn.Module):
    """QMIX's mixer (see the module docstring)."""

    mixes = True

    def __init__(self, n_agents: int, state_dim: int, embed_dim: int = 32, hypernet_layers: int = 2,
                 hypernet_embed: int = 64) -> None:
        super().__init__()
        self.n_agents, self.state_dim, self.embed_dim = n_agents, state_dim, embed_dim
        self.hyper_w1 = _hypernet(state_dim, embed_dim * n_agents, hypernet_layers, hypernet_embed)
        self.hyper_w2 = _hypernet(state_dim, embed_dim, hypernet_layers, hypernet_embed)
        self.hyper_b1 = nn.Linear(state_dim, embed_dim)
        self.value = nn.Sequential(nn.Linear(state_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, 1))

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``q`` (..., A), ``state`` (..., S) -> Q_tot (..., 1)."""
        lead = q.shape[:-1]
        s = state.reshape(-1, self.state_dim).float()
        qs = q.reshape(-1, 1, self.n_agents)
        w1 = self.hyper_w1(s).abs().view(-1, self.n_agents, self.embed_dim)
        b1 = self.hyper_b1(s).view(-1, 1, self.embed_dim)
        hidden = nn.functional.elu(torch.bmm(qs, w1) + b1)
        w2 = self.hyper_w2(s).abs().view(-1, self.embed_dim, 1)
        total = torch.bmm(hidden, w2) + self.value(s).view(-1, 1, 1)
        return total.view(*lead, 1)


def make_mixer(config: Any, n_agents: int, state_dim: int) -> nn.Module:
    """The mixer a ``[critic]`` config of this module names."""
    if isinstance(config, QMixConfig):
        return QMixer(n_agents, state_dim, config.mixing_embed_dim, config.hypernet_layers, config.hypernet_embed)
    if isinstance(config, VDNConfig):
        return VDNMixer()
    return NoMixer()


def _mixer(config: Any, parts: Any) -> nn.Module:
    return make_mixer(config, parts.n_agents, parts.state_dim)


register("critic", NoMixerConfig, _mixer, family=("value", "pqn"), provides=("mixer",))  # PQN-IQL's too
register("critic", VDNConfig, _mixer, family=("value", "pqn"), provides=("mixer",))  # PQN-VDN's too
register("critic", QMixConfig, _mixer, family="value", provides=("mixer",))
