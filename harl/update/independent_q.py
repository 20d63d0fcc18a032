"""Independent action-value critics of the off-policy family: Q_i(o_i, a_i), one per agent.

``[critic] kind = "independent_q"`` gives each agent a Q function of its own observation and
its own action only (single or ``twin``), so ISAC is ``sac`` + this critic + ``simultaneous``,
IDDPG ``ddpg`` likewise, and independent TD3 ``td3`` with ``twin = true``.  Agent i's actor
maximises Q_i alone, and Q_i's n-step target uses agent i's own reward and its own next
observation and action::

    y_i = R_i,n + discount * (min_k Q'_i,k(o'_i, a'_i) - penalty_i)
    a'_i = the agent's next action at o'_i (target actor, TD3's smoothing, or a SAC sample)
    penalty_i = alpha_i log pi_i(a'_i | o'_i)                (SAC; its critic_alpha = "agents")

- ``share_parameters = true``: one network (or twin pair) for all agents; its input is the
  agent's observation and action, each zero-padded to the widest, and its one-hot id
  (``agent_id``);
- ``share_parameters = false``: one network (or twin pair) per agent, on exactly its own
  ``obs_dim_i + action_width_i`` columns.

The TD loss is the sum over agents (and twins) of each agent's mean squared (or Huber) error
over the samples where it was alive, so with separate networks each agent's critic learns as
it would alone.  Target networks follow by Polyak averaging, as the centralised ``q``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.nn import functional as F

from harl.buffers.replay import ReplayBatch
from harl.nets.q import StackedMLP
from harl.registry import register
from harl.returns.value_norm import ValueNorm
from harl.settings import kind_field, one_of, own_first, setting
from harl.update.common import huber, polyak_update
from harl.update.independent_v import LOCAL, local_checks, obs_shapes
from harl.update.q_critic import (
    QLearningConfig,
    TDLearner,
    critic_action_width,
    normalized_targets,
    one_hot_actions,
    td_step,
    td_targets,
)


@attrs.frozen(field_transformer=own_first)
class IndependentQConfig(QLearningConfig):
    """``[critic] kind = "independent_q"``: Q_i(o_i, a_i) per agent on its own observation and action (ISAC, IDDPG)."""

    kind: str = kind_field("independent_q")
    state_type: str = setting(LOCAL, 'what the critic reads: "local" (each agent\'s own observation and action); '
                              'the global EP / FP states are critic.kind = "q"\'s', one_of((LOCAL, "EP", "FP")))
    share_parameters: bool = setting(True, "one network (or twin pair) for all agents, with agent_id, instead of one per agent")
    agent_id: bool = setting(True, "shared network: append the agent's one-hot id to its observation and action")


def independent_q_checks(config: IndependentQConfig, built: Mapping[str, Any]) -> Iterator[tuple[list[str], str]]:
    """A local state only; TD3 needs twins; SAC's soft targets take each agent's own temperature."""
    yield from local_checks(config, built)
    updater = built.get("updater")
    objective = getattr(updater, "objective", None)
    kind = getattr(objective, "kind", None)
    if kind == "td3" and not config.twin:
        yield (["critic", "twin"], "td3 takes the minimum of twin critics in its targets; set critic.twin = true "
               '(or updater.objective.kind = "ddpg")')
    if kind == "sac" and getattr(objective, "critic_alpha", None) == "separate":
        yield (["updater", "objective", "critic_alpha"],
               '"separate" learns one critic temperature for the sum of all agents\' log-probabilities, but '
               'critic.kind = "independent_q" gives each agent its own soft target, which takes that agent\'s '
               'own temperature; set updater.objective.critic_alpha = "agents"')


class IndependentQCritic(nn.Module):
    """Q_i(o_i, a_i) for every agent i; ``(k, B, A)`` raw outputs of the k (1 or 2) networks."""

    # registered buffers (register_buffer in __init__)
    agent_ids: torch.Tensor

    fp = True
    """One value per agent (as an FP-state critic's)."""

    def __init__(self, obs_spaces: Sequence[spaces.Space], action_spaces: Sequence[spaces.Space],
                 config: IndependentQConfig, source: str = "pipeline") -> None:
        super().__init__()
        self.config = config
        self.spaces = list(action_spaces)
        self.n_agents = len(self.spaces)
        self.obs_widths = [int(np.prod(s)) for s in obs_shapes(obs_spaces, "independent_q", source)]
        self.act_widths = [critic_action_width(s) for s in self.spaces]
        self.shared = config.share_parameters
        self.with_ids = self.shared and config.agent_id
        k = 2 if config.twin else 1
        if self.shared:
            widths = [max(self.obs_widths) + max(self.act_widths) + (self.n_agents if self.with_ids else 0)]
        else:
            widths = [o + a for o, a in zip(self.obs_widths, self.act_widths)]
        self.nets = nn.ModuleList(StackedMLP([w, *config.hidden_sizes, 1], config.activation, config.input_norm, k)
                                  for w in widths)
        self.targets = copy.deepcopy(self.nets)
        self.targets.requires_grad_(False)
        self.normalizer = ValueNorm() if config.value_norm else None
        self.register_buffer("agent_ids", torch.eye(self.n_agents))

    def encode(self, stored: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Buffer actions -> the critic's action format (one-hot for categories)."""
        return [one_hot_actions(a, s) for a, s in zip(stored, self.spaces)]

    def inputs(self, agent: int, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``(B, in)``: agent ``agent``'s observation and action (padded, with its id, for a shared network)."""
        obs = obs.reshape(obs.shape[0], -1).float()
        if not self.shared:
            return torch.cat([obs, action], -1)
        parts = [F.pad(obs, (0, max(self.obs_widths) - obs.shape[-1])),
                 F.pad(action, (0, max(self.act_widths) - action.shape[-1]))]
        if self.with_ids:
            parts.append(self.agent_ids[agent].expand(obs.shape[0], self.n_agents))
        return torch.cat(parts, -1)

    def net(self, agent: int, nets: nn.ModuleList | None = None) -> StackedMLP:
        group = self.nets if nets is None else nets
        return group[0 if self.shared else agent]  # type: ignore[return-value]

    def raw(self, obs: Sequence[torch.Tensor], actions: Sequence[torch.Tensor],
            nets: nn.ModuleList | None = None) -> torch.Tensor:
        """``(k, B, A)``: every agent's networks on its own observation and action (normalised units
        when value_norm is on)."""
        if self.shared:  # one call for all agents: (B, A, in)
            x = torch.stack([self.inputs(i, o, a) for i, (o, a) in enumerate(zip(obs, actions))], 1)
            return self.net(0, nets)(x).squeeze(-1)
        return torch.stack([self.net(i, nets)(self.inputs(i, o, a)).squeeze(-1)
                            for i, (o, a) in enumerate(zip(obs, actions))], -1)

    def _denormalize(self, q: torch.Tensor) -> torch.Tensor:
        return q if self.normalizer is None else self.normalizer.denormalize(q)

    def agent_value(self, obs: torch.Tensor, action: torch.Tensor, agent: int, reduce: str = "first") -> torch.Tensor:
        """``(B,)`` Q_agent(o, a) in env units for the agent's actor loss: the first network's, or the twins' min."""
        net, x = self.net(agent), self.inputs(agent, obs, action)
        if reduce == "first":
            return self._denormalize(net.one(x, 0).squeeze(-1))
        return self._denormalize(net(x).squeeze(-1).min(0).values)

    @torch.no_grad()
    def target_value(self, next_obs: Sequence[torch.Tensor], actions: Sequence[torch.Tensor]) -> torch.Tensor:
        """``(B, A)`` the target networks' value of each agent's next observation and action (min of twins)."""
        return self._denormalize(self.raw(next_obs, actions, self.targets).min(0).values)

    def soft_update(self, tau: float) -> None:
        polyak_update(self.targets, self.nets, tau)


class IndependentQLearner(TDLearner):
    """One TD step per call: each agent's networks toward its own targets."""

    per_agent_penalty = True
    """The updater hands over each agent's own entropy penalty ``(B, A)`` instead of their sum."""

    critic: IndependentQCritic
    config: IndependentQConfig

    def __init__(self, critic: IndependentQCritic, config: IndependentQConfig) -> None:
        super().__init__(critic, config)

    def update(self, batch: ReplayBatch, actions: Sequence[torch.Tensor], next_actions: Sequence[torch.Tensor],
               penalty: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """``actions``: the batch's actions in the critic's format; ``next_actions`` and ``penalty``
        (``(B, A)``, each agent's own) from the objectives."""
        critic, cfg = self.critic, self.config
        with torch.no_grad():
            target = td_targets(batch.returns, batch.discount, critic.target_value(batch.next_obs, next_actions),
                                penalty)  # (B, A): agent i's own reward, next observation and action
            target_n = normalized_targets(critic, target)
        predictions = critic.raw(batch.obs, actions)  # (k, B, A)
        mask = batch.active
        per_agent = (huber(target_n - predictions, cfg.huber_delta) * mask).sum(1) / mask.sum(0).clamp(min=1.0)
        loss = per_agent.sum()  # each agent's (and twin's) mean over its alive samples, summed
        return td_step(self.optimizer, critic, loss, predictions, target, cfg.max_grad_norm)


register("critic", IndependentQConfig, family="off_policy", provides=("q_values",), check=independent_q_checks,
         factory=lambda config, parts: IndependentQCritic(parts.obs_spaces, parts.act_spaces, config, parts.source),
         learner=lambda critic, config, parts: IndependentQLearner(critic, config))
