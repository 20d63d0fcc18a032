"""Sable's encoder-decoder network: values from the encoder, actions from the decoder.

* Encoder: RMSNorm -> Linear(obs, E, no bias) -> GELU embeds each agent's observation; each block
  is retention (not causal) + RMSNorm, SwiGLU + RMSNorm; the value head reads its output
  (Mava 73c4611 mava/networks/sable_network.py:32-166).
* Decoder: the agents' shifted actions (a start token for each timestep's first agent, then the
  previous agent's action) embedded and RMS-normed; each block is causal self-retention over them,
  causal cross-retention (query: the encoder's output) and SwiGLU, each with an RMSNorm; the action
  head gives logits, or the mean of a Gaussian with a learned log-std (sable_network.py:169-369).
* ``evaluate``: the training call over a whole rollout (parallel, or chunkwise over whole
  timesteps) with episode-start flags: values, log-probs and entropy of the given actions
  (discrete_trainer_executor.py:26-204).
* ``act``: one timestep, encoder over all agents at once, decoder agent by agent, sampling
  autoregressively and carrying the three states of shape ``network_hidden_shape``
  (discrete_trainer_executor.py:240-339). Unlike 73c4611 (which hands every agent the timestep's
  starting decoder state) the decoder state is carried from agent to agent, so ``act`` and
  ``evaluate`` compute the same log-probs.
"""

from __future__ import annotations

import math
from typing import NamedTuple, cast

import torch
from torch import nn
from torch.nn import functional as F

from harl.nets.sable.retention import MultiScaleRetention, network_hidden_shape

_RMS_EPS = 1e-6  # flax RMSNorm's epsilon


class SableHidden(NamedTuple):
    """The three carried states, each (B, n_head, n_block, hs, hs) (Mava's HiddenStates, with the
    decoder's pair split into its self- and cross-retention parts)."""

    encoder: torch.Tensor
    decoder_self: torch.Tensor
    decoder_cross: torch.Tensor


class SableEvaluation(NamedTuple):
    """The training call's output, each (B, T, N), and the states after the last timestep."""

    values: torch.Tensor
    log_probs: torch.Tensor
    entropy: torch.Tensor
    hidden: SableHidden


class SableAction(NamedTuple):
    """The acting call's output: actions (B, N) (discrete) or (B, N, A), log-probs and values (B, N)."""

    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    hidden: SableHidden


def _dense(n_in: int, n_out: int, gain: float, bias: bool = True) -> nn.Linear:
    """A Linear with orthogonal weights of ``gain`` and zero bias, as flax's Dense(kernel_init=orthogonal)."""
    layer = nn.Linear(n_in, n_out, bias=bias)
    nn.init.orthogonal_(layer.weight, gain)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)
    return layer


def _gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")  # flax nn.gelu defaults to the tanh approximation


class SwiGLU(nn.Module):
    """swish(x W_gate) * (x W_linear), then W_output; all three start at zero as Mava's
    (mava/utils/sable_utils.py:27-53)."""

    def __init__(self, hidden_dim: int, input_dim: int) -> None:
        super().__init__()
        self.w_linear = nn.Parameter(torch.zeros(input_dim, hidden_dim))
        self.w_gate = nn.Parameter(torch.zeros(input_dim, hidden_dim))
        self.w_output = nn.Parameter(torch.zeros(hidden_dim, input_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (F.silu(x @ self.w_gate) * (x @ self.w_linear)) @ self.w_output


class EncodeBlock(nn.Module):
    """x = ln1(x + retention(x)); ln2(x + ffn(x)) (sable_network.py:32-77)."""

    def __init__(self, embed_dim: int, n_head: int, n_agents: int, decay_scaling_factor: float,
                 positional_encoding: bool) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.RMSNorm(embed_dim, eps=_RMS_EPS), nn.RMSNorm(embed_dim, eps=_RMS_EPS)
        self.retn = MultiScaleRetention(embed_dim, n_head, n_agents, causal=False,
                                        decay_scaling_factor=decay_scaling_factor,
                                        positional_encoding=positional_encoding)
        self.ffn = SwiGLU(embed_dim, embed_dim)

    def _finish(self, x: torch.Tensor, ret: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + ret)
        return self.ln2(x + self.ffn(x))

    def forward(self, x: torch.Tensor, h: torch.Tensor, starts: torch.Tensor, chunk: int | None,
                steps: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        if chunk is None:
            ret, h = self.retn(x, x, x, h, starts, steps)
        else:
            ret, h = self.retn.chunkwise(x, x, x, h, starts, chunk, steps)
        return self._finish(x, ret), h

    def recurrent(self, x: torch.Tensor, h: torch.Tensor, starts: torch.Tensor,
                  steps: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        ret, h = self.retn.recurrent(x, x, x, h, starts, True, steps)
        return self._finish(x, ret), h

    def agent_chunks(self, x: torch.Tensor, h: torch.Tensor, starts: torch.Tensor, chunk: int,
                     steps: torch.Tensor | None, causal_chunks: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        ret, h = self.retn.agent_chunks(x, x, x, h, starts, chunk, steps, causal_chunks)
        return self._finish(x, ret), h


class DecodeBlock(nn.Module):
    """r = ln1(x + self_retention(x)); y = ln2(obs_rep + cross_retention(key=r, query=obs_rep,
    value=r)); ln3(y + ffn(y)), both retentions causal (sable_network.py:169-257)."""

    def __init__(self, embed_dim: int, n_head: int, n_agents: int, decay_scaling_factor: float,
                 positional_encoding: bool) -> None:
        super().__init__()
        self.ln1, self.ln2, self.ln3 = (nn.RMSNorm(embed_dim, eps=_RMS_EPS) for _ in range(3))
        self.retn1, self.retn2 = (
            MultiScaleRetention(embed_dim, n_head, n_agents, causal=True,
                                decay_scaling_factor=decay_scaling_factor,
                                positional_encoding=positional_encoding) for _ in range(2))
        self.ffn = SwiGLU(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor, obs_rep: torch.Tensor, h1: torch.Tensor, h2: torch.Tensor,
                starts: torch.Tensor, chunk: int | None, steps: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if chunk is None:
            ret, h1 = self.retn1(x, x, x, h1, starts, steps)
        else:
            ret, h1 = self.retn1.chunkwise(x, x, x, h1, starts, chunk, steps)
        ret = self.ln1(x + ret)
        if chunk is None:
            ret2, h2 = self.retn2(ret, obs_rep, ret, h2, starts, steps)
        else:
            ret2, h2 = self.retn2.chunkwise(ret, obs_rep, ret, h2, starts, chunk, steps)
        y = self.ln2(obs_rep + ret2)
        return self.ln3(y + self.ffn(y)), h1, h2

    def agent_chunks(self, x: torch.Tensor, obs_rep: torch.Tensor, h1: torch.Tensor, h2: torch.Tensor,
                     starts: torch.Tensor, chunk: int, steps: torch.Tensor | None
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One timestep of every agent, retention in chunks of ``chunk`` agents (``forward``'s function)."""
        ret, h1 = self.retn1.agent_chunks(x, x, x, h1, starts, chunk, steps)
        ret = self.ln1(x + ret)
        ret2, h2 = self.retn2.agent_chunks(ret, obs_rep, ret, h2, starts, chunk, steps)
        y = self.ln2(obs_rep + ret2)
        return self.ln3(y + self.ffn(y)), h1, h2

    def recurrent(self, x: torch.Tensor, obs_rep: torch.Tensor, h1: torch.Tensor, h2: torch.Tensor,
                  starts: torch.Tensor, new_timestep: bool, steps: torch.Tensor | None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ret, h1 = self.retn1.recurrent(x, x, x, h1, starts, new_timestep, steps)
        ret = self.ln1(x + ret)
        ret2, h2 = self.retn2.recurrent(ret, obs_rep, ret, h2, starts, new_timestep, steps)
        y = self.ln2(obs_rep + ret2)
        return self.ln3(y + self.ffn(y)), h1, h2


class SableNetwork(nn.Module):
    """Sable's network for ``n_agents`` agents; defaults are Mava's (configs/network/
    {ff,rec}_retention.yaml: n_block 1, embed_dim 64, n_head 1, decay_scaling_factor 0.8,
    no timestep encoding, no chunking).

    ``chunk_timesteps`` (Mava's timestep_chunk_size) makes ``evaluate`` chunkwise over that many
    timesteps at a time. ``chunk_agents`` (Mava's agents_chunk_size, the feed-forward variant's) makes
    ``evaluate`` run one timestep after another, retention over that many agents at a time
    (``agent_chunks``): the same function, its largest product (B, H, chunk, chunk) instead of
    (B, H, T*N, T*N); for the recurrent variant (Mava chunks it over timesteps only) this is harl's own. Continuous actions: the decoder's input is the previous agent's action
    (zeros for the first agent), the head gives the mean, and a state-independent log-std starts at 0.
    """

    def __init__(self, obs_dim: int, action_dim: int, n_agents: int, discrete: bool = True,
                 n_block: int = 1, embed_dim: int = 64, n_head: int = 1,
                 decay_scaling_factor: float = 0.8, positional_encoding: bool = False,
                 chunk_timesteps: int | None = None, chunk_agents: int | None = None,
                 causal_chunks: bool = False) -> None:
        super().__init__()
        for name, value in (("obs_dim", obs_dim), ("action_dim", action_dim), ("n_agents", n_agents),
                            ("n_block", n_block)):
            if value < 1:
                raise ValueError(f"sable network: {name} must be positive, got {value}")
        if chunk_timesteps is not None and chunk_timesteps < 1:
            raise ValueError(f"sable network: chunk_timesteps must be positive, got {chunk_timesteps}")
        if chunk_agents is not None and (chunk_agents < 1 or n_agents % chunk_agents):
            raise ValueError(f"sable network: chunk_agents must be a positive divisor of the {n_agents} agents, "
                             f"got {chunk_agents}")
        if chunk_agents is not None and chunk_timesteps is not None:
            raise ValueError("sable network: chunk_agents (single timesteps) and chunk_timesteps (rollouts) "
                             "exclude each other")
        self.chunk_agents = chunk_agents
        self.causal_chunks = causal_chunks and chunk_agents is not None
        """Mava 73c4611's chunked encoder: an agent reads its own chunk and the chunks before it (acting too)."""
        self.obs_dim, self.action_dim, self.n_agents, self.discrete = obs_dim, action_dim, n_agents, discrete
        self.n_block, self.embed_dim, self.n_head = n_block, embed_dim, n_head
        self.chunk_timesteps = chunk_timesteps
        gain = math.sqrt(2)
        # Encoder (sable_network.py:90-122).
        self.enc_ln = nn.RMSNorm(embed_dim, eps=_RMS_EPS)
        self.obs_encoder = nn.Sequential(nn.RMSNorm(obs_dim, eps=_RMS_EPS), _dense(obs_dim, embed_dim, gain, bias=False))
        self.value_head = nn.Sequential(_dense(embed_dim, embed_dim, gain), nn.GELU(approximate="tanh"),
                                        nn.RMSNorm(embed_dim, eps=_RMS_EPS), _dense(embed_dim, 1, 0.01))
        self.enc_blocks = nn.ModuleList(
            EncodeBlock(embed_dim, n_head, n_agents, decay_scaling_factor, positional_encoding)
            for _ in range(n_block))
        # Decoder (sable_network.py:272-312): discrete input is one-hot with a start slot, no bias.
        action_in = action_dim + 1 if discrete else action_dim
        self.dec_ln = nn.RMSNorm(embed_dim, eps=_RMS_EPS)
        self.action_encoder = _dense(action_in, embed_dim, gain, bias=not discrete)
        self.log_std = None if discrete else nn.Parameter(torch.zeros(action_dim))
        self.action_head = nn.Sequential(_dense(embed_dim, embed_dim, gain), nn.GELU(approximate="tanh"),
                                         nn.RMSNorm(embed_dim, eps=_RMS_EPS), _dense(embed_dim, action_dim, 0.01))
        self.dec_blocks = nn.ModuleList(
            DecodeBlock(embed_dim, n_head, n_agents, decay_scaling_factor, positional_encoding)
            for _ in range(n_block))

    # -- states -------------------------------------------------------------------------------

    def initial_hidden(self, batch: int) -> SableHidden:
        """Zero states for ``batch`` parallel environments."""
        shape = network_hidden_shape(batch, self.n_head, self.n_block, self.embed_dim)
        device = self.enc_ln.weight.device
        dtype = self.enc_ln.weight.dtype
        return SableHidden(*(torch.zeros(shape, device=device, dtype=dtype) for _ in range(3)))

    def _check_hidden(self, hidden: SableHidden, batch: int) -> None:
        want = network_hidden_shape(batch, self.n_head, self.n_block, self.embed_dim)
        for name, h in zip(SableHidden._fields, hidden, strict=True):
            if tuple(h.shape) != want:
                raise ValueError(f"sable network: hidden.{name} of shape {tuple(h.shape)}, expected {want} "
                                 "(batch, n_head, n_block, head_size, head_size)")

    # -- pieces -------------------------------------------------------------------------------

    def _encode_blocks(self) -> list[EncodeBlock]:
        return [cast(EncodeBlock, blk) for blk in self.enc_blocks]

    def _decode_blocks(self) -> list[DecodeBlock]:
        return [cast(DecodeBlock, blk) for blk in self.dec_blocks]

    def _embed_obs(self, obs: torch.Tensor) -> torch.Tensor:
        return _gelu(self.obs_encoder(obs))

    def _embed_actions(self, shifted: torch.Tensor) -> torch.Tensor:
        return self.dec_ln(_gelu(self.action_encoder(shifted)))

    def _start_token(self, lead: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        """Discrete: e_0 of width A + 1 (discrete_trainer_executor.py:192); continuous: zeros."""
        width = self.action_dim + 1 if self.discrete else self.action_dim
        token = torch.zeros(*lead, width, dtype=like.dtype, device=like.device)
        if self.discrete:
            token[..., 0] = 1
        return token

    def _action_input(self, actions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """An action as the decoder reads it: one-hot after the start slot, or the raw vector."""
        if self.discrete:
            return F.pad(F.one_hot(actions.long(), self.action_dim).to(dtype), (1, 0))
        return actions.to(dtype)

    def _distribution(self, out: torch.Tensor, legal: torch.Tensor | None
                      ) -> torch.distributions.Distribution:
        if self.discrete:
            if legal is not None:
                out = torch.where(legal.bool(), out, torch.finfo(out.dtype).min)
            return torch.distributions.Categorical(logits=out)
        assert self.log_std is not None
        std = self.log_std.to(out.dtype).exp().expand_as(out)
        return torch.distributions.Independent(torch.distributions.Normal(out, std), 1)

    def _check_obs(self, obs: torch.Tensor, lead: int) -> None:
        dims = "(B, T, N, obs_dim)" if lead == 2 else "(B, N, obs_dim)"
        if obs.dim() != lead + 2 or obs.shape[-2] != self.n_agents or obs.shape[-1] != self.obs_dim:
            raise ValueError(f"sable network: observations of shape {tuple(obs.shape)}, expected {dims} "
                             f"with N={self.n_agents} and obs_dim={self.obs_dim}")

    def _check_rest(self, lead_shape: tuple[int, ...], actions: torch.Tensor | None, starts: torch.Tensor,
                    legal: torch.Tensor | None) -> None:
        if tuple(starts.shape) != lead_shape[:-1]:
            raise ValueError(f"sable network: starts of shape {tuple(starts.shape)}, expected "
                             f"{lead_shape[:-1]} (one episode-start flag per timestep)")
        if actions is not None:
            want = lead_shape if self.discrete else (*lead_shape, self.action_dim)
            if tuple(actions.shape) != want:
                raise ValueError(f"sable network: actions of shape {tuple(actions.shape)}, expected {want}")
        if legal is not None:
            if not self.discrete:
                raise ValueError("sable network: legal-action masks apply to discrete actions only")
            if tuple(legal.shape) != (*lead_shape, self.action_dim):
                raise ValueError(f"sable network: legal actions of shape {tuple(legal.shape)}, "
                                 f"expected {(*lead_shape, self.action_dim)}")

    # -- training call ------------------------------------------------------------------------

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor, hidden: SableHidden, starts: torch.Tensor,
                 legal: torch.Tensor | None = None, step_count: torch.Tensor | None = None
                 ) -> SableEvaluation:
        """Values, log-probs and entropy of ``actions`` over a rollout of T timesteps.

        obs (B, T, N, obs_dim); actions (B, T, N) (discrete) or (B, T, N, A); ``hidden`` the
        states before the rollout's first timestep; starts (B, T) True where an episode begins
        (the carried state is then dropped); legal (B, T, N, A) optional; step_count (B, T, N)
        when timestep encoding is on. Mava's SableNetwork.__call__ (sable_network.py:438-470).
        """
        self._check_obs(obs, 2)
        b, t, n, _ = obs.shape
        self._check_rest((b, t, n), actions, starts, legal)
        self._check_hidden(hidden, b)
        if self.chunk_timesteps is not None and t % self.chunk_timesteps:
            raise ValueError(f"sable network: {t} timesteps are not whole chunks of {self.chunk_timesteps}")
        if self.chunk_agents is not None:  # timestep by timestep, the state carried, agents in chunks
            steps_out = []
            for j in range(t):
                steps_out.append(self._evaluate_agent_chunks(
                    obs[:, j], actions[:, j], hidden, starts[:, j], None if legal is None else legal[:, j],
                    None if step_count is None else step_count[:, j]))
                hidden = steps_out[-1].hidden
            return SableEvaluation(torch.cat([e.values for e in steps_out], 1),
                                   torch.cat([e.log_probs for e in steps_out], 1),
                                   torch.cat([e.entropy for e in steps_out], 1), hidden)
        chunk = None if self.chunk_timesteps is None else self.chunk_timesteps * n
        tok_starts = starts.bool().repeat_interleave(n, dim=1)
        steps = None if step_count is None else step_count.reshape(b, t * n)
        # Encoder.
        x = self._embed_obs(obs.reshape(b, t * n, self.obs_dim))
        enc_h = []
        for i, eblock in enumerate(self._encode_blocks()):
            x, h = eblock(self.enc_ln(x), hidden.encoder[:, :, i], tok_starts, chunk, steps)
            enc_h.append(h)
        values = self.value_head(x).reshape(b, t, n)
        obs_rep = x
        # Decoder over the shifted actions (get_shifted_actions, discrete_trainer_executor.py:182-204).
        taken = self._action_input(actions, obs_rep.dtype)
        shifted = torch.cat([self._start_token((b, t, 1), obs_rep), taken[:, :, :-1]], dim=2)
        y = self._embed_actions(shifted.reshape(b, t * n, -1))
        self_h, cross_h = [], []
        for i, dblock in enumerate(self._decode_blocks()):
            y, h1, h2 = dblock(y, obs_rep, hidden.decoder_self[:, :, i], hidden.decoder_cross[:, :, i],
                               tok_starts, chunk, steps)
            self_h.append(h1)
            cross_h.append(h2)
        out = self.action_head(y).reshape(b, t, n, self.action_dim)
        dist = self._distribution(out, legal)
        new_hidden = SableHidden(torch.stack(enc_h, 2), torch.stack(self_h, 2), torch.stack(cross_h, 2))
        return SableEvaluation(values, dist.log_prob(actions), dist.entropy(), new_hidden)

    def _evaluate_agent_chunks(self, obs: torch.Tensor, actions: torch.Tensor, hidden: SableHidden,
                               starts: torch.Tensor, legal: torch.Tensor | None, steps: torch.Tensor | None
                               ) -> SableEvaluation:
        """``evaluate`` of one timestep per row (obs (B, N, d)), retention over ``chunk_agents`` agents at a time."""
        b, n, _ = obs.shape
        chunk = cast(int, self.chunk_agents)
        starts = starts.bool()
        values, obs_rep, enc_state = self.encode_step(obs, hidden.encoder, starts, steps)
        taken = self._action_input(actions, obs_rep.dtype)
        shifted = torch.cat([self._start_token((b, 1), obs_rep), taken[:, :-1]], dim=1)
        y = self._embed_actions(shifted)
        self_h, cross_h = [], []
        for i, dblock in enumerate(self._decode_blocks()):
            y, h1, h2 = dblock.agent_chunks(y, obs_rep, hidden.decoder_self[:, :, i], hidden.decoder_cross[:, :, i],
                                            starts, chunk, steps)
            self_h.append(h1)
            cross_h.append(h2)
        out = self.action_head(y)
        dist = self._distribution(out, legal)
        new_hidden = SableHidden(enc_state, torch.stack(self_h, 2), torch.stack(cross_h, 2))
        return SableEvaluation(values[:, None], dist.log_prob(actions)[:, None], dist.entropy()[:, None], new_hidden)

    # -- acting call --------------------------------------------------------------------------

    def act(self, obs: torch.Tensor, hidden: SableHidden, starts: torch.Tensor,
            legal: torch.Tensor | None = None, deterministic: bool = False,
            generator: torch.Generator | None = None, step_count: torch.Tensor | None = None
            ) -> SableAction:
        """One timestep: obs (B, N, obs_dim), ``hidden`` the states after the previous timestep,
        starts (B,) True where this timestep begins an episode; legal (B, N, A) optional;
        step_count (B, N) when timestep encoding is on. Samples agent by agent (Mava's
        get_actions and autoregressive_act, sable_network.py:472-510)."""
        self._check_obs(obs, 1)
        b, n, _ = obs.shape
        self._check_rest((b, n), None, starts, legal)
        self._check_hidden(hidden, b)
        starts = starts.bool()
        values, obs_rep, enc_state = self.encode_step(obs, hidden.encoder, starts, step_count)
        # Decoder: agent by agent, each state carried to the next agent.
        self_h = [hidden.decoder_self[:, :, i] for i in range(self.n_block)]
        cross_h = [hidden.decoder_cross[:, :, i] for i in range(self.n_block)]
        token = self._start_token((b, 1), obs_rep)
        acts, logps = [], []
        for a in range(n):
            y = self._embed_actions(token)
            steps = None if step_count is None else step_count[:, a:a + 1]
            for i, dblock in enumerate(self._decode_blocks()):
                y, self_h[i], cross_h[i] = dblock.recurrent(y, obs_rep[:, a:a + 1], self_h[i], cross_h[i],
                                                            starts, a == 0, steps)
            out = self.action_head(y)[:, 0]
            dist = self._distribution(out, None if legal is None else legal[:, a])
            action = self._sample(dist, out, deterministic, generator)
            acts.append(action)
            logps.append(dist.log_prob(action))
            token = self._action_input(action, obs_rep.dtype)[:, None]
        new_hidden = SableHidden(enc_state, torch.stack(self_h, 2), torch.stack(cross_h, 2))
        return SableAction(torch.stack(acts, 1), torch.stack(logps, 1), values, new_hidden)

    def encode_step(self, obs: torch.Tensor, encoder: torch.Tensor, starts: torch.Tensor,
                    step_count: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The encoder's recurrent call over one timestep, all agents at once: (values (B, N), its
        output (B, N, E), its state after the timestep) (Mava's execute_encoder_parallel); with
        ``chunk_agents`` through ``agent_chunks`` (the same function, or Mava's chunk-causal one with
        ``causal_chunks``, execute_encoder_chunkwise), in acting and training alike."""
        x = self._embed_obs(obs)
        enc_h = []
        for i, eblock in enumerate(self._encode_blocks()):
            if self.chunk_agents is None:
                x, h = eblock.recurrent(self.enc_ln(x), encoder[:, :, i], starts.bool(), step_count)
            else:
                x, h = eblock.agent_chunks(self.enc_ln(x), encoder[:, :, i], starts.bool(), self.chunk_agents,
                                           step_count, self.causal_chunks)
            enc_h.append(h)
        return self.value_head(x).squeeze(-1), x, torch.stack(enc_h, 2)

    def _sample(self, dist: torch.distributions.Distribution, out: torch.Tensor, deterministic: bool,
                generator: torch.Generator | None) -> torch.Tensor:
        if self.discrete:
            assert isinstance(dist, torch.distributions.Categorical)
            if deterministic:
                return dist.probs.argmax(-1)
            return torch.multinomial(dist.probs, 1, generator=generator)[:, 0]
        if deterministic:
            return out
        assert self.log_std is not None
        noise = torch.randn(out.shape, generator=generator, dtype=out.dtype, device=out.device)
        return out + self.log_std.to(out.dtype).exp() * noise
