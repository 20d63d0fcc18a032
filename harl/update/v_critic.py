"""The state-value critic V(s) of the on-policy family: network, value loss, learner.

EP state: one global state per env, one value per env, the team reward.
FP state: a state per agent (the global state plus the agent's one-hot id), a value per
agent, each agent's own reward.  The choice is this config's ``state_type`` and nowhere else.

Recurrent critic: when ``[policy] recurrent`` is "naive" or "chunked" the critic gets a GRU
after its MLP too (as HARL's ``use_recurrent_policy`` gives actor and critic one), trained on
the same sequences as the actors.  Its state is ``(B, H)`` for EP and ``(B, A, H)`` for FP
(one per agent copy); rows are sequence-major as for the actors (see harl.policy.on_policy).
"""

from __future__ import annotations

from typing import Any

import attrs
import torch
from torch import nn

from harl.nets.cnn import CNNBase
from harl.nets.entity import entity_encoder
from harl.nets.image import CHANNEL_ORDERS, ENCODERS, choose_encoder, image_layout, is_image
from harl.nets.mlp import ACTIVATIONS, MLP, GRULayer, init_linear
from harl.registry import register
from harl.returns.value_norm import ValueNorm
from harl.settings import each_positive, in_range, kind_field, one_of, own_first, positive, setting
from harl.update.common import HUBER_ONE_SIDED_HELP, huber, optimizer_step
from harl.update.fused import FusedStep, adam_defaults


@attrs.frozen
class VLearningConfig:
    """The keys every V critic kind has (``v`` and ``independent_v``): its network's widths and how it is fit."""

    hidden_sizes: tuple[int, ...] = setting((128, 128), "widths of the hidden layers", each_positive())
    activation: str = setting("relu", "hidden activation", one_of(ACTIVATIONS))
    input_norm: bool = setting(True, "LayerNorm on the raw input (the state; an independent critic's: each "
                               "agent's observation)")
    lr: float = setting(5e-4, "Adam learning rate", positive())
    adam_eps: float = setting(1e-5, "Adam epsilon", positive())
    epochs: int = setting(5, "passes over the rollout per iteration", positive())
    minibatches: int = setting(1, "minibatches per pass", positive())
    value_loss_coef: float = setting(1.0, "weight of the value loss", positive())
    clip_value_loss: bool = setting(True, "PPO-style clipping of the value change")
    value_clip: float = setting(0.2, "clip range of the value change (normalised units)", positive())
    huber_delta: float = setting(10.0, "Huber loss threshold; 0 means squared error", in_range(0, None))
    huber_one_sided: bool = setting(False, HUBER_ONE_SIDED_HELP)
    max_grad_norm: float = setting(10.0, "gradient-norm clip; 0 disables", in_range(0, None))
    value_norm: bool = setting(True, "normalise targets with a running mean/std (HARL's ValueNorm; an independent "
                               "critic's is shared by the agents)")


@attrs.frozen(field_transformer=own_first)
class VCriticConfig(VLearningConfig):
    """``[critic] kind = "v"``: V(s) trained on GAE returns with a clipped Huber loss."""

    kind: str = kind_field("v")
    state_type: str = setting("EP", "EP: one global state/value per env; FP: one per agent", one_of(("EP", "FP")))
    encoder: str = setting("auto", "what reads the state: cnn (HARL's CNN base), mlp, entity (attention over the state's units where the env splits it, e.g. SMAX), or auto (cnn for a 3-D Box image state, else mlp)", one_of(ENCODERS))
    channel_order: str = setting("auto", "image channel axis: last (HWC), first (CHW), or auto", one_of(CHANNEL_ORDERS))


class NormalizedValues:
    """What every V critic does with its network's raw outputs (``forward_state``): value
    normalisation and the values in env units the collector stores (``value``, ``step``)."""

    normalizer: ValueNorm | None

    def forward_state(self, x: torch.Tensor, hidden: torch.Tensor | None = None,
                      starts: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise NotImplementedError

    def normalized(self, x: torch.Tensor, hidden: torch.Tensor | None = None,
                   starts: torch.Tensor | None = None) -> torch.Tensor:
        """Raw network output (normalised units when value normalisation is on)."""
        return self.forward_state(x, hidden, starts)[0]

    def denormalize(self, v: torch.Tensor) -> torch.Tensor:
        return v if self.normalizer is None else self.normalizer.denormalize(v)

    def normalize_targets(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.normalizer is None else self.normalizer.normalize(x)

    @torch.no_grad()
    def value(self, x: torch.Tensor, hidden: torch.Tensor | None = None,
              starts: torch.Tensor | None = None) -> torch.Tensor:
        """Values in env units."""
        return self.denormalize(self.normalized(x, hidden, starts))

    @torch.no_grad()
    def step(self, x: torch.Tensor, hidden: torch.Tensor | None, starts: torch.Tensor | None
             ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One step of every env: (values in env units, the GRU state after it or None)."""
        v, last = self.forward_state(x, hidden, starts)
        return self.denormalize(v), last


class VCritic(NormalizedValues, nn.Module):
    """V(s) -> values in env units (denormalised), shape ``(...,)`` for EP, ``(..., A)`` for FP."""

    # registered buffers (register_buffer in __init__)
    agent_ids: torch.Tensor

    def __init__(self, state_dim: int, n_agents: int, config: VCriticConfig, recurrent: bool = False,
                 state_space: Any = None, source: str = "pipeline") -> None:
        """``recurrent``: a GRU between the MLP and the value layer (follows ``[policy] recurrent``).
        ``state_space``: read for ``encoder`` (an image state gets HARL's CNN base by default)."""
        super().__init__()
        self.fp = config.state_type == "FP"
        self.n_agents = n_agents
        ids = n_agents if self.fp else 0
        self.layout = (image_layout(state_space, config.channel_order, "critic", source)
                       if is_image(state_space) else None)
        self.base: nn.Module
        if choose_encoder(state_space, config.encoder, "critic", source) == "cnn":
            assert self.layout is not None
            self.base = CNNBase(self.layout, config.hidden_sizes, config.activation, extra_dim=ids)
        elif config.encoder == "entity":  # attention over the state's entities (harl.nets.entity)
            self.base = entity_encoder(state_space, config.hidden_sizes, config.activation, config.input_norm,
                                       "critic", source, extra_dim=ids)
        else:
            self.base = MLP(state_dim + ids, config.hidden_sizes, config.activation, config.input_norm)
        width = self.base.out_dim
        self.rnn = GRULayer(width, width) if recurrent else None
        self.out = init_linear(nn.Linear(width, 1), 1.0)
        self.normalizer = ValueNorm() if config.value_norm else None
        self.register_buffer("agent_ids", torch.eye(n_agents))

    def inputs(self, state: torch.Tensor) -> torch.Tensor:
        """The critic's input: the state itself (EP) or one copy per agent with its id (FP)."""
        if not self.fp:
            return state
        lead = state.shape[:-1]
        copies = state.unsqueeze(-2).expand(*lead, self.n_agents, state.shape[-1])
        ids = self.agent_ids.expand(*lead, self.n_agents, self.n_agents)
        return torch.cat([copies, ids], -1)

    def encode(self, state: torch.Tensor) -> torch.Tensor:
        """The base's features of each row (EP) or agent copy (FP); an image is convolved once per row."""
        if isinstance(self.base, CNNBase):
            if not self.fp:
                return self.base(state)
            lead = self.base.layout.lead(state)
            return self.base(state, self.agent_ids.expand(*lead, self.n_agents, self.n_agents))
        if self.layout is not None:
            state = self.layout.flat(state)
        return self.base(self.inputs(state))

    @property
    def hidden_size(self) -> int:
        """Width of the GRU state (0: a feed-forward critic)."""
        return 0 if self.rnn is None else self.rnn.hidden_dim

    def forward_state(self, x: torch.Tensor, hidden: torch.Tensor | None = None,
                      starts: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Raw outputs of each row and the GRU state after each sequence (None: feed-forward).

        Recurrent: ``x`` (N, ds), the states, holds B sequences of N / B steps, sequence-major,
        ``hidden`` (B, H) or (B, A, H) the state before each, ``starts`` (N,) 1 at episode starts.
        """
        x = self.encode(x)
        if self.rnn is None:
            return self.out(x).squeeze(-1), None
        if hidden is None or starts is None:
            raise ValueError("a recurrent critic needs the GRU state and the episode starts of its rows")
        n_seq, n = hidden.shape[0], x.shape[0]
        length, tail, width = n // n_seq, tuple(x.shape[1:-1]), x.shape[-1]  # tail: () EP, (A,) FP
        k = self.n_agents if tail else 1
        seq = x.reshape(n_seq, length, k, width).transpose(0, 1).reshape(length, n_seq * k, width)
        st = starts.reshape(n_seq, length).transpose(0, 1).unsqueeze(-1).expand(length, n_seq, k)
        out, last = self.rnn(seq, hidden.reshape(n_seq * k, -1), st.reshape(length, n_seq * k))
        out = out.reshape(length, n_seq, k, -1).transpose(0, 1).reshape(n, *tail, -1)
        return self.out(out).squeeze(-1), last.reshape(n_seq, *tail, -1)



def value_loss(new: torch.Tensor, old: torch.Tensor, target: torch.Tensor,
               clip: float | None, huber_delta: float, one_sided: bool = False) -> torch.Tensor:
    """Per-sample value loss; with ``clip`` the pessimistic max of plain and clipped losses."""
    loss = huber(target - new, huber_delta, one_sided)
    if clip is None:
        return loss
    clipped = old + (new - old).clamp(-clip, clip)
    return torch.max(loss, huber(target - clipped, huber_delta, one_sided))


@attrs.frozen
class CriticStats:
    value_loss: float
    grad_norm: float


class VCriticLearner:
    """Fits the critic to the returns of one rollout (epochs x minibatches)."""

    def __init__(self, critic: VCritic, config: VCriticConfig, generator: torch.Generator) -> None:
        self.critic = critic
        self.config = config
        self.generator = generator
        self.optimizer = torch.optim.Adam(critic.parameters(), lr=config.lr, eps=config.adam_eps)
        self.base_lr = config.lr
        self.fused: FusedStep | None = None
        """``[updater] compile``: the whole minibatch step as one function (``harl.update.fused``)."""

    def trainable(self) -> list[torch.Tensor]:
        """The parameters the optimiser steps."""
        return list(self.critic.parameters())

    def fusable(self) -> str | None:
        """Why this learner cannot take the fused step (``[updater] compile``); None: it can."""
        if getattr(self.critic, "hidden_size", 0):
            return "a recurrent critic's update (its GRU's cuts at episode starts are data-dependent)"
        return adam_defaults(self.optimizer)

    def enable_fused(self, compile: bool = True) -> None:
        """From the next minibatch on, the fused step (``compile``: as one compiled graph; else the same
        function run eagerly, what the tests hold against the eager loop)."""
        self.fused = FusedStep(self.critic, self.trainable(), self.optimizer, self._fused_loss,
                               self.config.max_grad_norm, compile, "the critic's update")

    def _fused_loss(self, critic: Any, *data: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loss = self._loss(critic, *data)
        return loss * self.config.value_loss_coef, loss.detach().reshape(1)

    def _loss(self, critic: Any, states: torch.Tensor, old_norm: torch.Tensor, target: torch.Tensor,
              idx: torch.Tensor) -> torch.Tensor:
        """The eager loop's value loss of the rows ``idx``."""
        clip = self.config.value_clip if self.config.clip_value_loss else None
        return value_loss(critic.normalized(states[idx]), old_norm[idx], target, clip,
                          self.config.huber_delta, self.config.huber_one_sided).mean()

    def update(self, states: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               hidden: torch.Tensor | None = None, starts: torch.Tensor | None = None) -> CriticStats:
        """``states`` (N, ds); ``old_values`` and ``returns`` (N,) or (N, A), env units.

        Recurrent critic: rows are B sequences (sequence-major), ``hidden`` the (B, [A,] H)
        GRU state before each and ``starts`` (N,); minibatches then hold whole sequences.
        """
        cfg, critic = self.config, self.critic
        old_norm = critic.normalize_targets(old_values)  # normaliser as at collection time
        n = states.shape[0]
        length = 1 if hidden is None else n // int(hidden.shape[0])
        units = n // length
        size = max(1, units // cfg.minibatches)
        steps = torch.arange(length)
        losses, norms = [], []
        for _ in range(cfg.epochs):
            perm = torch.randperm(units, generator=self.generator, device="cpu")
            for k in range(cfg.minibatches):
                chosen = perm[k * size:(k + 1) * size]
                idx = (chosen.unsqueeze(-1) * length + steps).reshape(-1).to(states.device)
                target = returns[idx]
                if critic.normalizer is not None:
                    critic.normalizer.update(target)
                target = critic.normalize_targets(target)
                if self.fused is not None and hidden is None:
                    fused = self.fused.step(states, old_norm, target, idx)
                    if fused is not None:
                        norms.append(fused[1])
                        losses.append(fused[0][0])
                        continue
                    self.fused = None  # it could not compile: eager from here on
                if hidden is None:
                    new = critic.normalized(states[idx])
                else:
                    assert starts is not None
                    new = critic.normalized(states[idx], hidden[chosen.to(hidden.device)], starts[idx])
                clip = cfg.value_clip if cfg.clip_value_loss else None
                loss = value_loss(new, old_norm[idx], target, clip, cfg.huber_delta, cfg.huber_one_sided).mean()
                norm = optimizer_step(self.optimizer, loss * cfg.value_loss_coef, critic.parameters(),
                                      cfg.max_grad_norm, report_norm=True)
                assert norm is not None
                norms.append(norm)
                losses.append(loss.detach())
        return CriticStats(float(torch.stack(losses).mean()), float(torch.stack(norms).mean()))


register("critic", VCriticConfig, family="on_policy", default=True, provides=("state_values",),
         # a GRU critic with GRU actors, as in HARL
         factory=lambda config, parts: VCritic(parts.state_dim, parts.n_agents, config,
                                               recurrent=parts.policy_config.recurrent != "none",
                                               state_space=parts.state_space, source=parts.source),
         learner=lambda critic, config, parts: VCriticLearner(critic, config, parts.generator))
