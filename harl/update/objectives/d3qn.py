"""Dueling double DQN for one agent (HAD3QN in the sequential updater).

Each agent has a dueling Q network ``Q_i(o_i, a_i)``; a ``joint_q`` critic scores joint
actions.  An actor round starts from every agent's own greedy action.  Agent i regresses
its Q value of its greedy action toward the critic's value of the current joint action,
then its slot becomes its *best response* under the critic, the others' actions fixed::

    loss_i = mean_alive (Q_i(o_i, a_i) - Q_joint(s, a_1, .., a_n))^2
    a_i <- argmax_b Q_joint(s, a_1, .., b, .., a_n)            (sequential updater only)

so later agents regress toward the value of a joint action their predecessors have
already improved (coordinate ascent on the critic).  The critic's target takes the target
agents' greedy actions at the bootstrap state and scores them with the target critic
(action selection and evaluation by different networks: the double-Q decoupling).
Exploration is epsilon-greedy, epsilon decaying linearly after warm-up, on ``[collector]``'s
schedule (``epsilon_start``, ``epsilon_finish``, ``epsilon_anneal_steps``, ``epsilon_coin``), where
the value family's collector keeps its own.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch
from gymnasium import spaces
from torch import nn

from harl.buffers.replay import ReplayBatch
from harl.collect.off_policy import EPSILON_KEYS, OffPolicyCollectorConfig
from harl.errors import ConfigError
from harl.nets.plain import OFF_POLICY_ACTIVATIONS, masked_argmax
from harl.policy.off_policy import DuelingQActor, KeptForward, OffPolicyActors, policy_builder
from harl.policy.on_policy import PolicyConfig, describe_space
from harl.registry import register
from harl.settings import each_positive, in_range, kind_field, one_of, positive, setting
from harl.update.common import masked_mean, optimizer_step, polyak_update
from harl.update.q_critic import JointQCritic


@attrs.frozen
class D3QNConfig:
    """``[updater.objective] kind = "d3qn"``: per-agent dueling Q, epsilon-greedy (Discrete actions)."""

    kind: str = kind_field("d3qn")
    lr: float = setting(5e-4, "Adam learning rate of each agent's Q network", positive())
    dueling_hidden_sizes: tuple[int, ...] = setting((128,), "hidden widths of the value and advantage streams", each_positive())
    dueling_activation: str = setting("hardswish", "activation of the value and advantage streams", one_of(OFF_POLICY_ACTIVATIONS))
    polyak: float = setting(0.005, "the target agent Q networks' update rate (the joint critic's: [critic] polyak)",
                            in_range(0, 1, low_open=True))
    max_grad_norm: float = setting(0.0, "gradient-norm clip; 0 disables", in_range(0, None))


COLLECTOR_EPSILON = tuple(attrs.fields_dict(OffPolicyCollectorConfig)[key].default for key in EPSILON_KEYS)
"""``[collector]``'s epsilon schedule by default: (start, finish, anneal steps, coin)."""


def make_actor(obs_dim: int, space: spaces.Space, policy: PolicyConfig, config: D3QNConfig, agent: int,
               source: str, warmup_steps: int = 0, encoder: nn.Module | None = None,
               epsilon: tuple[Any, ...] = COLLECTOR_EPSILON) -> nn.Module:
    """Agent ``agent``'s dueling Q network; ``epsilon``: ``[collector]``'s (start, finish, anneal steps, coin)."""
    if not isinstance(space, spaces.Discrete):
        raise ConfigError(
            f'{source}: updater.objective.kind: "d3qn" needs Discrete actions, but agent {agent} has '
            f'{describe_space(space)}; use kind = "sac" (any space) or "td3" (Box)'
        )
    start, finish, anneal_steps, coin = epsilon
    return DuelingQActor(obs_dim, space, policy.hidden_sizes, policy.activation, policy.input_norm,
                         config.dueling_hidden_sizes, config.dueling_activation,
                         (start, finish, anneal_steps, warmup_steps), encoder, coin)


class D3QNLearner:
    """One agent's dueling Q network, trained toward the critic's joint values."""

    stat_names = ("actor_loss",)

    def __init__(self, index: int, policy: OffPolicyActors, critic: JointQCritic, config: D3QNConfig) -> None:
        self.index = index
        self.actor: DuelingQActor = policy.actors[index]  # type: ignore[assignment]
        assert policy.targets is not None
        self.target: DuelingQActor = policy.targets[index]  # type: ignore[assignment]
        self.critic = critic
        self.config = config
        self.optimizer = torch.optim.Adam(self.actor.parameters(), lr=config.lr, foreach=True)
        self.base_lr = config.lr
        self.round_start = KeptForward(self.actor)

    @torch.no_grad()
    def next_action(self, batch: ReplayBatch) -> tuple[torch.Tensor, None]:
        i = self.index
        q = self.target(batch.next_obs[i])
        return masked_argmax(q, batch.next_avail[i]).unsqueeze(-1).float(), None

    def initial_action(self, batch: ReplayBatch) -> torch.Tensor:
        """The greedy action; the Q values' graph is kept for this agent's own loss."""
        obs = batch.obs[self.index]
        q = self.actor(obs)
        self.round_start.keep(obs, q)
        return masked_argmax(q.detach(), batch.avail[self.index]).unsqueeze(-1).float()

    def update(self, batch: ReplayBatch, actions: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        i = self.index
        obs = batch.obs[i]
        with torch.no_grad():
            target = self.critic.value(batch.state, actions)
        q_all = self.round_start.take(obs, lambda: self.actor(obs))
        q = q_all.gather(-1, actions[i].long()).squeeze(-1)
        loss = masked_mean((q - target) ** 2, batch.active[:, i])
        optimizer_step(self.optimizer, loss, self.actor.parameters(), self.config.max_grad_norm)
        return {"actor_loss": loss.detach()}

    def updated_action(self, batch: ReplayBatch, actions: list[torch.Tensor]) -> torch.Tensor:
        return self.critic.best_response(batch.state, actions, self.index, batch.avail[self.index])

    def soft_update(self) -> None:
        polyak_update(self.target, self.actor, self.config.polyak)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])


def make_learner(index: int, policy: OffPolicyActors, critic: JointQCritic, config: D3QNConfig,
                 space: spaces.Space) -> D3QNLearner:
    return D3QNLearner(index, policy, critic, config)


def _from_collector(parts: Any) -> dict[str, Any]:
    """What ``make_actor`` reads from ``[collector]``: the epsilon schedule and the warm-up it starts after."""
    if parts.wiring.epsilon is None:
        raise ConfigError(f'{parts.source}: updater.objective.kind: "d3qn" explores on [collector]\'s epsilon '
                          'schedule (epsilon_start, ...), which this collector has not; use collector.kind = '
                          '"off_policy"')
    return {"epsilon": parts.wiring.epsilon, "warmup_steps": parts.wiring.warmup_steps}


register("updater.objective", D3QNConfig, family="off_policy", requires={"critic": "joint_q_values"},
         factory=lambda config, parts, agent: make_learner(agent, parts.policy, parts.critic, config,
                                                           parts.act_spaces[agent]),
         policy=policy_builder(make_actor, with_targets=True, extra=_from_collector), epsilon_greedy=True)
