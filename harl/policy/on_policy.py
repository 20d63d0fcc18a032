"""The team's actors: one MLP (+ GRU) + action head per agent (or one shared by all).

Recurrent actors see their samples as sequences.  A batch of ``N`` rows then holds ``B``
sequences of ``L = N / B`` steps, sequence-major (row ``b * L + t``), with ``hidden``
``(B, H)`` the GRU state before each sequence's first step and ``starts`` ``(N,)`` 1 where an
episode begins (the state is zeroed there).  Acting is the case ``L = 1``, ``B = n_envs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from harl.errors import ConfigError, old_names
from harl.nets.cnn import OnPolicyBase, on_policy_base
from harl.nets.entity import EntityEncoder, entity_encoder
from harl.nets.heads import make_head
from harl.nets.image import choose_encoder, image_layout, is_image
from harl.nets.mlp import MLP, GRULayer, torch_default_init
from harl.nets.stacked import StackedActors, group_agents
from harl.policy.config import PolicyConfig


def actor_base(space: spaces.Box, config: PolicyConfig, source: str = "pipeline", ids: int = 0) -> OnPolicyBase:
    """The network under an actor's GRU and head: ``[policy] encoder`` on ``space`` (and ``ids``
    more inputs: the agent's one-hot id)."""
    encoder = choose_encoder(space, config.encoder, "policy", source)
    if encoder == "entity":  # attention over the entities the env's space describes (harl.nets.entity)
        return entity_encoder(space, config.hidden_sizes, config.activation, config.input_norm, "policy", source,
                              config.layer_norm, ids)
    layout = image_layout(space, config.channel_order, "policy", source) if is_image(space) else None
    if ids and layout is not None:
        raise ConfigError(f"{source}: policy.agent_id appends the agent's one-hot id to a flat observation, but "
                          f"the agents observe images {tuple(space.shape)}; remove policy.agent_id")
    return on_policy_base(layout, encoder, int(np.prod(space.shape)) + ids, config.hidden_sizes,
                          config.activation, config.input_norm, config.layer_norm)


class Actor(nn.Module):
    """Observation (and GRU state) -> action distribution for one agent."""

    def __init__(self, obs_dim: int, action_space: spaces.Space, config: PolicyConfig,
                 base: OnPolicyBase | None = None) -> None:
        """``base``: the encoder (``actor_base``); by default the MLP on ``obs_dim`` inputs."""
        super().__init__()
        self.base = base if base is not None else MLP(obs_dim, config.hidden_sizes, config.activation,
                                                      config.input_norm, config.layer_norm)
        width = self.base.out_dim
        self.rnn = GRULayer(width, width, config.layer_norm) if config.recurrent != "none" else None
        own = self.base.action_head(action_space, config) if isinstance(self.base, EntityEncoder) else None
        self.head = own if own is not None else make_head(action_space, width, config.std_x_coef,
                                                          config.std_y_coef, config.output_gain)
        if config.init == "torch":
            torch_default_init(self)

    @property
    def hidden_size(self) -> int:
        """Width of the GRU state (0: a feed-forward actor)."""
        return 0 if self.rnn is None else self.rnn.hidden_dim

    def features(self, obs: torch.Tensor, hidden: torch.Tensor | None = None,
                 starts: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The head's input for each row, and the GRU state after each sequence (None: feed-forward)."""
        x = self.base(obs)
        if self.rnn is None:
            return x, None
        if hidden is None or starts is None:
            raise ValueError("a recurrent actor needs the GRU state and the episode starts of its rows")
        n_seq = hidden.shape[0]
        length = x.shape[0] // n_seq
        seq = x.view(n_seq, length, -1).transpose(0, 1)
        out, last = self.rnn(seq, hidden, starts.reshape(n_seq, length).transpose(0, 1))
        return out.transpose(0, 1).reshape(n_seq * length, -1), last

    def act(self, obs: torch.Tensor, avail: torch.Tensor | None, deterministic: bool = False,
            hidden: torch.Tensor | None = None, starts: torch.Tensor | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(actions, per-dimension log-probs, next GRU state or None) for one step of each row."""
        x, last = self.features(obs, hidden, starts)
        actions, log_probs = self.head.sample(x, avail, deterministic)
        return actions, log_probs, last

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor, avail: torch.Tensor | None,
                 hidden: torch.Tensor | None = None, starts: torch.Tensor | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head.evaluate(self.features(obs, hidden, starts)[0], actions, avail)

    def distribution(self, obs: torch.Tensor, avail: torch.Tensor | None,
                     hidden: torch.Tensor | None = None, starts: torch.Tensor | None = None
                     ) -> tuple[torch.Tensor, ...]:
        """The action distribution's parameters (what ``kl`` compares)."""
        return self.head.distribution(self.features(obs, hidden, starts)[0], avail)

    def kl(self, old: tuple[torch.Tensor, ...], new: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """``(batch,)`` KL(old || new) between two ``distribution`` outputs."""
        return self.head.kl(old, new)

    def forward(self, obs: torch.Tensor, avail: torch.Tensor | None,
                hidden: torch.Tensor | None = None, starts: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, ...]:
        """The action distribution's parameters (``distribution``; ``torch.func`` calls this)."""
        return self.distribution(obs, avail, hidden, starts)


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
    if isinstance(a, spaces.Box) and isinstance(b, spaces.Box):
        return a.shape == b.shape and bool(np.all(a.low == b.low) and np.all(a.high == b.high))
    return a == b


class AgentIdActor(nn.Module):
    """One agent's view of a shared actor whose inputs end with the agent's one-hot id
    (``[policy] agent_id``): it takes the agent's own observation and appends the id, so an
    exported agent (``harl export``) reads what the env gives it."""

    id_row: torch.Tensor

    def __init__(self, actor: Actor, agent: int, n_agents: int) -> None:
        super().__init__()
        self.actor = actor
        self.register_buffer("id_row", torch.eye(n_agents)[agent].clone(), persistent=False)

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, *obs_shape)`` -> ``(B, obs_dim + A)``: the flat observation, then the id."""
        flat = obs.reshape(obs.shape[0], -1).float()
        return torch.cat([flat, self.id_row.to(flat.dtype).expand(flat.shape[0], -1)], -1)


def with_agent_id(obs: torch.Tensor, agent: int, n_agents: int) -> torch.Tensor:
    """``(*lead, *obs_shape)`` with ``len(lead)`` leading axes -> ``(*lead, obs_dim + n_agents)``:
    the flattened observation and agent ``agent``'s one-hot id (``[policy] agent_id``)."""
    return torch.cat([obs.float(), nn.functional.one_hot(torch.tensor(agent, device=obs.device), n_agents)
                      .to(torch.float32).expand(*obs.shape[:-1], n_agents)], -1)


class Sampled(NamedTuple):
    """One step of the team, as ``OnPolicyActors.sample`` draws it."""

    actions: list[torch.Tensor]
    """Per agent ``(E, k_i)``."""
    log_probs: list[torch.Tensor]
    """Per agent ``(E, k_i)`` per-dimension log-probabilities of ``actions``."""
    hidden: list[torch.Tensor] | None
    """Per agent ``(E, H)`` the GRU states after this step (None: feed-forward, or no state given)."""


class OnPolicyActors(nn.Module):
    """The team: all agents' actors, indexed by agent; a shared actor appears once per agent.

    ``[policy] agent_id``: the shared actor reads each agent's observation with the agent's
    one-hot id appended (``actor_input``; the rollout buffer's agent batches append it too)."""

    def __init__(self, observation_spaces: Sequence[spaces.Box],
                 action_spaces: Sequence[spaces.Space], config: PolicyConfig, source: str = "pipeline") -> None:
        super().__init__()
        self.n_agents = len(action_spaces)
        dims = [int(np.prod(s.shape)) for s in observation_spaces]
        self.agent_ids = bool(config.agent_id)
        """``[policy] agent_id``: the shared actor's inputs end with the agent's one-hot id."""
        if self.agent_ids and not config.share_parameters:
            raise ConfigError(f"{source}: policy.agent_id appends the agent's id for one actor shared by the "
                              "agents, but policy.share_parameters = false gives each agent its own actor; set "
                              "share_parameters = true or remove agent_id")
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
            ids = self.n_agents if self.agent_ids else 0
            shared = Actor(dims[0] + ids, action_spaces[0], config,
                           actor_base(observation_spaces[0], config, source, ids))
            self.actors = nn.ModuleList([shared])
            self.index = [0] * self.n_agents
        else:
            self.actors = nn.ModuleList(Actor(d, s, config, actor_base(o, config, source))
                                        for d, s, o in zip(dims, action_spaces, observation_spaces))
            self.index = list(range(self.n_agents))
        self.shared = config.share_parameters
        self.groups: list[list[int]] | None = None
        """``[policy] batch_agents``: the agents that act as one call (see ``batched_groups``)."""
        self.stacks: dict[int, StackedActors] = {}
        """First agent of a group of distinct actors -> their stack."""
        if config.batch_agents and self.n_agents > 1:
            self.groups, self.stacks = batched_groups(self)

    def stack_of(self, agents: Sequence[int]) -> StackedActors | None:
        """The stack of the group whose agents are ``agents`` (None: not one stack)."""
        stack = self.stacks.get(agents[0])
        return stack if stack is not None and len(stack) == len(agents) else None

    def actor(self, agent: int) -> Actor:
        return self.actors[self.index[agent]]  # type: ignore[return-value]

    def export_actors(self) -> list[nn.Module]:
        """Each agent's actor, in agent order (a shared actor repeats; with ``agent_id``, each agent's
        ``AgentIdActor`` view of it): what ``harl export`` ships."""
        if self.agent_ids:
            return [AgentIdActor(self.actor(i), i, self.n_agents) for i in range(self.n_agents)]
        return [self.actor(i) for i in range(self.n_agents)]

    def actor_input(self, agent: int, obs: torch.Tensor) -> torch.Tensor:
        """What agent ``agent``'s actor reads of its ``(N, *obs_shape)`` observation: the observation
        itself, or with ``agent_id`` the flat observation and the agent's one-hot id."""
        if not self.agent_ids:
            return obs
        return with_agent_id(obs.reshape(obs.shape[0], -1), agent, self.n_agents)

    @property
    def hidden_size(self) -> int:
        """Width of each agent's GRU state (0: feed-forward actors)."""
        return self.actor(0).hidden_size

    def initial_hidden(self, n_envs: int, device: torch.device | str = "cpu") -> list[torch.Tensor] | None:
        """Zero GRU states, one ``(n_envs, H)`` tensor per agent; None for feed-forward actors."""
        if not self.hidden_size:
            return None
        return [torch.zeros(n_envs, self.hidden_size, device=device) for _ in range(self.n_agents)]

    @torch.no_grad()
    def act(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
            deterministic: bool = True, hidden: list[torch.Tensor] | None = None,
            starts: torch.Tensor | None = None) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
        """``(actions, next hidden)``: one step of every agent in every env, as every family's team
        acts (``harl.evaluator.ActingPolicy``); ``sample`` also gives the log-probabilities.

        Recurrent actors need ``hidden`` (from ``initial_hidden``, then what the previous step
        returned) and ``starts`` ``(n_envs,)``, 1 where this step begins an episode (those states
        are zeroed first); the states after this step come back, ``hidden`` is left as it was.
        """
        sampled = self.sample(obs, avail, deterministic, hidden, starts)
        return sampled.actions, sampled.hidden

    @torch.no_grad()
    def sample(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
               deterministic: bool = False, hidden: list[torch.Tensor] | None = None,
               starts: torch.Tensor | None = None) -> Sampled:
        """``act`` with the per-dimension log-probabilities of the actions (what the collector stores)."""
        if self.groups is not None and hidden is None:
            actions, log_probs = self._act_batched(obs, avail, deterministic)
            return Sampled(actions, log_probs, None)
        actions, log_probs = [], []
        after = None if hidden is None else list(hidden)
        for i in range(self.n_agents):
            a, lp, last = self.actor(i).act(self.actor_input(i, obs[i]), None if avail is None else avail[i],
                                            deterministic,
                                            None if hidden is None else hidden[i], starts)
            actions.append(a)
            log_probs.append(lp)
            if after is not None and last is not None:
                after[i] = last
        return Sampled(actions, log_probs, after)

    def _act_batched(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
                     deterministic: bool) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """``act`` with each group of agents in one call: a shared actor on the group's rows side by
        side, distinct actors of one shape through their stack."""
        assert self.groups is not None
        actions: list[torch.Tensor] = [torch.empty(0)] * self.n_agents
        log_probs: list[torch.Tensor] = [torch.empty(0)] * self.n_agents
        for group in self.groups:
            mask = None if avail is None or avail[group[0]] is None else [m for i in group
                                                                          if (m := avail[i]) is not None]
            if len(group) == 1:
                i = group[0]
                a, lp, _ = self.actor(i).act(obs[i], None if mask is None else mask[0], deterministic)
                actions[i], log_probs[i] = a, lp
                continue
            stack = self.stack_of(group)
            if stack is None:  # one shared actor: the agents' rows as one batch
                rows = [obs[i].shape[0] for i in group]
                a, lp, _ = self.actor(group[0]).act(torch.cat([self.actor_input(i, obs[i]) for i in group]),
                                                    None if mask is None else torch.cat(mask), deterministic)
                parts_a, parts_lp = a.split(rows), lp.split(rows)
            else:
                a, lp = stack.act(torch.stack([obs[i] for i in group]),
                                  None if mask is None else torch.stack(mask), deterministic)
                parts_a, parts_lp = a.unbind(0), lp.unbind(0)
            for j, i in enumerate(group):
                actions[i], log_probs[i] = parts_a[j], parts_lp[j]
        return actions, log_probs


def batched_groups(actors: OnPolicyActors) -> tuple[list[list[int]], dict[int, StackedActors]]:
    """``actors``'s agents grouped for ``[policy] batch_agents``: a shared actor's agents form one
    group (one call on their rows); distinct actors of one shape form a stack; the rest act alone."""
    if actors.shared:
        return [list(range(actors.n_agents))], {}
    groups = group_agents([actors.actor(i) for i in range(actors.n_agents)])
    stacks = {g[0]: StackedActors([actors.actor(i) for i in g]) for g in groups if len(g) > 1}
    return groups, stacks


def stochastic_policy(config: object, parts: Any) -> OnPolicyActors:
    """The team an on-policy objective trains: ``[policy]``'s actors over the env's spaces."""
    return OnPolicyActors(parts.obs_spaces, parts.act_spaces, parts.policy_config, parts.source)


if not TYPE_CHECKING:  # mypy does not see old names, so harl's own code cannot use one
    __getattr__ = old_names(__name__, {"TeamPolicy": ("OnPolicyActors", OnPolicyActors),
                                       "OnPolicyTeam": ("OnPolicyActors", OnPolicyActors)})
