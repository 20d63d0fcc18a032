"""Soft actor-critic for one agent (HASAC in the sequential updater).

Agent i samples a fresh action with a reparameterised gradient (tanh-squashed Gaussian
for Box, straight-through Gumbel-softmax one-hot for Discrete / MultiDiscrete) and
maximises the soft value with the others' actions as the updater hands them over (fresh
samples of the current policies; predecessors already updated in the sequential updater)::

    loss_i = mean_alive[ alpha_i log pi_i(a_i | o_i) - min(Q1, Q2)(s, a_1, .., a_i, .., a_n) ]

Each agent has its own temperature alpha_i, fixed or learned (from alpha = 1, log alpha = 0,
as HARL) toward a target entropy::

    loss(log alpha_i) = -mean_alive[ log alpha_i * (log pi_i(a_i) + target_entropy_i) ]

The default targets are HARL's (``default_target_entropy``): ``-dim`` for a Box, meant in
tanh space, and ``-0.98 log(1 / prod(shape))`` for categories, which is 0 for a Discrete
space (shape ``()``). The critic's soft target subtracts ``alpha_c sum_i log pi_i(a'_i | o'_i)``
with HARL's separate critic temperature ``alpha_c`` (``critic_alpha = "separate"``, see
``critic_temperature``) or ``sum_i alpha_i log pi_i`` (``"agents"``).
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
from harl.policy.off_policy import (
    SQUASHES,
    CategoricalActor,
    KeptForward,
    OffPolicyActors,
    SquashedGaussianActor,
    policy_builder,
    squash_range,
)
from harl.policy.on_policy import PolicyConfig, describe_space
from harl.registry import register
from harl.settings import in_range, kind_field, one_of, positive, setting
from harl.update.common import masked_mean, optimizer_step
from harl.update.objectives.sac_temperature import CriticTemperature, critic_temperature
from harl.update.q_critic import QCritic, agent_value


@attrs.frozen
class SACConfig:
    """``[updater.objective] kind = "sac"``: stochastic actor, per-agent entropy temperature."""

    kind: str = kind_field("sac")
    lr: float = setting(5e-4, "actor Adam learning rate", positive())
    alpha: float = setting(0.2, "entropy temperature when auto_alpha is false", positive())
    auto_alpha: bool = setting(True, "learn each agent's temperature toward its target entropy")
    initial_alpha: float = setting(1.0, "starting temperature when auto_alpha (HARL: 1, log alpha = 0)", positive())
    alpha_lr: float = setting(3e-4, "Adam learning rate of log(alpha)", positive())
    target_entropy: float | None = setting(
        None, "target entropy per agent (default HARL's: -dim in tanh space for Box, 0 for Discrete)")
    critic_alpha: str = setting(
        "separate", "temperature of the critic's soft target: separate (HARL: its own, learned toward the sum "
        "of the agents' targets) or agents (sum_i alpha_i log pi_i)", one_of(("separate", "agents")))
    max_grad_norm: float = setting(0.0, "gradient-norm clip; 0 disables", in_range(0, None))
    squash: str = setting(
        "bounds", "where a Box actor's tanh(u) goes: bounds (centre + half-range * tanh(u), always inside the "
        "Box) or act_limit (HARL: high[0] * tanh(u), the env clips the rest; on MPE's [0, 1] Box the "
        "negative half of tanh's range acts as 0)", one_of(SQUASHES))


def default_target_entropy(space: spaces.Space, squash: str = "bounds") -> float:
    """HARL's target, in the units of this actor's log pi.

    HARL: ``-prod(shape)`` for a Box, ``-0.98 log(1 / prod(shape))`` otherwise (0 for a
    Discrete, whose shape is ``()``; ``0.98 log k`` per sub-action for a MultiDiscrete of k,
    whose k log-prob columns HARL's loss averages).  The Box target is meant in tanh space:
    this actor's log pi also holds the scaling's ``-sum log(scale)`` (``squash_range``), so that
    term is added to the target.  A MultiDiscrete's log pi here is the sum of its k columns, hence k times.
    """
    shape = space.shape or ()
    harl = -float(np.prod(shape)) if isinstance(space, spaces.Box) else -0.98 * math.log(1.0 / float(np.prod(shape)))
    if isinstance(space, spaces.Box):
        _, scale = squash_range(space, squash)
        return harl + float(scale.double().log().sum())
    return harl * float(np.prod(shape))


def make_actor(obs_dim: int, space: spaces.Space, policy: PolicyConfig, config: SACConfig, agent: int,
               source: str, encoder: nn.Module | None = None) -> nn.Module:
    if isinstance(space, spaces.Box):
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise ConfigError(
                f'{source}: updater.objective.kind: "sac" squashes actions into the Box bounds, but '
                f"agent {agent}'s Box is unbounded; bound the env's action space"
            )
        if config.squash == "act_limit" and not (limit := float(squash_range(space, "act_limit")[1][0])) > 0:
            raise ConfigError(
                f'{source}: updater.objective.squash: "act_limit" scales tanh by the Box\'s high[0], which is '
                f"{limit:g} for agent {agent}; use squash = \"bounds\""
            )
        return SquashedGaussianActor(obs_dim, space, policy.hidden_sizes, policy.activation, policy.input_norm,
                                     encoder, config.squash)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        return CategoricalActor(obs_dim, space, policy.hidden_sizes, policy.activation, policy.input_norm,
                                policy.output_gain, encoder)
    raise ConfigError(f"{source}: updater.objective.kind: \"sac\" cannot drive agent {agent}'s {describe_space(space)}")


def alpha_loss(log_alpha: torch.Tensor, log_probs: torch.Tensor, target_entropy: float,
               mask: torch.Tensor) -> torch.Tensor:
    """``-mean[log alpha (log pi + target)]``: alpha grows when the entropy is below target."""
    return -masked_mean(log_alpha * (log_probs.detach() + target_entropy), mask)


class SACLearner:
    """One agent's SAC actor and temperature."""

    stat_names = ("actor_loss", "alpha", "entropy")
    reduce = "min"
    """The critic value the actor maximises: the twins' minimum (``agent_value``)."""

    def __init__(self, index: int, policy: OffPolicyActors, critic: QCritic, config: SACConfig,
                 target_entropy: float, critic_temp: CriticTemperature | None = None) -> None:
        self.index = index
        self.actor: SquashedGaussianActor | CategoricalActor = policy.actors[index]  # type: ignore[assignment]
        self.critic = critic
        self.config = config
        self.target_entropy = target_entropy
        self.optimizer = torch.optim.Adam(self.actor.parameters(), lr=config.lr, foreach=True)
        self.base_lr = config.lr
        device = next(self.actor.parameters()).device
        start = config.initial_alpha if config.auto_alpha else config.alpha
        self.log_alpha = torch.tensor(math.log(start), device=device, requires_grad=config.auto_alpha)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=config.alpha_lr) if config.auto_alpha else None
        self.round_start = KeptForward(self.actor)
        self.critic_temp = critic_temp
        """HARL's critic temperature (``critic_alpha = "separate"``), shared by the team's learners."""

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    @torch.no_grad()
    def next_action(self, batch: ReplayBatch) -> tuple[torch.Tensor, torch.Tensor]:
        action, log_prob = self.actor.rsample(batch.next_obs[self.index], batch.next_avail[self.index])
        return action, self.penalty(log_prob)

    def penalty(self, log_prob: torch.Tensor) -> torch.Tensor:
        """The critic target's entropy term of this agent's next action: ``alpha log pi``, with the
        critic's own temperature under ``critic_alpha = "separate"``."""
        return (self.alpha if self.critic_temp is None else self.critic_temp.alpha) * log_prob

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
        obs = batch.obs[i]
        params = self.round_start.take(obs, lambda: self.actor.distribution(obs, batch.avail[i]))
        joint = list(actions)
        joint[i], log_prob = self.actor.sample(params)
        loss = self.actor_loss(agent_value(self.critic, batch, joint, i, self.reduce), log_prob, batch)
        optimizer_step(self.optimizer, loss, self.actor.parameters(), self.config.max_grad_norm)
        return self.after_step(loss, log_prob, batch)

    def actor_loss(self, q: torch.Tensor, log_prob: torch.Tensor, batch: ReplayBatch) -> torch.Tensor:
        """``mean_alive[alpha log pi - Q]`` of this agent's fresh sample (``q``, ``log_prob`` (B,))."""
        return masked_mean(self.alpha * log_prob - q, batch.active[:, self.index])

    def after_step(self, loss: torch.Tensor, log_prob: torch.Tensor, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        """After the actor step: the temperature's step (and the critic temperature's report), then
        the stats."""
        alive = batch.active[:, self.index]
        if self.alpha_optimizer is not None:
            optimizer_step(self.alpha_optimizer, alpha_loss(self.log_alpha, log_prob, self.target_entropy, alive))
        if self.critic_temp is not None:
            self.critic_temp.observe(self.index, log_prob.detach())
        return {"actor_loss": loss.detach(), "alpha": self.alpha, "entropy": -masked_mean(log_prob.detach(), alive)}

    @torch.no_grad()
    def updated_action(self, batch: ReplayBatch, actions: list[torch.Tensor]) -> torch.Tensor:
        return self.actor.rsample(batch.obs[self.index], batch.avail[self.index])[0]

    def soft_update(self) -> None:
        """SAC's actor has no target copy (the critic's targets are updated by the updater)."""

    def state_dict(self) -> dict[str, Any]:
        state = {"optimizer": self.optimizer.state_dict(), "log_alpha": self.log_alpha.detach().clone(),
                 "alpha_optimizer": None if self.alpha_optimizer is None else self.alpha_optimizer.state_dict()}
        if self.critic_temp is not None and self.index == 0:  # agent 0 carries the team's critic temperature
            state["critic_temperature"] = self.critic_temp.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        if self.alpha_optimizer is not None and state["alpha_optimizer"] is not None:
            self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        if self.critic_temp is not None and "critic_temperature" in state:
            self.critic_temp.load_state_dict(state["critic_temperature"])


def make_learner(index: int, policy: OffPolicyActors, critic: QCritic, config: SACConfig,
                 space: spaces.Space, shared: dict[str, Any]) -> SACLearner:
    """Agent ``index``'s learner; ``shared`` carries what the team's learners share (one dict per team)."""
    def target(s: spaces.Space) -> float:
        return config.target_entropy if config.target_entropy is not None else default_target_entropy(s, config.squash)

    temperature = None
    if config.critic_alpha == "separate":
        start = config.initial_alpha if config.auto_alpha else config.alpha
        temperature = critic_temperature(shared, critic, start, config.alpha_lr if config.auto_alpha else None,
                                           sum(target(s) for s in critic.spaces))
    return SACLearner(index, policy, critic, config, target(space), temperature)


register("updater.objective", SACConfig, family="off_policy", requires={"critic": "q_values"},
         factory=lambda config, parts, agent: make_learner(agent, parts.policy, parts.critic, config,
                                                           parts.act_spaces[agent], parts.shared),
         policy=policy_builder(make_actor, with_targets=False))
