"""The Multi-Agent Transformer's layers (``harl.policy.mat``): attention over the agents' tokens, the
encoder's and decoder's blocks, the embeddings and heads, with MAT's initialisation.

Facts from PKU-MARL/Multi-Agent-Transformer (``mat/algorithms/mat/algorithm/ma_transformer.py``),
written anew: orthogonal weights, gain 0.01 for every layer not followed by a GELU (sqrt(2) before
one), zero biases.
"""

from __future__ import annotations

import math

import torch
from torch import nn

RELU_GAIN = math.sqrt(2.0)


def linear(n_in: int, n_out: int, gain: float = 0.01, bias: bool = True) -> nn.Linear:
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
        self.key = linear(n_embd, n_embd)
        self.query = linear(n_embd, n_embd)
        self.value = linear(n_embd, n_embd)
        self.proj = linear(n_embd, n_embd)
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


def mlp(n_embd: int) -> nn.Sequential:
    """A block's feed-forward part: Linear -> GELU -> Linear, as wide as the tokens."""
    return nn.Sequential(linear(n_embd, n_embd, RELU_GAIN), nn.GELU(), linear(n_embd, n_embd))


class EncoderBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int, n_agents: int) -> None:
        super().__init__()
        self.attn = Attention(n_embd, n_head, n_agents, causal=False)
        self.mlp = mlp(n_embd)
        self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.attn(x, x, x))
        return self.ln2(x + self.mlp(x))


class DecoderBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int, n_agents: int) -> None:
        super().__init__()
        self.self_attn = Attention(n_embd, n_head, n_agents, causal=True)
        self.cross_attn = Attention(n_embd, n_head, n_agents, causal=True)
        self.mlp = mlp(n_embd)
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)

    def forward(self, x: torch.Tensor, rep: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.self_attn(x, x, x))
        x = self.ln2(rep + self.cross_attn(key=x, value=x, query=rep))
        return self.ln3(x + self.mlp(x))


def head(n_embd: int, n_out: int) -> nn.Sequential:
    """Linear -> GELU -> LayerNorm -> Linear: MAT's value and action heads."""
    return nn.Sequential(linear(n_embd, n_embd, RELU_GAIN), nn.GELU(), nn.LayerNorm(n_embd),
                         linear(n_embd, n_out))


def embed(n_in: int, n_embd: int) -> nn.Sequential:
    """LayerNorm -> Linear -> GELU: an observation's token."""
    return nn.Sequential(nn.LayerNorm(n_in), linear(n_in, n_embd, RELU_GAIN), nn.GELU())


def own_actor(obs_dim: int, n_embd: int, n_out: int) -> nn.Sequential:
    """MAT-Dec's per-agent decoder: an MLP of two hidden layers on the agent's observation."""
    return nn.Sequential(nn.LayerNorm(obs_dim), linear(obs_dim, n_embd, RELU_GAIN), nn.GELU(), nn.LayerNorm(n_embd),
                         linear(n_embd, n_embd, RELU_GAIN), nn.GELU(), nn.LayerNorm(n_embd),
                         linear(n_embd, n_out))
