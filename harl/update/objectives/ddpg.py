"""DDPG for one agent (HADDPG in the sequential updater, MADDPG in the simultaneous one).

A deterministic actor ``mu_i(o_i)`` (tanh, scaled to the Box) maximises the centralised
critic's ``Q(s, a_1..a_n)`` with its own fresh action and the others' actions as the
updater hands them over (already updated predecessors in the sequential updater)::

    loss_i = -mean_alive Q(s, a_1, .., mu_i(o_i), .., a_n)

The critic's target takes every agent's target-actor action at the bootstrap state.
Exploration adds Gaussian noise of std ``expl_noise`` x half the action range.
TD3 (``td3.py``) is this learner with target smoothing and delayed updates.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from harl.buffers.replay import ReplayBatch
from harl.errors import ConfigError
from harl.policy.off_policy import DeterministicActor, KeptForward, OffPolicyActors, policy_builder
from harl.policy.on_policy import PolicyConfig, describe_space
from harl.registry import register
from harl.settings import in_range, kind_field, positive, setting
from harl.update.common import masked_mean, optimizer_step, polyak_update
from harl.update.q_critic import QCritic, agent_value


@attrs.frozen
class DDPGConfig:
    """``[updater.objective] kind = "ddpg"``: deterministic actor, exploration noise, target actor."""

    kind: str = kind_field("ddpg")
    lr: float = setting(5e-4, "actor Adam learning rate", positive())
    expl_noise: float = setting(0.1, "exploration noise std, in units of half the action range", in_range(0, None))
    polyak: float = setting(0.005, "target-actor update rate (the target critics': [critic] polyak)",
                            in_range(0, 1, low_open=True))
    max_grad_norm: float = setting(0.0, "gradient-norm clip; 0 disables", in_range(0, None))


def require_bounded_box(space: spaces.Space, agent: int, kind: str, source: str) -> spaces.Box:
    """The space as a Box with finite bounds, or a ConfigError saying what to use instead."""
    if not isinstance(space, spaces.Box):
        raise ConfigError(
            f'{source}: updater.objective.kind: "{kind}" needs Box actions, but agent {agent} has '
            f'{describe_space(space)}; use kind = "sac" (any space) or "d3qn" (Discrete)'
        )
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        raise ConfigError(
            f'{source}: updater.objective.kind: "{kind}" scales a tanh output into the action '
            f"bounds, but agent {agent}'s Box is unbounded; bound the env's action space"
        )
    return space


def make_actor(obs_dim: int, space: spaces.Space, policy: PolicyConfig, config: Any, agent: int,
               source: str, encoder: nn.Module | None = None) -> nn.Module:
    box = require_bounded_box(space, agent, config.kind, source)
    return DeterministicActor(obs_dim, box, policy.hidden_sizes, policy.activation, policy.input_norm,
                              config.expl_noise, encoder)


def smoothed_target_actions(actions: torch.Tensor, centre: torch.Tensor, half: torch.Tensor,
                            policy_noise: float, noise_clip: float,
                            noise: torch.Tensor | None = None) -> torch.Tensor:
    """TD3's target smoothing: ``clip(a + clip(eps, -c, c), low, high)``, eps ~ N(0, sigma).

    ``policy_noise`` (sigma) and ``noise_clip`` (c) are in units of half the action range;
    ``noise`` (standard normal, same shape as ``actions``) may be passed for tests.
    """
    eps = torch.randn_like(actions) if noise is None else noise
    eps = (eps * policy_noise * half).clamp(-noise_clip * half, noise_clip * half)
    return torch.maximum(torch.minimum(actions + eps, centre + half), centre - half)


class DeterministicLearner:
    """One agent's DDPG/TD3 actor update; ``smoothing`` = (policy_noise, noise_clip) for TD3."""

    stat_names = ("actor_loss",)
    reduce = "first"
    """The critic value the actor maximises: the first network's (``agent_value``)."""

    def __init__(self, index: int, policy: OffPolicyActors, critic: QCritic, config: Any,
                 smoothing: tuple[float, float] | None = None) -> None:
        self.index = index
        self.actor: DeterministicActor = policy.actors[index]  # type: ignore[assignment]
        assert policy.targets is not None
        self.target: DeterministicActor = policy.targets[index]  # type: ignore[assignment]
        self.critic = critic
        self.config = config
        self.smoothing = smoothing
        self.optimizer = torch.optim.Adam(self.actor.parameters(), lr=config.lr, foreach=True)
        self.base_lr = config.lr
        self.round_start = KeptForward(self.actor)

    @torch.no_grad()
    def next_action(self, batch: ReplayBatch) -> tuple[torch.Tensor, None]:
        return self.smoothed(self.target(batch.next_obs[self.index])), None

    def smoothed(self, action: torch.Tensor) -> torch.Tensor:
        """The target actor's action as the critic's target takes it: TD3's smoothing noise added
        (any leading axes: a stack of target actors' too), DDPG's as it is."""
        if self.smoothing is None:
            return action
        return smoothed_target_actions(action, self.target.centre, self.target.half_range, *self.smoothing)

    def initial_action(self, batch: ReplayBatch) -> torch.Tensor:
        """The current action (its graph kept for this agent's own loss)."""
        obs = batch.obs[self.index]
        action = self.actor(obs)
        self.round_start.keep(obs, action)
        return action.detach()

    def update(self, batch: ReplayBatch, actions: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        i = self.index
        obs = batch.obs[i]
        joint = list(actions)
        joint[i] = self.round_start.take(obs, lambda: self.actor(obs))
        loss = self.actor_loss(agent_value(self.critic, batch, joint, i, self.reduce), None, batch)
        optimizer_step(self.optimizer, loss, self.actor.parameters(), self.config.max_grad_norm)
        return self.after_step(loss, None, batch)

    def actor_loss(self, q: torch.Tensor, log_prob: None, batch: ReplayBatch) -> torch.Tensor:
        """``-mean_alive Q`` of this agent's fresh action (``q`` (B,))."""
        return -masked_mean(q, batch.active[:, self.index])

    def after_step(self, loss: torch.Tensor, log_prob: None, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        """The stats of an actor step just taken."""
        return {"actor_loss": loss.detach()}

    @torch.no_grad()
    def updated_action(self, batch: ReplayBatch, actions: list[torch.Tensor]) -> torch.Tensor:
        return self.actor(batch.obs[self.index])

    def soft_update(self) -> None:
        polyak_update(self.target, self.actor, self.config.polyak)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])


def make_learner(index: int, policy: OffPolicyActors, critic: QCritic, config: DDPGConfig,
                 space: spaces.Space) -> DeterministicLearner:
    return DeterministicLearner(index, policy, critic, config)


register("updater.objective", DDPGConfig, family="off_policy", requires={"critic": "q_values"},
         factory=lambda config, parts, agent: make_learner(agent, parts.policy, parts.critic, config,
                                                           parts.act_spaces[agent]),
         policy=policy_builder(make_actor, with_targets=True))
