"""Centralised action-value critics of the off-policy family, and their TD learner.

- ``q``: ``Q(s, a_1 .. a_n)`` on the global state and every agent's action (Box values,
  one-hot for Discrete / MultiDiscrete), single or ``twin`` (targets use the minimum of
  two networks: TD3, SAC).  EP state: one value per env from the team reward; FP state:
  one value per agent (the state plus the agent's one-hot id) from its own reward.
- ``joint_q``: D3QN's dueling network over the *joint* discrete action space, used to
  score the joint greedy action (``best_response`` gives one agent's best action with the
  others' fixed).

A ``q`` critic's networks (one, or the twins) live in one ``StackedMLP``: each layer is one
batched matmul over the stacked weights.

Both keep polyak-averaged target networks.  The TD target of a sampled batch is::

    y = R_n + discount * (Q_target(s', a') - penalty)

with ``R_n`` and ``discount`` (gamma^m, 0 after termination) from the ``n_step`` return
computer, ``a'`` the objective's next actions and ``penalty`` its entropy term (SAC).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.nn import functional as F

from harl.buffers.replay import ReplayBatch
from harl.errors import ConfigError
from harl.nets.image import CHANNEL_ORDERS, ENCODERS
from harl.nets.plain import OFF_POLICY_ACTIVATIONS, masked_argmax, off_policy_encoder, prefixed
from harl.nets.q import DuelingNet, EncodedStack, StackedMLP
from harl.registry import register
from harl.returns.value_norm import ValueNorm
from harl.settings import each_positive, in_range, kind_field, one_of, own_first, positive, setting
from harl.update.common import huber, optimizer_step, polyak_update

MAX_JOINT_ACTIONS = 100_000
"""``joint_q`` enumerates the joint action space; beyond this it is refused."""


@attrs.frozen
class QLearningConfig:
    """The keys every Q critic kind of the actor-critic families has (``q`` and ``independent_q``)."""

    twin: bool = setting(False, "two Q networks (per agent, for an independent critic); targets take their "
                         "minimum (TD3, SAC)")
    hidden_sizes: tuple[int, ...] = setting((256, 256), "widths of the hidden layers", each_positive())
    activation: str = setting("relu", "hidden activation", one_of(OFF_POLICY_ACTIVATIONS))
    input_norm: bool = setting(False, "LayerNorm on the raw input (state and actions; an independent critic's: "
                               "the agent's observation and action)")
    lr: float = setting(1e-3, "Adam learning rate", positive())
    polyak: float = setting(0.005, "the critic's target networks' update rate: target <- (1 - polyak) target + polyak online "
                            "(the target actors': [updater.objective] polyak)", in_range(0, 1, low_open=True))
    huber_delta: float = setting(0.0, "Huber loss threshold; 0 means squared error", in_range(0, None))
    max_grad_norm: float = setting(0.0, "gradient-norm clip; 0 disables", in_range(0, None))
    value_norm: bool = setting(False, "normalise TD targets with a running mean/std (HARL's ValueNorm; an independent "
                               "critic's is shared by the agents)")


@attrs.frozen(field_transformer=own_first)
class QCriticConfig(QLearningConfig):
    """``[critic] kind = "q"``: centralised Q(s, a_1..a_n), single or twin."""

    kind: str = kind_field("q")
    state_type: str = setting("EP", "EP: one global state/value per env; FP: one per agent", one_of(("EP", "FP")))
    encoder: str = setting("auto", "what reads the state: cnn (HARL's PlainCNN per network), mlp, or auto (cnn for a 3-D Box image state)", one_of(ENCODERS))
    channel_order: str = setting("auto", "image channel axis: last (HWC), first (CHW), or auto", one_of(CHANNEL_ORDERS))


@attrs.frozen
class JointQCriticConfig:
    """``[critic] kind = "joint_q"``: D3QN's dueling Q over the joint discrete action space (EP state)."""

    kind: str = kind_field("joint_q")
    hidden_sizes: tuple[int, ...] = setting((128, 128), "widths of the shared hidden layers", each_positive())
    activation: str = setting("relu", "activation of the shared layers", one_of(OFF_POLICY_ACTIVATIONS))
    dueling_hidden_sizes: tuple[int, ...] = setting((128,), "hidden widths of the value and advantage streams", each_positive())
    dueling_activation: str = setting("hardswish", "activation of the value and advantage streams", one_of(OFF_POLICY_ACTIVATIONS))
    input_norm: bool = setting(False, "LayerNorm on the raw state")
    lr: float = setting(1e-3, "Adam learning rate", positive())
    polyak: float = setting(0.005, "the critic's target network's update rate (the target agents' Qs: "
                            "[updater.objective] polyak)", in_range(0, 1, low_open=True))
    huber_delta: float = setting(0.0, "Huber loss threshold; 0 means squared error", in_range(0, None))
    max_grad_norm: float = setting(0.0, "gradient-norm clip; 0 disables", in_range(0, None))
    encoder: str = setting("auto", "what reads the state: cnn (HARL's PlainCNN per network), mlp, or auto (cnn for a 3-D Box image state)", one_of(ENCODERS))
    channel_order: str = setting("auto", "image channel axis: last (HWC), first (CHW), or auto", one_of(CHANNEL_ORDERS))


def critic_action_width(space: spaces.Space) -> int:
    """Columns an agent's action takes in the critic's input (one-hot widths for categories)."""
    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape))
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.asarray(space.nvec).sum())
    raise TypeError(f"unsupported action space {space!r}")


def one_hot_actions(stored: torch.Tensor, space: spaces.Space) -> torch.Tensor:
    """Stored actions ``(B, k)`` -> the critic's format (Box unchanged, categories one-hot)."""
    if isinstance(space, spaces.Box):
        return stored
    if isinstance(space, spaces.Discrete):
        sizes = [int(space.n)]
    elif isinstance(space, spaces.MultiDiscrete):
        sizes = [int(n) for n in np.asarray(space.nvec).ravel()]
    else:
        raise TypeError(f"no one-hot form of a {type(space).__name__} action space (Box, Discrete, MultiDiscrete)")
    index = stored.long()
    return torch.cat([F.one_hot(index[:, j], n).to(stored.dtype) for j, n in enumerate(sizes)], -1)


class QCritic(nn.Module):
    """Q(s, a_1..a_n); values in env units: ``(B,)`` for EP, ``(B, A)`` for FP."""

    # registered buffers (register_buffer in __init__)
    agent_ids: torch.Tensor

    def __init__(self, state_dim: int, action_spaces: Sequence[spaces.Space], config: QCriticConfig,
                 state_space: Any = None, source: str = "pipeline") -> None:
        """``state_space``: read for ``encoder`` (an image state: a PlainCNN per network, as in HARL)."""
        super().__init__()
        self.config = config
        self.spaces = list(action_spaces)
        self.n_agents = len(self.spaces)
        self.fp = config.state_type == "FP"
        k = 2 if config.twin else 1
        built = [off_policy_encoder(state_space, config.encoder, config.channel_order, config.hidden_sizes[0],
                                    config.activation, "critic", source)
                 for _ in range(k)] if state_space is not None else []
        encoders = [encoder for encoder, _ in built if encoder is not None]  # one per network, or none
        width = built[0][1] if encoders else state_dim  # an encoder's output width
        in_dim = width + (self.n_agents if self.fp else 0) + sum(critic_action_width(s) for s in self.spaces)
        stack = StackedMLP([in_dim, *config.hidden_sizes, 1], config.activation, config.input_norm, k)
        self.nets: StackedMLP | EncodedStack = EncodedStack(encoders, stack) if encoders else stack
        self.targets = copy.deepcopy(self.nets)
        self.targets.requires_grad_(False)
        self.normalizer = ValueNorm() if config.value_norm else None
        self.register_buffer("agent_ids", torch.eye(self.n_agents))

    def encode(self, stored: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Buffer actions -> the critic's action format (one-hot for categories)."""
        return [one_hot_actions(a, s) for a, s in zip(stored, self.spaces)]

    @staticmethod
    def features(nets: StackedMLP | EncodedStack, state: torch.Tensor, index: int | None = None) -> torch.Tensor:
        """What the networks read of the state: itself, or (image) each network's encoder features."""
        return nets.features(state, index) if isinstance(nets, EncodedStack) else state

    def inputs(self, state: torch.Tensor, actions: Sequence[torch.Tensor]) -> torch.Tensor:
        """State (or features; ``(k, ..., F)`` per network) joined with the actions (and FP ids)."""
        x = torch.cat([state, *(a.expand(*state.shape[:-1], a.shape[-1]) for a in actions)], -1)
        if not self.fp:
            return x
        lead = x.shape[:-1]
        copies = x.unsqueeze(-2).expand(*lead, self.n_agents, x.shape[-1])
        ids = self.agent_ids.expand(*lead, self.n_agents, self.n_agents)
        return torch.cat([copies, ids], -1)

    def raw(self, state: torch.Tensor, actions: Sequence[torch.Tensor],
            nets: StackedMLP | EncodedStack | None = None) -> torch.Tensor:
        """Every network's output, stacked ``(k, B)`` / ``(k, B, A)`` (normalised units when value_norm is on)."""
        net = self.nets if nets is None else nets
        return net(self.inputs(self.features(net, state), actions)).squeeze(-1)

    def _denormalize(self, q: torch.Tensor) -> torch.Tensor:
        return q if self.normalizer is None else self.normalizer.denormalize(q)

    def value(self, state: torch.Tensor, actions: Sequence[torch.Tensor], reduce: str = "first") -> torch.Tensor:
        """Q in env units for actor losses: the first network's, or the twins' ``min``."""
        if reduce == "first":
            x = self.inputs(self.features(self.nets, state, 0), actions)
            return self._denormalize(self.nets.one(x, 0).squeeze(-1))
        return self._denormalize(self.raw(state, actions).min(0).values)

    @torch.no_grad()
    def target_value(self, state: torch.Tensor, actions: Sequence[torch.Tensor]) -> torch.Tensor:
        """The target networks' value (their minimum when twin), env units."""
        return self._denormalize(self.raw(state, actions, self.targets).min(0).values)

    def soft_update(self, tau: float) -> None:
        polyak_update(self.targets, self.nets, tau)


class JointQCritic(nn.Module):
    """Q(s, joint action) for all joint actions at once; agent 0's index varies fastest."""

    # registered buffers (register_buffer in __init__)
    strides: torch.Tensor

    fp = False
    normalizer = None

    def __init__(self, state_dim: int, action_spaces: Sequence[spaces.Space], config: JointQCriticConfig,
                 state_space: Any = None, source: str = "pipeline") -> None:
        super().__init__()
        self.config = config
        self.sizes = [int(s.n) for s in action_spaces]  # type: ignore[attr-defined]
        self.n_agents = len(self.sizes)
        strides = [math.prod(self.sizes[:i]) for i in range(self.n_agents)]
        self.register_buffer("strides", torch.tensor(strides, dtype=torch.long))
        joint = math.prod(self.sizes)
        encoder, width = (None, state_dim) if state_space is None else off_policy_encoder(
            state_space, config.encoder, config.channel_order, config.hidden_sizes[0], config.activation, "critic", source)
        self.nets = nn.ModuleList([prefixed(encoder, DuelingNet(width, joint, config.hidden_sizes, config.activation,
                                                               config.dueling_hidden_sizes, config.dueling_activation,
                                                               config.input_norm))])
        self.targets = copy.deepcopy(self.nets)
        self.targets.requires_grad_(False)
        self._table: tuple[torch.Tensor, int, torch.Tensor] | None = None

    @torch.no_grad()
    def table(self, state: torch.Tensor) -> torch.Tensor:
        """(B, joint actions) online values, computed once per state batch and parameter version.

        An actor round asks for values of one batch many times (each agent's target and best
        response) while the critic stays fixed; an optimiser step bumps the version.
        """
        version = sum(p._version for p in self.nets[0].parameters())
        cached = self._table
        if cached is None or cached[0] is not state or cached[1] != version:
            cached = self._table = (state, version, self.nets[0](state))
        return cached[2]

    def encode(self, stored: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Stored ``(B, 1)`` category indices are already this critic's format."""
        return list(stored)

    def joint_index(self, actions: Sequence[torch.Tensor]) -> torch.Tensor:
        """(B,) joint index ``sum_i a_i * prod_{j<i} n_j``."""
        return sum(a.reshape(-1).long() * self.strides[i] for i, a in enumerate(actions))  # type: ignore[return-value]

    def raw(self, state: torch.Tensor, actions: Sequence[torch.Tensor],
            nets: nn.ModuleList | None = None) -> torch.Tensor:
        index = self.joint_index(actions).unsqueeze(-1)
        return torch.stack([net(state).gather(-1, index).squeeze(-1) for net in (nets if nets is not None else self.nets)])

    def value(self, state: torch.Tensor, actions: Sequence[torch.Tensor], reduce: str = "first") -> torch.Tensor:
        """Q of the joint action, no gradient (the D3QN agents regress toward it)."""
        return self.table(state).gather(-1, self.joint_index(actions).unsqueeze(-1)).squeeze(-1)

    @torch.no_grad()
    def target_value(self, state: torch.Tensor, actions: Sequence[torch.Tensor]) -> torch.Tensor:
        return self.raw(state, actions, self.targets)[0]

    @torch.no_grad()
    def best_response(self, state: torch.Tensor, actions: Sequence[torch.Tensor], agent: int,
                      avail: torch.Tensor | None = None) -> torch.Tensor:
        """(B, 1) the action of ``agent`` maximising Q with the other agents' actions fixed."""
        others = self.joint_index([torch.zeros_like(a) if i == agent else a for i, a in enumerate(actions)])
        choices = others.unsqueeze(-1) + torch.arange(self.sizes[agent], device=state.device) * self.strides[agent]
        values = self.table(state).gather(-1, choices)
        return masked_argmax(values, avail).unsqueeze(-1).to(actions[agent].dtype)

    def soft_update(self, tau: float) -> None:
        polyak_update(self.targets, self.nets, tau)


def td_targets(returns: torch.Tensor, discount: torch.Tensor, next_value: torch.Tensor,
               penalty: torch.Tensor | None = None) -> torch.Tensor:
    """``returns + discount * (next_value - penalty)``; EP ``(B,)`` or FP ``(B, A)`` values, ``(B,)`` discounts."""
    if penalty is not None:
        next_value = next_value - (penalty.unsqueeze(-1) if next_value.dim() > penalty.dim() else penalty)
    if next_value.dim() > discount.dim():
        discount = discount.unsqueeze(-1)
    return returns + discount * next_value


def team_value(critic: QCritic | JointQCritic, state: torch.Tensor, actions: Sequence[torch.Tensor],
               reduce: str = "first") -> torch.Tensor:
    """(B,) the value an actor maximises: Q itself (EP), or the mean of the agents' Q (FP), as HARL does."""
    q = critic.value(state, actions, reduce)
    return q.mean(-1) if critic.fp else q


def agent_value(critic: Any, batch: ReplayBatch, actions: Sequence[torch.Tensor], agent: int,
                reduce: str = "first") -> torch.Tensor:
    """(B,) what agent ``agent``'s actor maximises: ``team_value`` of the batch's state, or, for a
    critic with ``agent_value`` (``harl.update.independent_q``), the agent's own Q(o_agent, a_agent)."""
    own = getattr(critic, "agent_value", None)
    if own is not None:
        return own(batch.obs[agent], actions[agent], agent, reduce)
    return team_value(critic, batch.state, actions, reduce)


def agent_values(critic: Any, batch: ReplayBatch, joints: Sequence[Sequence[torch.Tensor]], agents: Sequence[int],
                 reduce: str = "first") -> torch.Tensor:
    """``(G, B)``: ``agent_value`` of each agent in ``agents`` with its joint action in ``joints``.
    A ``q`` critic's networks read them all as one batch (``[policy] batch_agents``: a simultaneous
    actor step); another critic is called once per agent."""
    own = getattr(critic, "agent_value", None) is not None
    if own or not isinstance(critic, QCritic) or not isinstance(critic.nets, StackedMLP):
        return torch.stack([agent_value(critic, batch, joint, i, reduce) for joint, i in zip(joints, agents)])
    x = torch.stack([critic.inputs(batch.state, joint) for joint in joints])
    raw = critic.nets.one(x, 0).squeeze(-1) if reduce == "first" else critic.nets(x).squeeze(-1).min(0).values
    q = critic._denormalize(raw)
    return q.mean(-1) if critic.fp else q


def normalized_targets(critic: Any, target: torch.Tensor) -> torch.Tensor:
    """TD targets in the units the critic's networks learn in: the value normaliser (when the critic
    has one) sees them first."""
    if critic.normalizer is None:
        return target
    critic.normalizer.update(target)
    return critic.normalizer.normalize(target)


def td_step(optimizer: torch.optim.Optimizer, critic: Any, loss: torch.Tensor, predictions: torch.Tensor,
            target: torch.Tensor, max_grad_norm: float) -> dict[str, torch.Tensor]:
    """The critic's optimiser step on ``loss``, and the step's stats (the first network's Q in env units)."""
    optimizer_step(optimizer, loss, critic.nets.parameters(), max_grad_norm)
    q = predictions[0].detach()
    if critic.normalizer is not None:
        q = critic.normalizer.denormalize(q)
    return {"critic_loss": loss.detach(), "q_mean": q.mean(), "target_mean": target.mean()}


class TDLearner:
    """What every Q critic's learner has besides its ``update``: the Adam optimiser of the critic's
    networks, the target networks' polyak step, the checkpointed state."""

    def __init__(self, critic: Any, config: Any) -> None:
        """``critic``: has ``nets`` and ``soft_update(polyak)``; ``config``: ``lr`` and ``polyak``."""
        self.critic = critic
        self.config = config
        self.optimizer = torch.optim.Adam(critic.nets.parameters(), lr=config.lr, foreach=True)
        self.base_lr = config.lr

    def soft_update(self) -> None:
        self.critic.soft_update(self.config.polyak)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])


class QCriticLearner(TDLearner):
    """One TD step per call: all of the critic's networks toward the same targets."""

    critic: QCritic | JointQCritic
    config: QCriticConfig | JointQCriticConfig

    def __init__(self, critic: QCritic | JointQCritic, config: QCriticConfig | JointQCriticConfig) -> None:
        super().__init__(critic, config)

    def update(self, batch: ReplayBatch, actions: Sequence[torch.Tensor], next_actions: Sequence[torch.Tensor],
               penalty: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """``actions``: the batch's actions in the critic's format; ``next_actions`` and ``penalty`` from the objective."""
        critic, cfg = self.critic, self.config
        with torch.no_grad():
            returns = batch.returns if critic.fp else batch.returns.mean(-1)
            target = td_targets(returns, batch.discount, critic.target_value(batch.next_state, next_actions), penalty)
            target_n = normalized_targets(critic, target)
        predictions = critic.raw(batch.state, actions)  # (k, B) or (k, B, A)
        losses = huber(target_n - predictions, cfg.huber_delta)
        if critic.fp:  # an agent's value is only fitted where it was alive
            mask = batch.active
            loss = (losses * mask).sum() / mask.sum().clamp(min=1.0)
        else:
            loss = losses.mean(-1).sum()
        return td_step(self.optimizer, critic, loss, predictions, target, cfg.max_grad_norm)


def _joint_q_critic(config: JointQCriticConfig, parts: Any) -> JointQCritic:
    critic = JointQCritic(parts.state_dim, parts.act_spaces, config, parts.state_space, parts.source)
    joint = int(np.prod(critic.sizes))
    if joint > MAX_JOINT_ACTIONS:
        raise ConfigError(
            f'{parts.source}: critic.kind: "joint_q" scores all {joint:,} joint actions at once (more than '
            f"{MAX_JOINT_ACTIONS:,}); use fewer agents or actions, or a \"q\" critic with objective \"sac\""
        )
    return critic


register("critic", QCriticConfig, family="off_policy", provides=("q_values",),
         factory=lambda config, parts: QCritic(parts.state_dim, parts.act_spaces, config, parts.state_space,
                                               parts.source),
         learner=lambda critic, config, parts: QCriticLearner(critic, config))
register("critic", JointQCriticConfig, _joint_q_critic, family="off_policy", provides=("joint_q_values",),
         learner=lambda critic, config, parts: QCriticLearner(critic, config))
