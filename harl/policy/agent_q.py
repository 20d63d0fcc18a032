"""The value family's team: one Q network per agent (or one shared), acting greedily or epsilon-greedily.

Each agent's network is EPyMARL's ``rnn`` agent: ``Linear(inputs, H)``, ReLU, then a
``GRUCell(H, H)`` (``recurrent = true``) or ``Linear(H, H)`` + ReLU, then ``Linear(H, n)``
to one Q value per action.  An agent's inputs are its observation, optionally its previous
action (one-hot, zeros at an episode's first step) and its id (one-hot), as PyMARL builds
them.  Shapes, with ``N`` rows (envs or sampled episodes), ``A`` agents::

    obs        (N, A, D)   every agent's observation, zero-padded to the widest (D)
    hidden     (N, A, H)   GRU states (a feed-forward team carries zeros)
    q          (N, A, n)   n = the most actions any agent has; an agent's extra ones are never available

Agents whose spaces differ are padded the way EPyMARL pads them (observations with zeros,
actions as unavailable), so one network can be shared.  ``act`` and ``initial_hidden`` are
what the Evaluator asks of any team: ``deterministic`` acting is greedy (epsilon 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.nn.utils import rnn as rnn_utils

from harl.errors import ConfigError, old_names

MASKED_Q = -1e9
"""What an unavailable action's Q value becomes before a max or an argmax."""

PACK_BELOW = 0.5
"""The unroll skips the padding (a packed sequence) when the episodes' own rows are at most this share of
the batch's: 32 episodes, 128-wide GRU, one core, CPU per unroll and backward: 100 rows, mean 22 real,
172 -> 106 ms packed; 30 rows, mean 21, 43 -> 54 ms packed (slower: the packing's own cost)."""


class AgentQNet(nn.Module):
    """EPyMARL's ``RNNAgent``: inputs -> H -> (GRUCell or Linear) -> n Q values."""

    def __init__(self, in_dim: int, hidden_dim: int, n_actions: int, recurrent: bool) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hidden_dim)
        self.rnn: nn.Module = nn.GRUCell(hidden_dim, hidden_dim) if recurrent else nn.Linear(hidden_dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, n_actions)
        self.recurrent = recurrent
        self.hidden_dim = hidden_dim

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` (R, in_dim), ``h`` (R, H) -> Q (R, n), next h (R, H) (feed-forward: the layer's output)."""
        y = torch.relu(self.fc1(x))
        h = self.rnn(y, h) if self.recurrent else torch.relu(self.rnn(y))
        return self.fc2(h), h

    def unroll(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """Q over sequences that start from a zero state: ``x`` (T, R, in_dim) -> (T, R, n).

        A recurrent net runs its ``GRUCell``'s own weights through the fused one-layer GRU
        (``torch.gru``, what ``nn.GRU`` calls: the same gates, its ``*_l0`` tensors are the cell's
        ``weight_ih``/``weight_hh``/``bias_*``), so the result is the step-by-step loop's up to float
        rounding and the parameters (and checkpoints) stay the cell's.  ``lengths`` (R,): only each
        sequence's first ``lengths[r]`` steps are computed (a packed sequence), the rest of its Q are 0."""
        if not self.recurrent:
            return self.fc2(torch.relu(self.rnn(torch.relu(self.fc1(x)))))
        cell = self.rnn
        assert isinstance(cell, nn.GRUCell)
        weights = [cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh]
        h0 = x.new_zeros(1, x.shape[1], self.hidden_dim)
        if lengths is None:
            out, _ = torch.gru(torch.relu(self.fc1(x)), h0, weights, True, 1, 0.0, self.training, False, False)
            return self.fc2(out)
        packed = rnn_utils.pack_padded_sequence(x, lengths.cpu(), enforce_sorted=False)
        out, _ = torch.gru(torch.relu(self.fc1(packed.data)), packed.batch_sizes, h0, weights, True, 1, 0.0,
                           self.training, False)
        q = packed._replace(data=self.fc2(out))
        return rnn_utils.pad_packed_sequence(q, total_length=x.shape[0])[0]


def discrete_sizes(action_spaces: Sequence[spaces.Space], source: str = "pipeline") -> list[int]:
    """Each agent's number of actions; anything but ``Discrete`` is refused with the reason."""
    sizes = []
    for i, space in enumerate(action_spaces):
        if not isinstance(space, spaces.Discrete):
            raise ConfigError(
                f"{source}: collector.kind: the value family (IQL, VDN, QMIX) picks each agent's action as the "
                f"argmax of one Q value per action, so it needs Discrete actions, but agent {i} has "
                f"{type(space).__name__} {getattr(space, 'shape', '')}; for continuous actions use an "
                'actor-critic pipeline (e.g. collector.kind = "off_policy" with updater.objective.kind = "td3" '
                'or "sac"), or set the env\'s discrete actions (MPE: env.continuous_actions = false)')
        sizes.append(int(space.n))
    return sizes


class AgentQNetworks(nn.Module):
    """Every agent's Q network; see the module docstring for the shapes."""

    def __init__(self, observation_spaces: Sequence[spaces.Box], action_spaces: Sequence[spaces.Space],
                 hidden_dim: int = 64, recurrent: bool = False, share_parameters: bool = True,
                 agent_id: bool = True, last_action: bool = False, source: str = "pipeline") -> None:
        super().__init__()
        self.n_agents = len(action_spaces)
        self.sizes = discrete_sizes(action_spaces, source)
        self.obs_dims = [int(np.prod(s.shape)) for s in observation_spaces]
        self.obs_dim = max(self.obs_dims)
        self.n_actions = max(self.sizes)
        self.hidden_dim = hidden_dim
        self.recurrent = recurrent
        self.share_parameters = share_parameters
        self.agent_id = agent_id
        self.last_action = last_action
        self.in_dim = self.obs_dim + (self.n_actions if last_action else 0) + (self.n_agents if agent_id else 0)
        count = 1 if share_parameters else self.n_agents
        self.nets = nn.ModuleList(AgentQNet(self.in_dim, hidden_dim, self.n_actions, recurrent) for _ in range(count))
        pad = torch.zeros(self.n_agents, self.n_actions)
        for i, n in enumerate(self.sizes):
            pad[i, :n] = 1.0
        self.register_buffer("action_exists", pad, persistent=False)
        self.register_buffer("ids", torch.eye(self.n_agents), persistent=False)
        self.epsilon = 0.0
        """What ``act(deterministic=False)`` explores with: the collector's latest epsilon."""

    action_exists: torch.Tensor
    ids: torch.Tensor

    def explore_with(self, epsilon: float) -> None:
        """The epsilon ``act(deterministic=False)`` explores with (the collector's latest; a rendering
        or a hand-written loop then explores as training does)."""
        self.epsilon = float(epsilon)

    # ------------------------------------------------------------------ inputs

    def stack_obs(self, obs: Sequence[torch.Tensor]) -> torch.Tensor:
        """Per-agent ``(..., d_i)`` observations -> ``(..., A, D)`` floats, zero-padded."""
        out = []
        for o, d in zip(obs, self.obs_dims):
            o = o.float().reshape(*o.shape[: o.dim() - 1], -1) if o.dim() > 1 else o.float()
            out.append(nn.functional.pad(o, (0, self.obs_dim - d)) if d < self.obs_dim else o)
        return torch.stack(out, -2)

    def stack_avail(self, avail: Sequence[torch.Tensor | None] | None, lead: tuple[int, ...],
                    device: torch.device) -> torch.Tensor:
        """Per-agent masks (None: all of the agent's actions) -> ``(..., A, n)`` floats, padding unavailable."""
        exists = self.action_exists.to(device)
        masks = exists.expand(*lead, self.n_agents, self.n_actions).clone()
        if avail is not None:
            for i, a in enumerate(avail):
                if a is not None:
                    masks[..., i, : self.sizes[i]] = a.float().reshape(*lead, self.sizes[i])
        return masks

    def inputs(self, obs: torch.Tensor, last: torch.Tensor | None) -> torch.Tensor:
        """``obs`` (..., A, D) and the previous actions ``last`` (..., A) long (-1: none) -> (..., A, in_dim)."""
        parts = [obs]
        if self.last_action:
            assert last is not None, "a team with last_action inputs needs the previous actions"
            parts.append(one_hot(last, self.n_actions))
        if self.agent_id:
            parts.append(self.ids.to(obs.device).expand(*obs.shape[:-1], self.n_agents))
        return torch.cat(parts, -1) if len(parts) > 1 else obs

    # ------------------------------------------------------------------ networks

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step: ``x`` (N, A, in_dim), ``h`` (N, A, H) -> Q (N, A, n), next h (N, A, H)."""
        n = x.shape[0]
        if self.share_parameters:
            q, h2 = self.nets[0](x.reshape(n * self.n_agents, -1), h.reshape(n * self.n_agents, -1))
            return q.view(n, self.n_agents, -1), h2.view(n, self.n_agents, -1)
        outs = [net(x[:, i], h[:, i]) for i, net in enumerate(self.nets)]
        return torch.stack([o[0] for o in outs], 1), torch.stack([o[1] for o in outs], 1)

    def unroll(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """Q over whole episodes from their first step: ``x`` (B, T, A, in_dim) -> (B, T, A, n).

        Every state starts at zero at an episode's first step, so each agent's GRU runs over the
        whole sequence in one fused call (``AgentQNet.unroll``): the step loop's values up to float
        rounding (``unroll_loop`` is that loop, kept as the reference).  ``lengths`` (B,): the rows of
        each episode that matter (its real steps and the one after); where they are at most
        ``PACK_BELOW`` of the batch's rows, a GRU team computes only those and leaves 0 in the
        padding's Q, which the loss masks out (a feed-forward team computes all)."""
        b, t = x.shape[:2]
        if not self.recurrent:  # no state: every step at once
            h = x.new_zeros(b * t, self.n_agents, self.hidden_dim)
            return self(x.reshape(b * t, self.n_agents, -1), h)[0].view(b, t, self.n_agents, -1)
        if lengths is not None and float(lengths.sum()) > PACK_BELOW * b * t:
            lengths = None  # too little padding to pay for packing: the plain call
        seq = x.transpose(0, 1)                                   # (T, B, A, in_dim): time first
        nets = cast("list[AgentQNet]", list(self.nets))
        if self.share_parameters:
            rows = None if lengths is None else lengths.repeat_interleave(self.n_agents)
            q = nets[0].unroll(seq.reshape(t, b * self.n_agents, -1), rows)
            return q.view(t, b, self.n_agents, -1).transpose(0, 1)
        qs = [net.unroll(seq[:, :, i], lengths) for i, net in enumerate(nets)]  # each (T, B, n)
        return torch.stack(qs, 2).transpose(0, 1)

    def unroll_loop(self, x: torch.Tensor) -> torch.Tensor:
        """``unroll`` as one ``forward`` per step (EPyMARL's loop): the reference the fused unroll is tested against."""
        b, t = x.shape[:2]
        h = x.new_zeros(b, self.n_agents, self.hidden_dim)
        qs = []
        for k in range(t):
            q, h = self(x[:, k], h)
            qs.append(q)
        return torch.stack(qs, 1)

    # ------------------------------------------------------------------ acting

    def initial_hidden(self, n_envs: int, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(GRU states (n_envs, A, H) zeros, previous actions (n_envs, A) -1: none yet)."""
        return (torch.zeros(n_envs, self.n_agents, self.hidden_dim, device=device),
                torch.full((n_envs, self.n_agents), -1, dtype=torch.long, device=device))

    def q_step(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
               hidden: tuple[torch.Tensor, torch.Tensor], starts: torch.Tensor | None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(Q (N, A, n), masks (N, A, n), next GRU state) at one step of each env; the state and the
        previous action restart where ``starts`` (N,) is 1."""
        h, last = hidden
        if starts is not None:
            keep = (starts == 0).to(h.dtype).view(-1, 1, 1)
            h = h * keep
            last = torch.where(starts.view(-1, 1) != 0, torch.full_like(last, -1), last)
        x = self.stack_obs(obs)
        masks = self.stack_avail(avail, (x.shape[0],), x.device)
        q, h = self(self.inputs(x, last), h)
        return q, masks, h

    def act(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
            deterministic: bool = True, hidden: Any = None, starts: torch.Tensor | None = None
            ) -> tuple[list[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
        """(Greedy actions (``deterministic``; else epsilon-greedy at ``self.epsilon``), per agent ``(N, 1)``,
        the state for the next step: (GRU states, these actions)).  ``hidden`` is what the previous
        step returned (None: ``initial_hidden``), left as it was; the caller passes the new one back
        (``harl.evaluator.ActingPolicy``)."""
        if hidden is None:
            hidden = self.initial_hidden(obs[0].shape[0], obs[0].device)
        q, masks, h = self.q_step(obs, avail, hidden, starts)
        if deterministic or self.epsilon <= 0:
            actions = greedy(q, masks)
        else:
            actions = epsilon_greedy(q, masks, self.epsilon, None)
        return self.per_agent(actions), (h, actions)

    def per_agent(self, actions: torch.Tensor) -> list[torch.Tensor]:
        """(N, A) long -> per agent ``(N, 1)`` floats (how harl hands Discrete actions to envs)."""
        return [actions[:, i : i + 1].float() for i in range(self.n_agents)]

    def export_actors(self) -> list[AgentQActor]:
        """Each agent's greedy policy as a tensor function of its own inputs (``harl export``)."""
        return [AgentQActor(self, i) for i in range(self.n_agents)]


class AgentQActor(nn.Module):
    """One agent's greedy policy out of an ``AgentQNetworks``, with nothing but tensors in and out.

    ``forward(obs (B, d_i), avail (B, n_i) | None, hidden (B, H) | None, last (B,) long | None)``
    -> ``(action (B,) long, Q (B, n_i), next hidden (B, H))``: the agent's observation is
    padded as the team pads it, its one-hot id and previous action (-1: none, at an episode's
    first step) appended as the team appends them, and the action is the best available one,
    so the outputs equal the team's ``act(deterministic=True)`` for this agent.  It shares
    the network (and its weights) of the agent in the team.
    """

    id_row: torch.Tensor
    action_index: torch.Tensor

    def __init__(self, policy: AgentQNetworks, agent: int) -> None:
        super().__init__()
        self.net = policy.nets[0 if policy.share_parameters else agent]
        self.obs_dim, self.pad = policy.obs_dims[agent], policy.obs_dim - policy.obs_dims[agent]
        self.n, self.n_actions = policy.sizes[agent], policy.n_actions
        self.agent_id, self.last_action = policy.agent_id, policy.last_action
        self.recurrent, self.hidden_size = policy.recurrent, policy.hidden_dim
        self.register_buffer("id_row", torch.eye(policy.n_agents)[agent].clone(), persistent=False)
        self.register_buffer("action_index", torch.arange(policy.n_actions), persistent=False)

    def forward(self, obs: torch.Tensor, avail: torch.Tensor | None = None, hidden: torch.Tensor | None = None,
                last: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = obs.float().reshape(obs.shape[0], -1)
        parts = [nn.functional.pad(x, (0, self.pad)) if self.pad else x]
        if self.last_action:
            assert last is not None, "an agent with last_action inputs needs its previous action"
            parts.append((last.long().unsqueeze(-1) == self.action_index).float())  # -1: all zeros
        if self.agent_id:
            parts.append(self.id_row.expand(x.shape[0], -1))
        x = torch.cat(parts, -1) if len(parts) > 1 else parts[0]
        h = hidden if hidden is not None else x.new_zeros(x.shape[0], self.hidden_size)
        q, h = self.net(x, h)
        q = q[:, : self.n]
        return (greedy(q, avail) if avail is not None else q.argmax(-1)), q, h


def one_hot(actions: torch.Tensor, n: int) -> torch.Tensor:
    """``actions`` long, -1 for none -> one-hot floats (all zeros for -1)."""
    valid = actions >= 0
    out = nn.functional.one_hot(actions.clamp(min=0), n).float()
    return out * valid.unsqueeze(-1).float()


def greedy(q: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """The best available action: ``argmax`` over ``q`` where ``masks`` is 1 (…, n) -> (…) long."""
    return q.masked_fill(masks == 0, MASKED_Q).argmax(-1)


def epsilon_greedy(q: torch.Tensor, masks: torch.Tensor, epsilon: float | torch.Tensor,
                   generator: torch.Generator | None) -> torch.Tensor:
    """Per agent and row: with probability ``epsilon`` a uniformly random available action, else greedy.

    ``epsilon``: one value, or a CPU tensor that broadcasts against the ``(rows, agents)`` actions
    (``(rows, 1)``: one per env, as the episode collector's ``per_episode`` epsilons); the draws
    are the same either way.

    The draws come from ``generator`` (a CPU generator; None: torch's global one), so that
    exploration does not depend on the device.  As EPyMARL's ``EpsilonGreedyActionSelector``.
    """
    best = greedy(q, masks)
    flat = masks.reshape(-1, masks.shape[-1]).float().cpu()
    coin = torch.rand(flat.shape[0], generator=generator)
    random = torch.multinomial(flat, 1, generator=generator).squeeze(-1)
    pick = (coin.view(best.shape) < epsilon).to(best.device)
    return torch.where(pick, random.view(best.shape).to(best.device), best)


if not TYPE_CHECKING:  # mypy does not see old names, so harl's own code cannot use one
    __getattr__ = old_names(__name__, {"AgentQTeam": ("AgentQNetworks", AgentQNetworks)})  # a team: agents now
