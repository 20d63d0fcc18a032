"""PQN's Q network (Gallici et al., ICLR 2025; JaxMARL's ``baselines/QLearning/pqn_vdn_ff.py`` and
``pqn_vdn_rnn.py``): one network shared by the agents, acting on observations padded to one width
with the agent's one-hot id appended (JaxMARL's ``CTRolloutManager(preprocess_obs=True)``,
``jaxmarl/wrappers/baselines.py:452-463``).

::

    x = pad(obs_i) ++ onehot(i)                      (N, A, D)
    [BatchNorm(x)]                                   input_norm (pqn_vdn_rnn.py:81-85)
    repeat len(hidden_sizes): Linear -> norm -> ReLU (pqn_vdn_ff.py:57-60; norm: layer_norm,
                                                      batch_norm or none)
    [GRU cell, reset where an episode starts]        recurrent = "gru" (pqn_vdn_rnn.py:28-48, 92-93)
    Linear -> Q (N, A, K)                            (or dueling: V + A - mean A, pqn_vdn_ff.py:63-68)

Weights as flax's ``nn.Dense`` defaults: kernels LeCun-normal (a normal of variance 1 / fan_in
truncated at two standard deviations), biases zero; LayerNorm's epsilon is flax's 1e-6, and
BatchNorm's running averages follow flax's momentum 0.99 (torch momentum 0.01).  BatchNorm uses
the batch's statistics in the loss (``train()``) and the running ones when acting (``eval()``),
as JaxMARL's ``train=True`` / ``False``.  Actions an agent lacks (a smaller action space, or the
env's mask) are masked to -1e10 below the rest, as ``get_greedy_actions`` (pqn_vdn_ff.py:105-108).
``harl export`` ships each agent's greedy policy as a ``PQNActor`` (``PQNPolicy.export_actors``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from harl.errors import ConfigError
from harl.settings import each_positive, one_of, setting

NORMS = ("layer_norm", "batch_norm", "none")
MASK_PENALTY = 1e10
"""What JaxMARL subtracts from an unavailable action's Q (``q - (1 - avail) * 1e10``)."""
TRUNC = 0.87962566103423978
"""The standard deviation of a unit normal truncated to [-2, 2], by which flax's truncated
``variance_scaling`` divides its scale so the kept draws have the variance asked for."""


@attrs.frozen
class PQNPolicyConfig:
    """``[policy]`` of the PQN family: the agents' one shared Q network (JaxMARL's ``QNetwork``)."""

    hidden_sizes: tuple[int, ...] = setting(
        (256, 256), "widths of the hidden layers (JaxMARL: NUM_LAYERS x HIDDEN_SIZE; MPE 2 x 256, SMAX 2 x 512)",
        each_positive())
    norm: str = setting("layer_norm", "after each hidden Linear: layer_norm (PQN's), batch_norm or none "
                        "(JaxMARL's NORM_TYPE)", one_of(NORMS))
    input_norm: bool = setting(False, "BatchNorm on the network's input (JaxMARL's NORM_INPUT; its SMAX config: true)")
    recurrent: str = setting("none", "none: feed-forward (pqn_vdn_ff.py); gru: a GRU cell after the MLP, reset where "
                             "an episode starts (pqn_vdn_rnn.py)", one_of(("none", "gru")))
    dueling: bool = setting(False, "Q = V + A - mean(A) from two heads (JaxMARL's DUELING, off for MPE and SMAX)")


def lecun_(linear: nn.Linear) -> nn.Linear:
    """flax ``nn.Dense``'s initialisation: LeCun-normal truncated at 2 std, zero bias."""
    std = math.sqrt(1.0 / linear.in_features) / TRUNC
    nn.init.trunc_normal_(linear.weight, std=std, a=-2 * std, b=2 * std)
    nn.init.zeros_(linear.bias)
    return linear


def _norm(kind: str, width: int) -> nn.Module:
    if kind == "layer_norm":
        return nn.LayerNorm(width, eps=1e-6)
    if kind == "batch_norm":
        return nn.BatchNorm1d(width, eps=1e-5, momentum=0.01)
    return nn.Identity()


def _flat_norm(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Apply a norm over the last axis of any shape (BatchNorm1d wants (rows, width))."""
    return norm(x.reshape(-1, x.shape[-1])).view(x.shape)


class PQNQNetwork(nn.Module):
    """The shared Q network; see the module docstring."""

    def __init__(self, in_dim: int, n_actions: int, config: PQNPolicyConfig) -> None:
        super().__init__()
        self.in_norm = _norm("batch_norm", in_dim) if config.input_norm else nn.Identity()
        layers: list[nn.Module] = []
        norms: list[nn.Module] = []
        width = in_dim
        for h in config.hidden_sizes:
            layers.append(lecun_(nn.Linear(width, h)))
            norms.append(_norm(config.norm, h))
            width = h
        self.layers = nn.ModuleList(layers)
        self.norms = nn.ModuleList(norms)
        self.recurrent = config.recurrent == "gru"
        self.hidden_size = width if self.recurrent else 0
        self.gru = nn.GRUCell(width, width) if self.recurrent else None
        if self.gru is not None:  # flax GRUCell: LeCun-normal input kernels, orthogonal recurrent ones, zero biases
            for name, p in self.gru.named_parameters():
                if name.startswith("weight_ih"):
                    for chunk in p.data.chunk(3, 0):
                        std = math.sqrt(1.0 / width) / TRUNC
                        nn.init.trunc_normal_(chunk, std=std, a=-2 * std, b=2 * std)
                elif name.startswith("weight_hh"):
                    for chunk in p.data.chunk(3, 0):
                        nn.init.orthogonal_(chunk)
                else:
                    nn.init.zeros_(p)
        self.dueling = config.dueling
        self.head = lecun_(nn.Linear(width, n_actions))
        self.value = lecun_(nn.Linear(width, 1)) if config.dueling else None

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """(..., D) -> (..., W): the MLP's output."""
        x = _flat_norm(self.in_norm, x)
        for layer, norm in zip(self.layers, self.norms):
            x = torch.relu(_flat_norm(norm, layer(x)))
        return x

    def q(self, y: torch.Tensor) -> torch.Tensor:
        adv = self.head(y)
        if self.value is None:
            return adv
        return self.value(y) + adv - adv.mean(-1, keepdim=True)

    def step(self, x: torch.Tensor, hidden: torch.Tensor | None, starts: torch.Tensor | None
             ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One step: ``x`` (N, A, D), ``hidden`` (N, A, H), ``starts`` (N,) -> Q (N, A, K), next hidden."""
        y = self.features(x)
        if self.gru is None:
            return self.q(y), None
        assert hidden is not None
        if starts is not None:
            hidden = hidden * (1 - starts.view(-1, *([1] * (hidden.dim() - 1))).to(hidden.dtype))
        h = self.gru(y.reshape(-1, y.shape[-1]), hidden.reshape(-1, hidden.shape[-1])).view(hidden.shape)
        return self.q(h), h

    def unroll(self, x: torch.Tensor, hidden: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        """A sequence: ``x`` (L, N, A, D) from ``hidden`` (N, A, H), ``starts`` (L, N) -> Q (L, N, A, K).

        The MLP (and its norms) runs over the whole sequence at once, as JaxMARL's network does
        before its scanned GRU (so BatchNorm's statistics are the sequence's)."""
        y = self.features(x)
        outs = []
        assert self.gru is not None
        h = hidden
        for t in range(x.shape[0]):
            h = h * (1 - starts[t].view(-1, 1, 1).to(h.dtype))
            h = self.gru(y[t].reshape(-1, y.shape[-1]), h.reshape(-1, h.shape[-1])).view(h.shape)
            outs.append(h)
        return self.q(torch.stack(outs))


class PQNPolicy(nn.Module):
    """The agents' acting networks for PQN: inputs made as JaxMARL's rollout manager makes them, one
    shared ``PQNQNetwork``, greedy acting for evaluation (``harl.evaluator.ActingPolicy``)."""

    def __init__(self, obs_spaces: Sequence[spaces.Box], act_spaces: Sequence[spaces.Space],
                 config: PQNPolicyConfig, source: str = "pipeline") -> None:
        super().__init__()
        for i, space in enumerate(act_spaces):
            if not isinstance(space, spaces.Discrete):
                raise ConfigError(
                    f"{source}: PQN picks discrete actions by their Q values, but agent {i}'s action space is "
                    f"{space}; set the env's discrete actions (torch MPE: continuous_actions = false)")
        self.n_agents = len(obs_spaces)
        self.obs_dims = [int(np.prod(s.shape)) for s in obs_spaces]
        self.max_obs = max(self.obs_dims)
        self.n_actions = max(int(s.n) for s in act_spaces)  # type: ignore[attr-defined]
        self.own_actions = [int(s.n) for s in act_spaces]  # type: ignore[attr-defined]
        self.in_dim = self.max_obs + self.n_agents
        self.net = PQNQNetwork(self.in_dim, self.n_actions, config)
        self.recurrent = self.net.recurrent
        self.hidden_size = self.net.hidden_size
        self.ids: torch.Tensor
        self.own: torch.Tensor
        self.register_buffer("ids", torch.eye(self.n_agents), persistent=False)
        own = torch.zeros(self.n_agents, self.n_actions)
        for i, n in enumerate(self.own_actions):
            own[i, :n] = 1
        self.register_buffer("own", own, persistent=False)

    def inputs(self, obs: Sequence[Any]) -> torch.Tensor:
        """Per agent ``(N, *obs_shape_i)`` -> ``(N, A, D)``: each flattened, zero-padded to the widest,
        its agent's one-hot id appended (``CTRolloutManager._preprocess_obs``)."""
        device = self.ids.device
        return torch.stack([agent_input(torch.as_tensor(o, dtype=torch.float32, device=device), self.max_obs,
                                        self.ids[i]) for i, o in enumerate(obs)], 1)

    def masks(self, avail: Sequence[Any] | None, n: int) -> torch.Tensor:
        """``(N, A, K)`` 1 where an agent may take the action (its own actions, and the env's mask)."""
        masks = self.own.expand(n, -1, -1).clone()
        if avail is not None:
            for i, a in enumerate(avail):
                if a is not None:
                    k = self.own_actions[i]
                    masks[:, i, :k] = torch.as_tensor(a, dtype=torch.float32, device=masks.device).reshape(n, k)
        return masks

    def initial_hidden(self, n_envs: int, device: Any) -> torch.Tensor | None:
        if not self.recurrent:
            return None
        return torch.zeros(n_envs, self.n_agents, self.hidden_size, device=device)

    @torch.no_grad()
    def act(self, obs: Sequence[Any], avail: Sequence[Any] | None, deterministic: bool = True,
            hidden: Any = None, starts: torch.Tensor | None = None) -> tuple[list[torch.Tensor], Any]:
        """Greedy actions per agent ``(N, 1)`` (floats, as harl hands Discrete actions to envs) and the next GRU state (evaluation: JaxMARL's
        ``get_greedy_metrics``); exploration is the collector's."""
        x = self.inputs(obs)
        if self.recurrent and hidden is None:
            hidden = self.initial_hidden(x.shape[0], x.device)
        st = None if starts is None else torch.as_tensor(starts, dtype=torch.float32, device=x.device)
        with acting(self.net):
            q, hidden = self.net.step(x, hidden, st)
        best = masked(q, self.masks(avail, x.shape[0])).argmax(-1)
        return [best[:, i:i + 1].float() for i in range(self.n_agents)], hidden

    def export_actors(self) -> list[PQNActor]:
        """Each agent's greedy policy as a tensor function of its own inputs (``harl export``)."""
        return [PQNActor(self, i) for i in range(self.n_agents)]


class PQNActor(nn.Module):
    """One agent's greedy policy out of the shared ``PQNQNetwork``, with nothing but tensors in and out
    (what ``harl export`` traces; the value family's ``AgentQActor`` is its counterpart).

    ``forward(obs (B, d_i), avail (B, n_i) | None, hidden (B, H) | None, last=None)`` -> ``(action (B,)
    long, Q (B, n_i), next hidden (B, H) | None)``: the observation padded and the one-hot id appended
    as ``PQNPolicy.inputs`` does, BatchNorm on its running averages, the best action after the
    -1e10 mask, so the outputs equal the policy's ``act(deterministic=True)`` for this agent.  A GRU's
    state is zeros at an episode's first step.  ``last`` is unused (PQN takes no previous action); it
    is there because ``harl.export.deploy`` calls every agent Q actor with it.
    """

    id_row: torch.Tensor

    def __init__(self, policy: PQNPolicy, agent: int) -> None:
        super().__init__()
        self.net = policy.net
        self.width, self.n = policy.max_obs, policy.own_actions[agent]
        self.recurrent, self.hidden_size = policy.recurrent, policy.hidden_size
        self.last_action = False
        self.register_buffer("id_row", torch.eye(policy.n_agents)[agent].clone(), persistent=False)

    def forward(self, obs: torch.Tensor, avail: torch.Tensor | None = None, hidden: torch.Tensor | None = None,
                last: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        x = agent_input(obs, self.width, self.id_row)
        if self.recurrent and hidden is None:
            hidden = x.new_zeros(x.shape[0], self.hidden_size)
        with acting(self.net):
            q, h = self.net.step(x, hidden, None)
        q = q[:, : self.n]  # the agent's own actions: the rest are masked in the policy's act
        return (q.argmax(-1) if avail is None else masked(q, avail).argmax(-1)), q, h


def agent_input(obs: torch.Tensor, width: int, id_row: torch.Tensor) -> torch.Tensor:
    """One agent's ``(N, *obs_shape)`` -> ``(N, width + A)``: flattened, zero-padded to ``width``, its
    one-hot ``id_row`` appended (``CTRolloutManager._preprocess_obs``)."""
    x = obs.float().reshape(obs.shape[0], -1)
    if x.shape[1] < width:
        x = nn.functional.pad(x, (0, width - x.shape[1]))
    return torch.cat([x, id_row.expand(x.shape[0], -1)], -1)


@contextmanager
def acting(net: nn.Module) -> Iterator[None]:
    """``net`` in eval mode for the block (BatchNorm on its running averages, JaxMARL's ``train=False``),
    then back in the mode it was in."""
    was = net.training
    net.eval()
    try:
        yield
    finally:
        net.train(was)


def masked(q: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """``q - (1 - masks) * 1e10``: JaxMARL's masking of unavailable actions."""
    return q - (1 - masks) * MASK_PENALTY
