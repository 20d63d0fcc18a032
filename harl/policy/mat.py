"""The Multi-Agent Transformer (Wen et al. 2022): the acting network of MAT and MAT-Dec.

One module acts for the whole team.  An encoder reads every agent's observation (a token per
agent, self-attention over the agents, no mask) and gives each agent a representation and a
value; a decoder emits the agents' actions one after another, agent ``i``'s action
distribution reading the representations and the actions of agents ``0 .. i-1`` only::

    tokens_in = [start, a_0, a_1, ..., a_{A-2}]          # the actions shifted right by one
    x = LN(embed(tokens_in))
    per block: x = LN(x + causal_self_attention(x))
               x = LN(rep + causal_attention(query=rep, key=x, value=x))
               x = LN(x + MLP(x))
    logits_i (or the Gaussian's mean_i) = head(x)_i

Acting (collection and evaluation) decodes auto-regressively, one agent per decoder pass, each
agent's sampled action fed to the next; the update decodes all agents in one pass from the
stored actions (teacher forcing), which gives the same distributions for the same actions
(``tests/mat``).  MAT-Dec (``decentralised``) swaps the decoder for an MLP on the agent's own
observation (``share_actor``: one MLP shared by every agent, as MAT's train scripts set for
``mat_dec`` and ``[updater.objective] kind = "mat_dec"`` defaults to; or one per agent), so no
agent's action depends on another's; the encoder and its values stay.

Facts from PKU-MARL/Multi-Agent-Transformer (``mat/algorithms/mat/algorithm/ma_transformer.py``,
``mat/algorithms/utils/transformer_act.py``), written anew: orthogonal initialisation, gain
0.01 for every layer not followed by a GELU (sqrt(2) before one), zero biases; the discrete
start token is a one-hot in an extra first column; masked actions get logit -1e10; a Box
action's Gaussian has standard deviation ``0.5 * sigmoid(theta)`` with ``theta`` a learned
vector initialised to ones; the encoder reads the observations (MAT's ``encode_state`` off,
its default).  Agents whose observations are narrower than the widest are zero-padded.
Agents act in a fixed order (agent 0 first), as MAT decodes, or in the order ``set_order`` gives
(``[updater.objective] order = "random"``: a permutation drawn for each rollout, which the update of
that rollout uses too), or (``order = "episode"``, as HAPPO draws its agents' order) in a permutation
drawn for each episode of each env during collection, logged step by step for the update
(``take_orders``); evaluation and export decode in ``order``.  The encoder has no positional
embedding, so the order changes only who decodes first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from harl.errors import ConfigError

MASKED_LOGIT = -1e10
"""The logit of an unavailable action (MAT's)."""

RELU_GAIN = math.sqrt(2.0)


def _linear(n_in: int, n_out: int, gain: float = 0.01, bias: bool = True) -> nn.Linear:
    """Orthogonal weights with ``gain``, zero bias: MAT's initialisation."""
    layer = nn.Linear(n_in, n_out, bias=bias)
    nn.init.orthogonal_(layer.weight, gain=gain)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)
    return layer


class Attention(nn.Module):
    """Multi-head attention over the agents' tokens; ``causal``: token ``i`` sees tokens ``<= i``."""

    causal_mask: torch.Tensor

    def __init__(self, n_embd: int, n_head: int, n_agents: int, causal: bool) -> None:
        super().__init__()
        self.n_head = n_head
        self.causal = causal
        self.key = _linear(n_embd, n_embd)
        self.query = _linear(n_embd, n_embd)
        self.value = _linear(n_embd, n_embd)
        self.proj = _linear(n_embd, n_embd)
        self.register_buffer("causal_mask", torch.tril(torch.ones(n_agents, n_agents, dtype=torch.bool)),
                             persistent=False)

    def forward(self, key: torch.Tensor, value: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        batch, length, width = query.shape
        heads, size = self.n_head, width // self.n_head

        def split(x: torch.Tensor) -> torch.Tensor:
            return x.view(batch, length, heads, size).transpose(1, 2)  # (B, heads, L, size)

        k, q, v = split(self.key(key)), split(self.query(query)), split(self.value(value))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(size)
        if self.causal:
            scores = scores.masked_fill(~self.causal_mask[:length, :length], float("-inf"))
        out = torch.softmax(scores, -1) @ v
        return self.proj(out.transpose(1, 2).reshape(batch, length, width))


def _mlp(n_embd: int) -> nn.Sequential:
    """A block's feed-forward part: Linear -> GELU -> Linear, as wide as the tokens."""
    return nn.Sequential(_linear(n_embd, n_embd, RELU_GAIN), nn.GELU(), _linear(n_embd, n_embd))


class EncoderBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int, n_agents: int) -> None:
        super().__init__()
        self.attn = Attention(n_embd, n_head, n_agents, causal=False)
        self.mlp = _mlp(n_embd)
        self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.attn(x, x, x))
        return self.ln2(x + self.mlp(x))


class DecoderBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int, n_agents: int) -> None:
        super().__init__()
        self.self_attn = Attention(n_embd, n_head, n_agents, causal=True)
        self.cross_attn = Attention(n_embd, n_head, n_agents, causal=True)
        self.mlp = _mlp(n_embd)
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)

    def forward(self, x: torch.Tensor, rep: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.self_attn(x, x, x))
        x = self.ln2(rep + self.cross_attn(key=x, value=x, query=rep))
        return self.ln3(x + self.mlp(x))


def _head(n_embd: int, n_out: int) -> nn.Sequential:
    """Linear -> GELU -> LayerNorm -> Linear: MAT's value and action heads."""
    return nn.Sequential(_linear(n_embd, n_embd, RELU_GAIN), nn.GELU(), nn.LayerNorm(n_embd),
                         _linear(n_embd, n_out))


def _embed(n_in: int, n_embd: int) -> nn.Sequential:
    """LayerNorm -> Linear -> GELU: an observation's token."""
    return nn.Sequential(nn.LayerNorm(n_in), _linear(n_in, n_embd, RELU_GAIN), nn.GELU())


def _own_actor(obs_dim: int, n_embd: int, n_out: int) -> nn.Sequential:
    """MAT-Dec's per-agent decoder: an MLP of two hidden layers on the agent's observation."""
    return nn.Sequential(nn.LayerNorm(obs_dim), _linear(obs_dim, n_embd, RELU_GAIN), nn.GELU(), nn.LayerNorm(n_embd),
                         _linear(n_embd, n_embd, RELU_GAIN), nn.GELU(), nn.LayerNorm(n_embd),
                         _linear(n_embd, n_out))


class TeamSample(NamedTuple):
    """One step of the team as ``sample`` draws it (the fields the on-policy collector reads)."""

    actions: list[torch.Tensor]
    """Per agent ``(E, k)``: a category index (k = 1) or the Box's values."""
    log_probs: list[torch.Tensor]
    """Per agent ``(E, k)`` per-dimension log-probabilities (as the rollout buffer stores them)."""
    hidden: None
    """Nothing is carried between steps."""


class MultiAgentTransformer(nn.Module):
    """MAT's encoder and decoder for ``n_agents`` agents with one action space.

    Tensors are team-major: observations ``(B, A, d)``, actions ``(B, A, k)``, available-action
    masks ``(B, A, n)``; values ``(B, A)`` in the units the value normaliser gives them.  The
    public methods take and give agents in the env's order; ``encode``, ``decode`` and
    ``decode_autoregressive`` work in decoding order (position ``p`` is agent ``order[p]``).
    """

    order: torch.Tensor
    env_orders: torch.Tensor

    def __init__(self, observation_spaces: Sequence[spaces.Space], action_spaces: Sequence[spaces.Space],
                 n_block: int, n_embd: int, n_head: int, decentralised: bool = False, share_actor: bool = False,
                 source: str = "pipeline") -> None:
        super().__init__()
        self.n_agents = len(action_spaces)
        space = action_spaces[0]
        if any(s != space for s in action_spaces[1:]):
            raise ConfigError(f"{source}: updater.objective: MAT decodes one action space for every agent, but the "
                              f"agents' differ ({', '.join(map(str, action_spaces))})")
        if isinstance(space, spaces.Discrete):
            self.discrete, self.action_dim, self.width = True, int(space.n), 1
        elif isinstance(space, spaces.Box) and len(space.shape) == 1:
            self.discrete, self.action_dim = False, int(space.shape[0])
            self.width = self.action_dim
        else:
            raise ConfigError(f"{source}: updater.objective: MAT acts in a Discrete or a flat Box action space, "
                              f"not {space}")
        for s in observation_spaces:
            if not isinstance(s, spaces.Box) or len(s.shape) != 1:
                raise ConfigError(f"{source}: updater.objective: MAT reads flat Box observations, got {s}")
        self.obs_dims = [int(np.prod(s.shape or ())) for s in observation_spaces]
        self.obs_dim = max(self.obs_dims)
        if n_embd % n_head:
            raise ConfigError(f"{source}: updater.objective.n_embd ({n_embd}) must be a multiple of n_head ({n_head})")
        self.decentralised = decentralised
        self.share_actor = share_actor
        # the encoder: a token per agent's observation, attention over all agents, a value per agent
        self.obs_embed = _embed(self.obs_dim, n_embd)
        self.enc_ln = nn.LayerNorm(n_embd)
        self.encoder = nn.ModuleList(EncoderBlock(n_embd, n_head, self.n_agents) for _ in range(n_block))
        self.value_head = _head(n_embd, 1)
        # the decoder
        if decentralised:
            count = 1 if share_actor else self.n_agents
            self.own_actors = nn.ModuleList(_own_actor(self.obs_dim, n_embd, self.action_dim) for _ in range(count))
        else:
            token = self.action_dim + 1 if self.discrete else self.action_dim
            self.action_embed = nn.Sequential(_linear(token, n_embd, RELU_GAIN, bias=not self.discrete), nn.GELU())
            self.dec_ln = nn.LayerNorm(n_embd)
            self.decoder = nn.ModuleList(DecoderBlock(n_embd, n_head, self.n_agents) for _ in range(n_block))
            self.action_head = _head(n_embd, self.action_dim)
        if not self.discrete:
            self.std_param = nn.Parameter(torch.ones(self.action_dim))
            """The Gaussian's standard deviation is ``0.5 * sigmoid(std_param)`` (MAT's ``log_std``)."""
        self.register_buffer("order", torch.arange(self.n_agents))
        """The decoding order: position ``p`` decodes agent ``order[p]`` (saved with the weights)."""
        self.fixed_order = True
        self.register_buffer("env_orders", torch.zeros(0, self.n_agents, dtype=torch.long))
        """``order = "episode"``: each collection env's decoding order in its running episode ``(E, A)``
        (saved with the weights, so a resumed episode keeps its order; empty until the first step)."""
        self.episode_generator: torch.Generator | None = None
        """``order = "episode"``: where collection draws each new episode's order (None: not drawn)."""
        self.collected_orders: list[torch.Tensor] = []
        """``order = "episode"``: the ``(E, A)`` orders of each step collected since ``take_orders``."""

    def set_order(self, order: torch.Tensor) -> None:
        """Decode the agents in ``order`` from the next step on (MAT-Dec: no agent reads another, no effect)."""
        if self.decentralised:
            return
        self.order.copy_(order)
        self.fixed_order = bool(torch.equal(order.cpu(), torch.arange(self.n_agents)))

    def draw_episode_orders(self, generator: torch.Generator) -> None:
        """Collection decodes each episode of each env in its own order, drawn from ``generator`` where
        the episode begins (``order = "episode"``); acting outside collection (evaluation, export) keeps
        ``order``.  MAT-Dec: no agent reads another, nothing to draw."""
        if not self.decentralised:
            self.episode_generator = generator

    def episode_orders(self, starts: Any, n_envs: int) -> torch.Tensor:
        """The ``(E, A)`` orders of this collection step: a new permutation for every env whose episode
        begins (``starts`` 1), the running one for the others; logged for ``take_orders``."""
        assert self.episode_generator is not None
        device = self.env_orders.device
        begins = (torch.ones(n_envs, dtype=torch.bool) if starts is None or self.env_orders.shape[0] != n_envs
                  else torch.as_tensor(starts).reshape(n_envs).cpu() > 0)
        if self.env_orders.shape[0] != n_envs:
            self.env_orders = torch.zeros(n_envs, self.n_agents, dtype=torch.long, device=device)
        rows = torch.nonzero(begins).view(-1)
        if len(rows):
            drawn = torch.rand(len(rows), self.n_agents, generator=self.episode_generator).argsort(-1)
            self.env_orders[rows.to(device)] = drawn.to(device)
        self.collected_orders.append(self.env_orders.clone())
        return self.env_orders

    def take_orders(self) -> torch.Tensor | None:
        """The ``(T, E, A)`` orders of the steps collected since the last call (None: not ``order =
        "episode"``); the log starts anew."""
        if self.episode_generator is None:
            return None
        orders, self.collected_orders = self.collected_orders, []
        return torch.stack(orders) if orders else self.env_orders.new_zeros(0, *self.env_orders.shape)

    @staticmethod
    def permute_rows(x: torch.Tensor, orders: torch.Tensor) -> torch.Tensor:
        """``(B, A, ...)`` with row ``b``'s agents taken in ``orders[b]`` (``(B, A)``): ``y[b, p] = x[b, orders[b, p]]``."""
        index = orders.view(*orders.shape, *([1] * (x.dim() - 2))).expand_as(x)
        return x.gather(1, index.to(x.device))

    def _to_decoding(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, A, ...)`` from the env's agent order to the decoding order."""
        return x if self.fixed_order else x[:, self.order]

    def _to_env(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, A, ...)`` from the decoding order back to the env's."""
        return x if self.fixed_order else x[:, torch.argsort(self.order)]

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        # weights saved before the order was (harl ce055d2) decode in the fixed order
        state_dict.setdefault(prefix + "order", torch.arange(self.n_agents))
        orders = state_dict.setdefault(prefix + "env_orders", self.env_orders)  # saved before harl had it
        self.env_orders = torch.zeros_like(orders, device=self.env_orders.device)  # as many envs as saved
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.fixed_order = bool(torch.equal(self.order.cpu(), torch.arange(self.n_agents)))

    # ------------------------------------------------------------------ harl's policy interface

    @property
    def actors(self) -> list[nn.Module]:
        """The networks one learner trains: the whole transformer (one objective learner, one optimiser)."""
        return [self]

    hidden_size = 0
    """Nothing is carried from step to step."""

    def initial_hidden(self, n_envs: int, device: Any = "cpu") -> None:
        return None

    def export_actors(self) -> list[nn.Module]:
        raise ConfigError("MAT's agents act through one transformer, decoding one agent after another; "
                          "its agents have no modules of their own; harl export ships the whole team as one "
                          "TorchScript module (harl.export.joint)")

    def stack_obs(self, obs: Sequence[Any]) -> torch.Tensor:
        """Per-agent ``(..., d_i)`` observations -> ``(..., A, d)``, zero-padded to the widest."""
        device = self.weights_device()
        rows = [torch.as_tensor(o, dtype=torch.float32, device=device) for o in obs]
        rows = [nn.functional.pad(o, (0, self.obs_dim - o.shape[-1])) if o.shape[-1] < self.obs_dim else o
                for o in rows]
        return torch.stack(rows, -2)

    def weights_device(self) -> torch.device:
        """Where the weights are (what ``stack_obs`` moves the observations to)."""
        return next(self.parameters()).device

    def _stack_avail(self, avail: Sequence[Any] | None) -> torch.Tensor | None:
        if avail is None or not self.discrete or any(a is None for a in avail):
            return None
        device = self.weights_device()
        return torch.stack([torch.as_tensor(a, dtype=torch.float32, device=device) for a in avail], -2)

    @torch.no_grad()
    def sample(self, obs: Sequence[Any], avail: Sequence[Any] | None, deterministic: bool = False,
               hidden: Any = None, starts: Any = None) -> TeamSample:
        """One step of every agent in every env, decoded one agent after another, with the
        per-dimension log-probabilities of the actions (what the collector stores).  ``order =
        "episode"``: each env's agents in its episode's order (``starts``: 1 where an episode begins)."""
        if self.episode_generator is not None:
            stacked = self.stack_obs(obs)
            orders = self.episode_orders(starts, stacked.shape[0])
            return self._sample_in(stacked, self._stack_avail(avail), deterministic,
                                   lambda x: self.permute_rows(x, orders),
                                   lambda x: self.permute_rows(x, orders.argsort(-1)))
        return self._act(obs, avail, deterministic)

    def _act(self, obs: Sequence[Any], avail: Sequence[Any] | None, deterministic: bool) -> TeamSample:
        """A step in ``order`` (every env alike)."""
        return self._sample_in(self.stack_obs(obs), self._stack_avail(avail), deterministic, self._to_decoding,
                               self._to_env)

    def _sample_in(self, obs: torch.Tensor, mask: torch.Tensor | None, deterministic: bool,
                   to_decoding: Any, to_env: Any) -> TeamSample:
        x = to_decoding(obs)
        _, rep = self.encode(x)
        actions, log_probs = self.decode_autoregressive(x, rep, None if mask is None else to_decoding(mask),
                                                        deterministic)
        actions, log_probs = to_env(actions), to_env(log_probs)
        return TeamSample(list(actions.unbind(1)), list(log_probs.unbind(1)), None)

    @torch.no_grad()
    def act(self, obs: Sequence[Any], avail: Sequence[Any] | None, deterministic: bool = True,
            hidden: Any = None, starts: Any = None) -> tuple[list[torch.Tensor], None]:
        """``(actions, next hidden)`` as every family's policy acts (``harl.evaluator.ActingPolicy``):
        agents in ``order`` (also with ``order = "episode"``, whose draws are collection's alone)."""
        return self._act(obs, avail, deterministic).actions, None

    # ------------------------------------------------------------------ the network

    def encode(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, A, d)`` observations -> (values ``(B, A)``, representations ``(B, A, n_embd)``)."""
        rep = self.enc_ln(self.obs_embed(obs))
        for block in self.encoder:
            rep = block(rep)
        return self.value_head(rep).squeeze(-1), rep

    def decode(self, tokens: torch.Tensor, rep: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        """Every agent's logits (or Gaussian mean) ``(B, A, n)`` from the shifted action tokens."""
        if self.decentralised:
            if self.share_actor:
                return self.own_actors[0](obs)
            return torch.stack([actor(obs[:, i]) for i, actor in enumerate(self.own_actors)], 1)
        x = self.dec_ln(self.action_embed(tokens))
        for block in self.decoder:
            x = block(x, rep)
        return self.action_head(x)

    def shifted(self, actions: torch.Tensor) -> torch.Tensor:
        """``(B, A, k)`` actions -> ``(B, A, token)`` decoder inputs: the start token, then agent
        ``i - 1``'s action at position ``i`` (a one-hot after the start column when discrete)."""
        batch = actions.shape[0]
        if self.discrete:
            tokens = actions.new_zeros(batch, self.n_agents, self.action_dim + 1)
            tokens[:, 0, 0] = 1.0
            one_hot = nn.functional.one_hot(actions[:, :-1, 0].long(), self.action_dim).to(tokens.dtype)
            tokens[:, 1:, 1:] = one_hot
            return tokens
        tokens = actions.new_zeros(batch, self.n_agents, self.action_dim)
        tokens[:, 1:] = actions[:, :-1]
        return tokens

    def std(self) -> torch.Tensor:
        return 0.5 * torch.sigmoid(self.std_param)

    def _log_probs(self, out: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
        """Masked log-softmax of discrete logits."""
        if avail is not None:
            out = out.masked_fill(avail == 0, MASKED_LOGIT)
        return torch.log_softmax(out, -1)

    def decode_autoregressive(self, obs: torch.Tensor, rep: torch.Tensor, avail: torch.Tensor | None,
                              deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Actions ``(B, A, k)`` and their per-dimension log-probabilities, agent 0 first, each
        agent's action entering the next agent's token (MAT-Dec: one pass, no agent reads another)."""
        batch, n = obs.shape[0], self.n_agents
        actions = obs.new_zeros(batch, n, self.width)
        log_probs = obs.new_zeros(batch, n, self.width)
        for i in range(1 if self.decentralised else n):
            out = self.decode(self.shifted(actions), rep, obs)
            chosen = slice(None) if self.decentralised else slice(i, i + 1)
            out = out[:, chosen]
            if self.discrete:
                logp = self._log_probs(out, None if avail is None else avail[:, chosen])
                a = logp.argmax(-1) if deterministic else torch.distributions.Categorical(logits=logp).sample()
                actions[:, chosen, 0] = a.float()
                log_probs[:, chosen, 0] = logp.gather(-1, a.unsqueeze(-1)).squeeze(-1)
            else:
                gauss = torch.distributions.Normal(out, self.std().expand_as(out))
                a = out if deterministic else gauss.sample()
                actions[:, chosen] = a
                log_probs[:, chosen] = gauss.log_prob(a)
        return actions, log_probs

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor, avail: torch.Tensor | None,
                 orders: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Teacher-forced: (per-dimension log-probs ``(B, A, k)``, entropies ``(B, A, k)``, values
        ``(B, A)``) of stored actions, every agent in one decoder pass (agents in the env's order).
        ``orders`` ``(B, A)``: each row decoded in its own order (``order = "episode"``), else ``order``."""
        if orders is not None:
            inverse = orders.argsort(-1)
            obs, actions = self.permute_rows(obs, orders), self.permute_rows(actions, orders)
            avail = None if avail is None else self.permute_rows(avail, orders)
            return tuple(self.permute_rows(x, inverse)  # type: ignore[return-value]
                         for x in self.evaluate_in_order(obs, actions, avail))
        if not self.fixed_order:
            obs, actions = self._to_decoding(obs), self._to_decoding(actions)
            avail = None if avail is None else self._to_decoding(avail)
            return tuple(self._to_env(x) for x in self.evaluate_in_order(obs, actions, avail))  # type: ignore[return-value]
        return self.evaluate_in_order(obs, actions, avail)

    def evaluate_in_order(self, obs: torch.Tensor, actions: torch.Tensor, avail: torch.Tensor | None
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``evaluate`` with the agents already in decoding order."""
        values, rep = self.encode(obs)
        out = self.decode(self.shifted(actions), rep, obs)
        if self.discrete:
            logp = self._log_probs(out, avail)
            taken = logp.gather(-1, actions.long())
            entropy = -(logp.exp() * logp).sum(-1, keepdim=True)
            return taken, entropy, values
        gauss = torch.distributions.Normal(out, self.std().expand_as(out))
        return gauss.log_prob(actions), gauss.entropy(), values


def transformer_policy(config: Any, parts: Any) -> MultiAgentTransformer:
    """The policy an ``updater.objective`` of kind ``mat`` / ``mat_dec`` trains (``order = "random"``:
    the first rollout's order drawn from the run's generator)."""
    policy = MultiAgentTransformer(parts.obs_spaces, parts.act_spaces, config.n_block, config.n_embd, config.n_head,
                                   decentralised=getattr(config, "decentralised", False),
                                   share_actor=getattr(config, "share_actor", False), source=parts.source)
    order = getattr(config, "order", "fixed")
    if order == "random":
        policy.set_order(torch.randperm(policy.n_agents, generator=parts.generator))
    elif order == "episode":
        policy.draw_episode_orders(parts.generator)
    return policy
