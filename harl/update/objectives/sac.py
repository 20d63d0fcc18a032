"""Soft actor-critic for one agent (HASAC in the sequential updater).

Agent i samples a fresh action with a reparameterised gradient (tanh-squashed Gaussian
for Box, straight-through Gumbel-softmax one-hot for Discrete / MultiDiscrete) and
maximises the soft value with the others' actions as the updater hands them over (fresh
samples of the current policies; predecessors already updated in the sequential updater)::

    loss_i = mean_alive[ alpha_i log pi_i(a_i | o_i) - min(Q1, Q2)(s, a_1, .., a_i, .., a_n) ]

Each agent has its own temperature alpha_i, fixed or learned toward a target entropy
(``-dim`` for Box, ``0.98 log |A|`` summed over sub-actions for categories)::

    loss(log alpha_i) = -mean_alive[ log alpha_i * (log pi_i(a_i) + target_entropy_i) ]

The critic's soft target subtracts ``sum_i alpha_i log pi_i(a'_i | o'_i)`` at the bootstrap
state.  (HARL keeps one more temperature for that target, tuned toward the sum of the
agents' targets; summing the agents' own terms is the soft value of the joint policy.
HARL's discrete target entropy evaluates to 0 because a Discrete space's shape is ();
the 0.98 log |A| it intends is used here.)
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from harl.buffers.replay import ReplayBatch
from harl.errors import ConfigError
from harl.policy.actor import PolicyConfig, describe_space
from harl.policy.off_policy import (
    CategoricalActor,
    KeptForward,
    OffPolicyTeam,
    SquashedGaussianActor,
    team_builder,
)
from harl.registry import register
from harl.settings import in_range, kind_field, positive, setting
from harl.update.common import clip_grads, masked_mean
from harl.update.q_critic import QCritic, team_value


@attrs.frozen
class SACConfig:
    """``[updater.objective] kind = "sac"``: stochastic actor, per-agent entropy temperature."""

    kind: str = kind_field("sac")
    lr: float = setting(5e-4, "actor Adam learning rate", positive())
    alpha: float = setting(0.2, "entropy temperature (the starting value when auto_alpha)", positive())
    auto_alpha: bool = setting(True, "learn each agent's temperature toward its target entropy")
    alpha_lr: float = setting(3e-4, "Adam learning rate of log(alpha)", positive())
    target_entropy: float | None = setting(None, "target entropy per agent (default: -dim for Box, 0.98 log|A| for categories)")
    max_grad_norm: float = setting(0.0, "gradient-norm clip; 0 disables", in_range(0, None))


def default_target_entropy(space: spaces.Space) -> float:
    if isinstance(space, spaces.Box):
        return -float(np.prod(space.shape))
    if isinstance(space, spaces.Discrete):
        return 0.98 * math.log(int(space.n))
    return 0.98 * float(sum(math.log(int(n)) for n in np.asarray(space.nvec).ravel()))


def make_actor(obs_dim: int, space: spaces.Space, policy: PolicyConfig, config: SACConfig, agent: int,
               source: str) -> nn.Module:
    if isinstance(space, spaces.Box):
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise ConfigError(
                f'{source}: updater.objective.kind: "sac" squashes actions into the Box bounds, but '
                f"agent {agent}'s Box is unbounded; bound the env's action space"
            )
        return SquashedGaussianActor(obs_dim, space, policy.hidden_sizes, policy.activation, policy.input_norm)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        return CategoricalActor(obs_dim, space, policy.hidden_sizes, policy.activation, policy.input_norm,
                                policy.output_gain)
    raise ConfigError(f"{source}: updater.objective.kind: \"sac\" cannot drive agent {agent}'s {describe_space(space)}")


def alpha_loss(log_alpha: torch.Tensor, log_probs: torch.Tensor, target_entropy: float,
               mask: torch.Tensor) -> torch.Tensor:
    """``-mean[log alpha (log pi + target)]``: alpha grows when the entropy is below target."""
    return -masked_mean(log_alpha * (log_probs.detach() + target_entropy), mask)


class SACLearner:
    """One agent's SAC actor and temperature."""

    stat_names = ("actor_loss", "alpha", "entropy")

    def __init__(self, index: int, team: OffPolicyTeam, critic: QCritic, config: SACConfig,
                 target_entropy: float) -> None:
        self.index = index
        self.actor: SquashedGaussianActor | CategoricalActor = team.actors[index]  # type: ignore[assignment]
        self.critic = critic
        self.config = config
        self.target_entropy = target_entropy
        self.optimizer = torch.optim.Adam(self.actor.parameters(), lr=config.lr, foreach=True)
        self.base_lr = config.lr
        device = next(self.actor.parameters()).device
        self.log_alpha = torch.tensor(math.log(config.alpha), device=device, requires_grad=config.auto_alpha)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=config.alpha_lr) if config.auto_alpha else None
        self.round_start = KeptForward(self.actor)

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    @torch.no_grad()
    def next_action(self, batch: ReplayBatch) -> tuple[torch.Tensor, torch.Tensor]:
        action, log_prob = self.actor.rsample(batch.next_obs[self.index], batch.next_avail[self.index])
        return action, self.alpha * log_prob

    def initial_action(self, batch: ReplayBatch) -> torch.Tensor:
        """A sample of the current policy; the distribution's graph is kept for this agent's own loss,
        which draws a fresh sample from it."""
        obs = batch.obs[self.index]
        params = self.actor.distribution(obs, batch.avail[self.index])
        self.round_start.keep(obs, params)
        with torch.no_grad():
            return self.actor.sample(params)[0]

    def update(self, batch: ReplayBatch, actions: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        i = self.index
        alive = batch.active[:, i]
        obs = batch.obs[i]
        params = self.round_start.take(obs, lambda: self.actor.distribution(obs, batch.avail[i]))
        joint = list(actions)
        joint[i], log_prob = self.actor.sample(params)
        q = team_value(self.critic, batch.state, joint, "min")
        loss = masked_mean(self.alpha * log_prob - q, alive)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.max_grad_norm > 0:
            clip_grads(self.actor.parameters(), self.config.max_grad_norm)
        self.optimizer.step()
        if self.alpha_optimizer is not None:
            self.alpha_optimizer.zero_grad(set_to_none=True)
            alpha_loss(self.log_alpha, log_prob, self.target_entropy, alive).backward()
            self.alpha_optimizer.step()
        return {"actor_loss": loss.detach(), "alpha": self.alpha, "entropy": -masked_mean(log_prob.detach(), alive)}

    @torch.no_grad()
    def updated_action(self, batch: ReplayBatch, actions: list[torch.Tensor]) -> torch.Tensor:
        return self.actor.rsample(batch.obs[self.index], batch.avail[self.index])[0]

    def soft_update(self) -> None:
        """SAC's actor has no target copy (the critic's targets are updated by the updater)."""

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "log_alpha": self.log_alpha.detach().clone(),
                "alpha_optimizer": None if self.alpha_optimizer is None else self.alpha_optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        if self.alpha_optimizer is not None and state["alpha_optimizer"] is not None:
            self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])


def make_learner(index: int, team: OffPolicyTeam, critic: QCritic, config: SACConfig,
                 space: spaces.Space) -> SACLearner:
    target = config.target_entropy if config.target_entropy is not None else default_target_entropy(space)
    return SACLearner(index, team, critic, config, target)


register("updater.objective", SACConfig, family="off_policy", requires={"critic": "q_values"},
         factory=lambda config, parts, agent: make_learner(agent, parts.team, parts.critic, config,
                                                           parts.act_spaces[agent]),
         team=team_builder(make_actor, with_targets=False))
