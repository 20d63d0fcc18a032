"""The Multi-Agent Transformer (Wen et al. 2022): the network of MAT and MAT-Dec.

An encoder reads every agent's observation (a token per agent, self-attention over the agents, no
mask) and gives each agent a representation and a value; a decoder gives agent ``i``'s action
distribution from the representations and the actions of agents ``0 .. i-1`` only::

    tokens_in = [start, a_0, a_1, ..., a_{A-2}]          # the actions shifted right by one
    x = LN(embed(tokens_in))
    per block: x = LN(x + causal_self_attention(x))
               x = LN(rep + causal_attention(query=rep, key=x, value=x))
               x = LN(x + MLP(x))
    logits_i (or the Gaussian's mean_i) = head(x)_i

MAT-Dec (``decentralised``) swaps the decoder for an MLP on the agent's own observation
(``share_actor``: one MLP shared by every agent, as MAT's train scripts set for ``mat_dec``; or one
per agent), so no agent's action depends on another's; the encoder and its values stay.

This module is the network and nothing else; beside it:

- ``harl.policy.mat_layers``: attention, the blocks, embeddings and heads (MAT's initialisation);
- ``harl.policy.mat_decode``: decoding, one agent after another (acting) or every agent in one pass
  from given actions (the update's teacher forcing), in any decoding order;
- ``harl.policy.mat_orders``: the decoding orders' draws (``order = "random"`` / ``"episode"``);
- ``harl.policy.mat_migrate``: what weights saved by older harl need to load;
- ``harl.policy.mat_policy``: harl's policy over this network (sampling a step for the collector,
  acting for evaluation).

Facts from PKU-MARL/Multi-Agent-Transformer (``mat/algorithms/mat/algorithm/ma_transformer.py``),
written anew: the discrete start token is a one-hot in an extra first column; a Box action's
Gaussian has standard deviation ``0.5 * sigmoid(theta)`` with ``theta`` a learned vector
initialised to ones; the encoder reads the observations (MAT's ``encode_state`` off, its default),
each followed by the agent's one-hot id where ``agent_id`` (MAT's envs append it: ``agent_id_feats``
in its MPE, SMAC and MuJoCo envs).  Agents whose observations are narrower than the widest are
zero-padded before their ids.  The encoder has no
positional embedding, so the decoding order changes only who decodes first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from harl.errors import ConfigError
from harl.policy import mat_migrate
from harl.policy.mat_layers import RELU_GAIN, DecoderBlock, EncoderBlock, embed, head, linear, own_actor

MASKED_LOGIT = -1e10
"""The logit of an unavailable action (MAT's)."""


class MultiAgentTransformer(nn.Module):
    """MAT's encoder, decoder and heads for ``n_agents`` agents with one action space.

    Tensors are team-major: observations ``(B, A, d)``, actions ``(B, A, k)``; ``encode`` and
    ``decode`` work in decoding order (position ``p`` is the ``p``-th agent to decode).  ``order`` is
    the order acting decodes in outside collection (evaluation, export), saved with the weights.
    """

    order: torch.Tensor

    def __init__(self, observation_spaces: Sequence[spaces.Space], action_spaces: Sequence[spaces.Space],
                 n_block: int, n_embd: int, n_head: int, decentralised: bool = False, share_actor: bool = False,
                 source: str = "pipeline", agent_id: bool = False) -> None:
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
        self.agent_id = agent_id
        self.in_dim = self.obs_dim + (self.n_agents if agent_id else 0)
        """The width of an agent's token before its embedding: the observation, then its id where ``agent_id``."""
        if n_embd % n_head:
            raise ConfigError(f"{source}: updater.objective.n_embd ({n_embd}) must be a multiple of n_head ({n_head})")
        self.decentralised = decentralised
        self.share_actor = share_actor
        # the encoder: a token per agent's observation, attention over all agents, a value per agent
        self.obs_embed = embed(self.in_dim, n_embd)
        self.enc_ln = nn.LayerNorm(n_embd)
        self.encoder = nn.ModuleList(EncoderBlock(n_embd, n_head, self.n_agents) for _ in range(n_block))
        self.value_head = head(n_embd, 1)
        # the decoder
        if decentralised:
            count = 1 if share_actor else self.n_agents
            self.own_actors = nn.ModuleList(own_actor(self.in_dim, n_embd, self.action_dim) for _ in range(count))
        else:
            token = self.action_dim + 1 if self.discrete else self.action_dim
            self.action_embed = nn.Sequential(linear(token, n_embd, RELU_GAIN, bias=not self.discrete), nn.GELU())
            self.dec_ln = nn.LayerNorm(n_embd)
            self.decoder = nn.ModuleList(DecoderBlock(n_embd, n_head, self.n_agents) for _ in range(n_block))
            self.action_head = head(n_embd, self.action_dim)
        if not self.discrete:
            self.std_param = nn.Parameter(torch.ones(self.action_dim))
            """The Gaussian's standard deviation is ``0.5 * sigmoid(std_param)`` (MAT's ``log_std``)."""
        self.register_buffer("order", torch.arange(self.n_agents))
        self.fixed_order = True
        """``order`` is agent 0 first (acting permutes nothing)."""

    def set_order(self, order: torch.Tensor) -> None:
        """Act in ``order`` from now on (MAT-Dec: no agent reads another, no effect)."""
        if self.decentralised:
            return
        self.order.copy_(order)
        self.fixed_order = bool(torch.equal(order.cpu(), torch.arange(self.n_agents)))

    def identify(self, obs: torch.Tensor) -> torch.Tensor:
        """``(..., A, obs_dim)`` observations in the env's agent order -> ``(..., A, in_dim)``: agent ``i``'s
        one-hot id after its observation where ``agent_id`` (MAT's envs' ``agent_id_feats``), else as they are."""
        if not self.agent_id:
            return obs
        ids = torch.eye(self.n_agents, dtype=obs.dtype, device=obs.device).expand(*obs.shape[:-1], self.n_agents)
        return torch.cat([obs, ids], -1)

    def _to_decoding(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, A, ...)`` from the env's agent order to ``order``."""
        return x if self.fixed_order else x[:, self.order]

    def _to_env(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, A, ...)`` from ``order`` back to the env's agent order."""
        return x if self.fixed_order else x[:, torch.argsort(self.order)]

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
            tokens[:, 1:, 1:] = nn.functional.one_hot(actions[:, :-1, 0].long(), self.action_dim).to(tokens.dtype)
            return tokens
        tokens = actions.new_zeros(batch, self.n_agents, self.action_dim)
        tokens[:, 1:] = actions[:, :-1]
        return tokens

    def std(self) -> torch.Tensor:
        return 0.5 * torch.sigmoid(self.std_param)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        mat_migrate.migrate(state_dict, prefix, self.n_agents)  # weights saved by older harl
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.fixed_order = bool(torch.equal(self.order.cpu(), torch.arange(self.n_agents)))
