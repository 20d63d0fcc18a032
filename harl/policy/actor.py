"""The team's actors: one MLP + action head per agent (or one shared by all)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from harl.errors import ConfigError
from harl.policy.heads import make_head
from harl.policy.networks import ACTIVATIONS, MLP
from harl.settings import each_positive, in_range, one_of, positive, setting


@attrs.frozen
class PolicyConfig:
    """``[policy]``: the actors' networks."""

    hidden_sizes: tuple[int, ...] = setting((128, 128), "widths of the hidden layers", each_positive())
    activation: str = setting("relu", "hidden activation", one_of(ACTIVATIONS))
    input_norm: bool = setting(True, "LayerNorm on the raw observation (HARL's feature normalisation)")
    std_x_coef: float = setting(1.0, "Gaussian std = sigmoid(p / std_x_coef) * std_y_coef; p starts at std_x_coef", positive())
    std_y_coef: float = setting(0.5, "upper bound of the Gaussian std", positive())
    output_gain: float = setting(0.01, "orthogonal-init gain of the action layer (small: near-uniform start)", in_range(0, None, low_open=True))
    share_parameters: bool = setting(False, "one actor for all agents (needs identical spaces)")


class Actor(nn.Module):
    """Observation -> action distribution for one agent."""

    def __init__(self, obs_dim: int, action_space: spaces.Space, config: PolicyConfig) -> None:
        super().__init__()
        self.base = MLP(obs_dim, config.hidden_sizes, config.activation, config.input_norm)
        self.head = make_head(action_space, self.base.out_dim, config.std_x_coef,
                              config.std_y_coef, config.output_gain)

    def act(self, obs: torch.Tensor, avail: torch.Tensor | None,
            deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head.sample(self.base(obs), avail, deterministic)

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor,
                 avail: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head.evaluate(self.base(obs), actions, avail)


def describe_space(space: spaces.Space) -> str:
    if isinstance(space, spaces.Box):
        return f"Box{tuple(space.shape)}"
    if isinstance(space, spaces.Discrete):
        return f"Discrete({int(space.n)})"
    if isinstance(space, spaces.MultiDiscrete):
        return f"MultiDiscrete({np.asarray(space.nvec).tolist()})"
    return repr(space)


def _same_space(a: spaces.Space, b: spaces.Space) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, spaces.Box):
        return a.shape == b.shape and bool(np.all(a.low == b.low) and np.all(a.high == b.high))
    return a == b


class TeamPolicy(nn.Module):
    """All agents' actors, indexed by agent; a shared actor appears once per agent."""

    def __init__(self, observation_spaces: Sequence[spaces.Box],
                 action_spaces: Sequence[spaces.Space], config: PolicyConfig) -> None:
        super().__init__()
        self.n_agents = len(action_spaces)
        dims = [int(np.prod(s.shape)) for s in observation_spaces]
        if config.share_parameters:
            differ = [i for i in range(1, self.n_agents)
                      if dims[i] != dims[0] or not _same_space(action_spaces[i], action_spaces[0])]
            if differ:
                i = differ[0]
                raise ConfigError(
                    "policy.share_parameters: the agents' spaces differ (agent 0: obs "
                    f"({dims[0]},), {describe_space(action_spaces[0])}; agent {i}: obs ({dims[i]},), "
                    f"{describe_space(action_spaces[i])}), so one actor cannot serve them all; "
                    "set share_parameters = false"
                )
            shared = Actor(dims[0], action_spaces[0], config)
            self.actors = nn.ModuleList([shared])
            self.index = [0] * self.n_agents
        else:
            self.actors = nn.ModuleList(Actor(d, s, config) for d, s in zip(dims, action_spaces))
            self.index = list(range(self.n_agents))
        self.shared = config.share_parameters

    def actor(self, agent: int) -> Actor:
        return self.actors[self.index[agent]]  # type: ignore[return-value]

    @torch.no_grad()
    def act(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
            deterministic: bool = False) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        actions, log_probs = [], []
        for i in range(self.n_agents):
            a, lp = self.actor(i).act(obs[i], None if avail is None else avail[i], deterministic)
            actions.append(a)
            log_probs.append(lp)
        return actions, log_probs
