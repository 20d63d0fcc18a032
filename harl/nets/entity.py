"""Attention over entities: one network for observations made of a variable number of units.

An *entity observation* is a flat vector cut into groups of equal blocks, one block per entity
(SMAX's ``unit_list`` observation: a block per other ally, a block per enemy, then the agent's
own block).  ``EntityLayout`` says where each group lies; the env hands it on the space
(``with_entity_layout``: an ``entity_layout`` attribute of the ``Box``), so whatever reads the
space (an actor's base, the V critic's) finds it without a key of its own.

``EntityEncoder`` (``[policy] encoder = "entity"``, ``[critic] encoder = "entity"``)::

    token_e   = Linear_g(LN_g(features_e))            # one embedding per group name g (own, ally, enemy)
    present_e = features_e[presence] != 0              # SMAX: the health, 0 for a dead or unseen unit
    x = [summary, token_1, ..., token_n]               # a learned summary token, always present
    per block: x = x + MHA(LN(x)) over the present tokens;  x = x + MLP(LN(x))
    h = MLP([LN(x)_summary, mean of LN(x)_e over the present e])

No positional embedding and weights per group, not per entity: ``h`` is invariant to any
permutation of the entities within a group, each token's output follows its entity
(equivariant), and an entity that is not present changes nothing (it is no key, no part of
the mean).  The number of entities enters nowhere in the weights, so a network built for 3m
reads 5m_vs_6m once it is given that map's layout (``retarget``), and a 3m checkpoint loads into
the networks a 5m_vs_6m pipeline builds (``load_for_other_map``).

``EntityActionHead``: where the layout names a *target* group (SMAX: the enemies; action
``target_offset + k`` attacks enemy ``k``) and the action space is ``Discrete(target_offset +
count)``, the actor's head scores the first ``target_offset`` actions from ``h`` and action
``target_offset + k`` from ``h`` and enemy ``k``'s token (a scaled dot product), so the head too
has no weight per enemy and one policy acts on maps with other numbers of enemies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import torch
from gymnasium import spaces
from torch import nn

from harl.errors import ConfigError
from harl.nets.heads import _categorical_sample, _entropy, _masked_logits, add_up
from harl.nets.mlp import ACTIVATIONS, MLP, activation_gain, init_linear

HEADS = 4
"""Attention heads of every entity block (1 when the embedding width is not a multiple)."""
BLOCKS = 2
"""Attention blocks."""


@attrs.frozen
class EntityGroup:
    """``count`` entities of ``width`` features each, side by side from ``start`` of the flat vector."""

    name: str
    """The kind of entity (``own``, ``ally``, ``enemy``): its tokens share one embedding."""
    start: int
    count: int
    width: int

    @property
    def end(self) -> int:
        return self.start + self.count * self.width


@attrs.frozen
class EntityLayout:
    """Where each group of entities lies in a flat observation (or state) of ``size`` features."""

    groups: tuple[EntityGroup, ...]
    size: int
    targets: str | None = None
    """The group whose entities are action targets (SMAX: ``enemy``), or None."""
    target_offset: int = 0
    """Actions before the first target's (SMAX: 5 moves)."""
    presence: int | None = None
    """The feature of a block whose non-zero value says the entity is there (SMAX: 0, the health, zero for
    a dead or unseen unit); None: any non-zero feature."""

    def __attrs_post_init__(self) -> None:
        if any(g.end > self.size for g in self.groups):
            raise ValueError(f"an entity group ends past the vector's {self.size} features: {self.groups}")
        if self.targets is not None and self.group(self.targets) is None:
            raise ValueError(f"the target group {self.targets!r} is not among {[g.name for g in self.groups]}")

    def group(self, name: str) -> EntityGroup | None:
        return next((g for g in self.groups if g.name == name), None)

    @property
    def widths(self) -> dict[str, int]:
        """Each group name's features per entity (what the embeddings are built for)."""
        return {g.name: g.width for g in self.groups}


def with_entity_layout(space: spaces.Box, layout: EntityLayout) -> spaces.Box:
    """``space`` with ``layout`` attached as its ``entity_layout`` (an env's adapter calls this)."""
    if tuple(space.shape) != (layout.size,):
        raise ValueError(f"an entity layout of {layout.size} features on a space of shape {space.shape}")
    space.entity_layout = layout  # type: ignore[attr-defined]  # a plain attribute: pickled and copied with the space
    return space


def entity_layout(space: Any) -> EntityLayout | None:
    """The layout an env attached to ``space`` (None: not an entity observation)."""
    layout = getattr(space, "entity_layout", None)
    return layout if isinstance(layout, EntityLayout) else None


def require_layout(space: Any, table: str, source: str) -> EntityLayout:
    """``space``'s entity layout, or the error that says ``[table] encoder = "entity"`` cannot read it."""
    layout = entity_layout(space)
    if layout is None:
        shape = tuple(space.shape) if isinstance(space, spaces.Box) else space
        raise ConfigError(
            f'{source}: {table}.encoder: "entity" reads observations the env splits into entities (its spaces carry '
            f"an entity_layout: SMAX's do), but this input {shape} has none; set {table}.encoder = \"mlp\" "
            '(or "auto")')
    return layout


class EntityBlock(nn.Module):
    """Pre-LayerNorm transformer block over the tokens: ``x + MHA(LN x)``, then ``x + MLP(LN x)``."""

    def __init__(self, width: int, heads: int, activation: str) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = init_linear(nn.Linear(width, 3 * width), 1.0)
        self.proj = init_linear(nn.Linear(width, width), 1.0)
        gain = activation_gain(activation)
        self.mlp = nn.Sequential(init_linear(nn.Linear(width, width), gain), ACTIVATIONS[activation](),
                                 init_linear(nn.Linear(width, width), 1.0))

    def forward(self, x: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``x`` ``(B, L, W)``; ``keys`` ``(B, L)`` True where a token may be attended to."""
        batch, length, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(batch, length, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(width // self.heads)
        scores = scores.masked_fill(~keys[:, None, None, :], float("-inf"))
        out = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(batch, length, width)
        x = x + self.proj(out)
        return x + self.mlp(self.ln2(x))


class EntityEncoder(nn.Module):
    """Entities' tokens -> self-attention -> ``out_dim`` features (see the module docstring).

    ``forward(x)``: ``x`` ``(..., layout.size + extra_dim)``; the last ``extra_dim`` features (an FP
    critic's one-hot agent id) join the summary token.  ``tokens(x)`` also gives the tokens' outputs.
    """

    def __init__(self, layout: EntityLayout, hidden_sizes: Sequence[int], activation: str = "relu",
                 input_norm: bool = True, layer_norm: bool = True, extra_dim: int = 0) -> None:
        super().__init__()
        self.layout = layout
        width = int(hidden_sizes[0])
        self.width = width
        self.extra_dim = extra_dim
        self.norms = nn.ModuleDict({name: nn.LayerNorm(w) if input_norm else nn.Identity()
                                    for name, w in layout.widths.items()})
        self.embed = nn.ModuleDict({name: init_linear(nn.Linear(w, width), 1.0) for name, w in layout.widths.items()})
        self.summary = nn.Parameter(torch.zeros(width))
        self.extra = init_linear(nn.Linear(extra_dim, width), 1.0) if extra_dim else None
        heads = HEADS if width % HEADS == 0 else 1
        self.blocks = nn.ModuleList(EntityBlock(width, heads, activation) for _ in range(BLOCKS))
        self.out_norm = nn.LayerNorm(width)
        self.mlp = MLP(2 * width, list(hidden_sizes[1:]) or [width], activation, False, layer_norm)
        self.out_dim = self.mlp.out_dim
        self.emit_targets = False
        """Set by ``action_head``: ``forward`` appends the target tokens' outputs for the head."""

    def retarget(self, layout: EntityLayout) -> EntityEncoder:
        """Read observations of ``layout`` from now on (another map: other counts, the same groups)."""
        if layout.widths != self.layout.widths or layout.presence != self.layout.presence:
            raise ValueError(f"the entity groups differ: built for {self.layout.widths}, given {layout.widths}")
        self.layout = layout
        return self

    def split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """``(B, size)`` -> (tokens ``(B, n, W)``, present ``(B, n)``, each group's first token index)."""
        tokens, present, firsts, n = [], [], [], 0
        for g in self.layout.groups:
            feats = x[:, g.start:g.end].reshape(x.shape[0], g.count, g.width)
            tokens.append(self.embed[g.name](self.norms[g.name](feats)))
            present.append((feats != 0).any(-1) if self.layout.presence is None else feats[..., self.layout.presence] != 0)
            firsts.append(n)
            n += g.count
        return torch.cat(tokens, 1), torch.cat(present, 1), firsts

    def tokens(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(..., size [+ extra])`` -> (features ``(..., out_dim)``, the entities' outputs ``(..., n, W)``
        (zero where not present), present ``(..., n)``)."""
        lead = x.shape[:-1]
        flat = x.reshape(-1, x.shape[-1]).float()
        tokens, present, _ = self.split(flat)
        summary = self.summary.expand(flat.shape[0], 1, self.width)
        if self.extra is not None:
            summary = summary + self.extra(flat[:, self.layout.size:self.layout.size + self.extra_dim]).unsqueeze(1)
        seq = torch.cat([summary, tokens], 1)
        keys = torch.cat([present.new_ones(flat.shape[0], 1), present], 1)
        for block in self.blocks:
            seq = block(seq, keys)
        seq = self.out_norm(seq)
        weights = present.to(seq.dtype).unsqueeze(-1)
        entities = seq[:, 1:] * weights
        pooled = entities.sum(1) / weights.sum(1).clamp(min=1.0)
        out = self.mlp(torch.cat([seq[:, 0], pooled], -1))
        n = entities.shape[1]
        return out.reshape(*lead, -1), entities.reshape(*lead, n, self.width), present.reshape(*lead, n)

    def target_tokens(self, entities: torch.Tensor) -> torch.Tensor:
        """The target group's slice of ``tokens``' entity outputs."""
        assert self.layout.targets is not None
        first = 0
        for g in self.layout.groups:
            if g.name == self.layout.targets:
                return entities[..., first:first + g.count, :]
            first += g.count
        raise AssertionError("the layout names its target group")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, entities, _ = self.tokens(x)
        if not self.emit_targets:
            return out
        targets = self.target_tokens(entities)
        return torch.cat([out, targets.reshape(*targets.shape[:-2], -1)], -1)

    def action_head(self, space: spaces.Space, config: Any) -> EntityActionHead | None:
        """The head that scores each target from its token, where the layout has targets and ``space``
        is ``Discrete(target_offset + count)``; None: the usual head on ``out_dim`` features."""
        layout = self.layout
        if layout.targets is None or not isinstance(space, spaces.Discrete):
            return None
        group = layout.group(layout.targets)
        assert group is not None
        if int(space.n) != layout.target_offset + group.count:
            return None
        if getattr(config, "recurrent", "none") != "none":
            raise ConfigError(f'policy.recurrent: "{config.recurrent}" puts a GRU between the entity encoder and '
                              "its head, which scores each target from the target's own token; set "
                              'policy.recurrent = "none" with policy.encoder = "entity"')
        self.emit_targets = True
        return EntityActionHead(self.out_dim, self.width, layout.target_offset, getattr(config, "output_gain", 0.01))


class EntityActionHead(nn.Module):
    """Categorical over ``offset`` actions scored from the features and one action per target scored from
    the features and the target's token: ``logit_{offset+k} = <Q h, K t_k> / sqrt(W)``."""

    def __init__(self, in_dim: int, width: int, offset: int, gain: float) -> None:
        """``in_dim`` features, then the targets' ``width``-wide tokens (as many as the input holds)."""
        super().__init__()
        self.action_dim = 1
        self.in_dim = in_dim
        self.width = width
        self.logits = init_linear(nn.Linear(in_dim, offset), gain)
        self.query = init_linear(nn.Linear(in_dim, width), gain)
        self.key = init_linear(nn.Linear(width, width), 1.0)

    def all_logits(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, in_dim + n_targets * W)`` -> ``(B, offset + n_targets)``."""
        h, targets = x[:, :self.in_dim], x[:, self.in_dim:].reshape(x.shape[0], -1, self.width)
        scores = (self.key(targets) @ self.query(h).unsqueeze(-1)).squeeze(-1) / math.sqrt(self.width)
        return torch.cat([self.logits(h), scores], -1)

    def _log_probs(self, x: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
        return torch.log_softmax(_masked_logits(self.all_logits(x), avail), -1)

    def sample(self, x: torch.Tensor, avail: torch.Tensor | None,
               deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
        log_p = self._log_probs(x, avail)
        a = _categorical_sample(log_p, deterministic)
        return a.unsqueeze(-1).float(), log_p.gather(-1, a.unsqueeze(-1))

    def evaluate(self, x: torch.Tensor, actions: torch.Tensor,
                 avail: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        log_p = self._log_probs(x, avail)
        return log_p.gather(-1, actions.long()[:, :1]), _entropy(log_p)

    def distribution(self, x: torch.Tensor, avail: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        """The masked logits ``(batch, offset + n_targets)``."""
        return (_masked_logits(self.all_logits(x), avail),)

    @staticmethod
    def kl(old: tuple[torch.Tensor, ...], new: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """``(batch,)`` KL(old || new) of two ``distribution`` outputs."""
        p0 = torch.log_softmax(old[0], -1)
        return add_up([(p0.exp() * (p0 - torch.log_softmax(new[0], -1))).sum(-1)])


def entity_encoder(space: Any, hidden_sizes: Sequence[int], activation: str, input_norm: bool, table: str,
                   source: str, layer_norm: bool = True, extra_dim: int = 0) -> EntityEncoder:
    """``[table] encoder = "entity"`` on ``space`` (which must carry an entity layout)."""
    return EntityEncoder(require_layout(space, table, source), hidden_sizes, activation, input_norm, layer_norm,
                         extra_dim)


def retarget(module: nn.Module, layout: EntityLayout) -> int:
    """Point every ``EntityEncoder`` inside ``module`` whose groups are ``layout``'s at ``layout`` (weights
    trained on one map reading another's inputs: 3m's actors on 5m_vs_6m's observations); how many changed."""
    changed = 0
    for sub in module.modules():
        if isinstance(sub, EntityEncoder) and sub.layout.widths == layout.widths:
            sub.retarget(layout)
            changed += 1
    return changed


def load_for_other_map(module: nn.Module, state: dict[str, torch.Tensor]) -> list[str]:
    """Load ``state`` (saved on one map) into ``module`` (built on another): every parameter must fit
    exactly; a buffer whose shape follows the map (a V critic's one-hot agent ids) keeps ``module``'s own.
    The names of the buffers kept."""
    own = module.state_dict()
    parameters = {name for name, _ in module.named_parameters()}
    kept = [name for name, value in state.items()
            if name not in parameters and name in own and own[name].shape != value.shape]
    module.load_state_dict({**state, **{name: own[name] for name in kept}})
    return kept
