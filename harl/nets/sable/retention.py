"""Sable's gated multi-scale retention in its three forms, which compute the same function.

* ``forward``: parallel, one pass over a whole (B, T*N, E) sequence, for training.
* ``chunkwise``: ``forward`` over consecutive chunks, carrying the state, for long sequences.
* ``recurrent``: one timestep at a time (all its agents, or agent by agent), for acting.
* ``agent_chunks``: one timestep of many agents in chunks of agents, the state carried from chunk to
  chunk, for training the feed-forward Sable with memory linear in the agents (Mava's
  ff_retention.yaml ``agents_chunk_size``).

Each head h keeps a (head_size, head_size) state; the layer's state is (B, n_head, hs, hs).
Mirrors Mava 73c4611 mava/networks/retention.py (SimpleRetention, MultiScaleRetention).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from harl.nets.sable.decay import carry_decay, cross_decay, decay_matrix, head_decays
from harl.nets.sable.positional import timestep_encoding


def network_hidden_shape(batch: int, n_head: int, n_block: int, embed_dim: int) -> tuple[int, ...]:
    """The shape of each of Sable's three carried states (encoder, decoder self, decoder cross):
    (B, n_head, n_block, hs, hs), block i's layer reading [:, :, i] (mava/utils/sable_utils.py:72-93)."""
    size = embed_dim // n_head
    return (batch, n_head, n_block, size, size)


class MultiScaleRetention(nn.Module):
    """Retention with one decay per head, group-normed per head and gated by swish(key @ W_G).

    ``causal`` is the decoder's form (an agent sees only earlier agents of its timestep); the
    encoder's is not causal. Weights start normal with std 1/embed_dim, as Mava's do.
    """

    kappa: torch.Tensor

    def __init__(self, embed_dim: int = 64, n_head: int = 1, n_agents: int = 1, causal: bool = False,
                 decay_scaling_factor: float = 0.8, positional_encoding: bool = False) -> None:
        super().__init__()
        if n_head < 1 or embed_dim % n_head:
            raise ValueError(f"retention: embed_dim ({embed_dim}) must be a multiple of n_head ({n_head})")
        if n_agents < 1:
            raise ValueError(f"retention: n_agents must be positive, got {n_agents}")
        self.embed_dim, self.n_head, self.n_agents = embed_dim, n_head, n_agents
        self.head_size = embed_dim // n_head
        self.causal, self.positional_encoding = causal, positional_encoding
        self.register_buffer("kappa", head_decays(n_head, decay_scaling_factor).float(), persistent=False)
        self.w_q, self.w_k, self.w_v, self.w_g, self.w_o = (
            nn.Parameter(torch.randn(embed_dim, embed_dim) / embed_dim) for _ in range(5))
        self.group_norm = nn.GroupNorm(n_head, embed_dim, eps=1e-6)  # flax GroupNorm's epsilon

    def initial_state(self, batch: int) -> torch.Tensor:
        """The empty state a rollout starts from."""
        return torch.zeros(batch, self.n_head, self.head_size, self.head_size, device=self.w_q.device)

    def _split(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """(B, S, E) @ weight -> (B, H, S, hs)."""
        b, s, _ = x.shape
        return (x @ weight).view(b, s, self.n_head, self.head_size).transpose(1, 2)

    def _encode_steps(self, key: torch.Tensor, query: torch.Tensor, value: torch.Tensor,
                      step_count: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not self.positional_encoding:
            return key, query, value
        if step_count is None:
            raise ValueError("retention: positional_encoding is on, so each token's step_count is needed")
        pe = timestep_encoding(step_count, self.embed_dim).to(key.dtype)
        return key + pe, query + pe, value + pe

    def _gate(self, key: torch.Tensor, heads: torch.Tensor) -> torch.Tensor:
        """(B, H, S, hs) head outputs -> (B, S, E): group norm per head, swish gate from the key."""
        b, _, s, _ = heads.shape
        joined = heads.transpose(1, 2).reshape(b * s, self.embed_dim)
        normed = self.group_norm(joined).view(b, s, self.embed_dim)
        return (F.silu(key @ self.w_g) * normed) @ self.w_o

    def _check(self, value: torch.Tensor, hstate: torch.Tensor, starts: torch.Tensor | None) -> torch.Tensor:
        if starts is None:
            raise ValueError("retention: `starts` (the per-token episode-start mask, Mava's dones) is required; "
                             "pass zeros if no episode starts")
        want = (value.shape[0], self.n_head, self.head_size, self.head_size)
        if tuple(hstate.shape) != want:
            raise ValueError(f"retention: hidden state of shape {tuple(hstate.shape)}, expected {want}")
        return starts

    def forward(self, key: torch.Tensor, query: torch.Tensor, value: torch.Tensor, hstate: torch.Tensor,
                starts: torch.Tensor | None, step_count: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Parallel form over (B, T*N, E) tokens: (output, state after the last timestep).

        Inner part: ((Q K^T) * D) V with D the decay matrix; cross part: (Q h) * xi, the carried
        state h seen until the first episode start. New state: K^T (V * D[last row]) + h kappa**T,
        h dropped if an episode starts in the sequence (retention.py:54-86).
        """
        starts = self._check(value, hstate, starts)
        if value.shape[1] % self.n_agents:
            raise ValueError(f"retention: {value.shape[1]} tokens are not whole timesteps of {self.n_agents} agents")
        key, query, value = self._encode_steps(key, query, value, step_count)
        q, k, v = self._split(query, self.w_q), self._split(key, self.w_k), self._split(value, self.w_v)
        kappa = self.kappa.to(q.dtype)
        d = decay_matrix(starts, kappa, self.n_agents, self.causal).to(q.dtype)
        inner = ((q @ k.transpose(-1, -2)) * d) @ v
        cross = (q @ hstate) * cross_decay(starts, kappa, self.n_agents).to(q.dtype)
        last_row = d[:, :, -1, :, None]
        next_state = k.transpose(-1, -2) @ (v * last_row) + hstate * carry_decay(starts, kappa, self.n_agents)
        return self._gate(key, inner + cross), next_state

    def chunkwise(self, key: torch.Tensor, query: torch.Tensor, value: torch.Tensor, hstate: torch.Tensor,
                  starts: torch.Tensor | None, chunk_size: int, step_count: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """``forward`` over consecutive chunks of ``chunk_size`` tokens (whole timesteps), the state
        carried from one to the next (Mava's train_encoder_chunkwise / act_chunkwise)."""
        seq = value.shape[1]
        if chunk_size < 1 or chunk_size % self.n_agents or seq % chunk_size:
            raise ValueError(f"retention: chunk_size {chunk_size} must be a whole number of timesteps of "
                             f"{self.n_agents} agents and divide the sequence of {seq} tokens")
        starts = self._check(value, hstate, starts)
        outs = []
        for lo in range(0, seq, chunk_size):
            part = slice(lo, lo + chunk_size)
            steps = None if step_count is None else step_count[:, part]
            out, hstate = self.forward(key[:, part], query[:, part], value[:, part], hstate, starts[:, part], steps)
            outs.append(out)
        return torch.cat(outs, dim=1), hstate

    def agent_chunks(self, key: torch.Tensor, query: torch.Tensor, value: torch.Tensor, hstate: torch.Tensor,
                     starts: torch.Tensor | None, chunk_size: int, step_count: torch.Tensor | None = None,
                     causal_chunks: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """One timestep of tokens (B, N, E) in chunks of ``chunk_size`` agents: (output, state), equal
        to ``forward`` on that timestep (its output to float rounding, no (N, N) matrix made).

        The state entering the timestep is decayed by kappa, or dropped where ``starts`` (B,) says an
        episode begins, as ``recurrent`` does.  Not causal (the encoder): every agent reads the whole
        timestep, Q (h + K^T V), which needs no chunks.  Causal (the decoder): chunk c gives
        (tril(Q_c K_c^T)) V_c + Q_c h, then h += K_c^T V_c, so the largest product is (B, H, c, c).
        Mava 73c4611 instead runs its parallel form on each chunk in turn (train_encoder_chunkwise,
        act_chunkwise, execute_encoder_chunkwise), which for the encoder lets an agent read only its own
        chunk and the chunks before it: a different function from the unchunked one, which
        ``causal_chunks`` (not causal only) computes: chunk c gives (Q_c K_c^T) V_c + Q_c h.
        """
        starts = self._check(value, hstate, starts)
        n = value.shape[1]
        if chunk_size < 1 or n % chunk_size:
            raise ValueError(f"retention: agents_chunk_size {chunk_size} must divide the {n} agents")
        if starts.shape != (value.shape[0],):
            raise ValueError(f"retention: agent chunks take one start flag per row, shape ({value.shape[0]},), "
                             f"got {tuple(starts.shape)}")
        kappa = self.kappa.to(hstate.dtype)[None, :, None, None]
        state = torch.where(starts.bool()[:, None, None, None], torch.zeros_like(hstate), hstate * kappa)
        key, query, value = self._encode_steps(key, query, value, step_count)
        q, k, v = self._split(query, self.w_q), self._split(key, self.w_k), self._split(value, self.w_v)
        if not self.causal and not causal_chunks:
            state = state + k.transpose(-1, -2) @ v
            return self._gate(key, q @ state), state
        mask = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device)
        if self.causal:
            mask = mask.tril()
        outs = []
        for lo in range(0, n, chunk_size):
            qc, kc, vc = (x[:, :, lo:lo + chunk_size] for x in (q, k, v))
            scores = (qc @ kc.transpose(-1, -2)).masked_fill(~mask, 0.0)
            outs.append(scores @ vc + qc @ state)
            state = state + kc.transpose(-1, -2) @ vc
        return self._gate(key, torch.cat(outs, dim=2)), state

    def recurrent(self, key: torch.Tensor, query: torch.Tensor, value: torch.Tensor, hstate: torch.Tensor,
                  starts: torch.Tensor | None, new_timestep: bool = True, step_count: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """Recurrent form for tokens (B, n, E) of one timestep: (output, state).

        ``new_timestep`` (the timestep's first call) first decays the state by kappa and zeroes it
        where ``starts`` (B,) says an episode begins; Mava decays in get_actions and zeroes after
        the env step (sable_network.py:485-488, rec_sable.py:113-116). Then h += K^T V and each
        token reads Q h: the encoder passes all N agents at once, the causal decoder one agent per call.
        """
        starts = self._check(value, hstate, starts)
        if new_timestep:
            if starts.shape != (value.shape[0],):
                raise ValueError(f"retention: recurrent starts must be one flag per sequence, shape "
                                 f"({value.shape[0]},), got {tuple(starts.shape)}")
            kappa = self.kappa.to(hstate.dtype)[None, :, None, None]
            hstate = torch.where(starts.bool()[:, None, None, None], torch.zeros_like(hstate), hstate * kappa)
        key, query, value = self._encode_steps(key, query, value, step_count)
        q, k, v = self._split(query, self.w_q), self._split(key, self.w_k), self._split(value, self.w_v)
        hstate = hstate + k.transpose(-1, -2) @ v
        return self._gate(key, q @ hstate), hstate
