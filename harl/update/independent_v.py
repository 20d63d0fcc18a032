"""The independent state-value critic of the on-policy family: V_i(o_i), one value per agent.

``[critic] kind = "independent_v"`` reads each agent's own observation instead of a global
state, so IPPO is ``ppo`` + this critic + ``simultaneous`` and IA2C ``a2c`` likewise.  It rides
on the FP-state machinery (``harl.update.v_critic``): the rollout buffer keeps a value per agent
and each agent's own reward, GAE runs per agent, and agent i's advantage comes from
V_i alone::

    delta_i,t = r_i,t + gamma * V_i(o_i,t+1) - V_i(o_i,t)        A_i = GAE(delta_i)

What the critic reads is the agents' observations stacked as ``(..., A, W)``, each zero-padded
to the widest (``reads``; the collector and the buffer call it in place of the state):

- ``share_parameters = true``: one network for all agents, with the agent's one-hot id
  appended (``agent_id``);
- ``share_parameters = false``: one network per agent, each reading only its own
  ``obs_dim_i`` columns, so agents with different observation sizes need no padding.

It is fitted by the V critic's learner (``VCriticLearner``: clipped Huber loss on GAE returns,
value normalisation shared by the agents), and follows ``[policy] recurrent`` as the V critic
does (a GRU per agent copy; one GRU per agent when parameters are not shared) unless
``recurrent = "none"``.

EPyMARL's IPPO and IA2C critic (``ac_critic`` in its ``ppo_learner``/``actor_critic_learner``)
is this critic with four options, all off by default:

- ``layer_norm = false``, ``init = "torch"``: plain ``Linear -> ReLU`` layers with PyTorch's
  default initialisation; ``recurrent = "none"``: feed-forward beside GRU actors;
- ``polyak``: a soft target critic, moved ``target <- (1 - polyak) target + polyak critic``
  after each update.  The values the critic hands the collector (``value``, ``step``) are then
  the target's, so the returns stage bootstraps from the target critic, as EPyMARL's n-step
  targets do (the target does not change between an update and the next rollout);
- ``interleave``: the updater (``harl.update.on_policy``) runs the objective's epochs as rounds;
  each round first takes one critic step on the whole rollout (``advantage_step``) and gives
  the actors that round's advantages, the returns minus the critic's values *before* the step,
  unstandardised (EPyMARL's ``train_critic_sequential``, called once per epoch).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from harl.errors import ConfigError
from harl.nets.image import is_image
from harl.nets.mlp import INITS, MLP, GRULayer, init_linear, torch_default_init
from harl.registry import register
from harl.returns.value_norm import ValueNorm
from harl.settings import in_range, kind_field, one_of, own_first, setting
from harl.update.common import huber, optimizer_step, polyak_update
from harl.update.v_critic import CriticStats, NormalizedValues, VCriticLearner, VLearningConfig

LOCAL = "local"
"""The only ``state_type`` of an independent critic: each agent's own observation."""


@attrs.frozen(field_transformer=own_first)
class IndependentVConfig(VLearningConfig):
    """``[critic] kind = "independent_v"``: V_i(o_i) per agent on its own observation (IPPO, IA2C)."""

    kind: str = kind_field("independent_v")
    state_type: str = setting(LOCAL, 'what the critic reads: "local" (each agent\'s own observation); the global '
                              'EP / FP states are critic.kind = "v"\'s', one_of((LOCAL, "EP", "FP")))
    share_parameters: bool = setting(True, "the critic's own: one V network for all agents (with agent_id) instead of "
                                     "one per agent (the actors': [policy] share_parameters)")
    agent_id: bool = setting(True, "the critic's own: a shared V network reads the agent's one-hot id with its "
                             "observation (the actors': [policy] agent_id)")
    recurrent: str = setting("policy", 'a GRU after the MLP: "policy" follows [policy] recurrent (HARL\'s); "none": '
                             "feed-forward always, beside GRU actors (EPyMARL's ac_critic)", one_of(("policy", "none")))
    layer_norm: bool = setting(True, "LayerNorm after each hidden layer (HARL's); false: plain Linear -> activation "
                               "(EPyMARL's ac_critic)")
    init: str = setting("orthogonal", "initial weights: orthogonal (HARL's) or torch (PyTorch's default "
                        "initialisation of every layer, EPyMARL's)", one_of(INITS))
    polyak: float = setting(
        0.0, "a soft target critic, moved polyak of the way to the critic after each update; the values the "
        "collector stores (which the returns stage bootstraps from) are then the target's (EPyMARL's "
        "target_update_interval_or_tau = 0.01); 0: no target critic", in_range(0, 1))
    interleave: bool = setting(
        False, "EPyMARL's ppo_learner: each of the objective's epochs first takes one critic step on the whole "
        "rollout, and the actors get that epoch's advantages, returns minus the critic's values before the step, "
        "unstandardised (false, HARL's: the actors' epochs on the returns stage's advantages, then the critic's)")


def local_checks(config: Any, built: Mapping[str, Any]) -> Iterator[tuple[list[str], str]]:
    """An independent critic reads observations, never a global state (``check`` of both independent kinds)."""
    if config.state_type != LOCAL:
        family = "v" if config.kind == "independent_v" else "q"
        yield (["critic", "state_type"],
               f'"{config.state_type}" asks critic.kind = "{config.kind}" for the global state, but an independent '
               "critic reads each agent's own observation (that is what makes it independent); remove "
               f'state_type (or set it to "{LOCAL}"), or keep the {config.state_type} state with '
               f'critic.kind = "{family}" (the centralised critic)')


def independent_v_checks(config: IndependentVConfig, built: Mapping[str, Any]) -> Iterator[tuple[list[str], str]]:
    """``local_checks``, and what the target critic and the interleaved update need of the other tables."""
    yield from local_checks(config, built)
    policy, updater = built.get("policy"), built.get("updater")
    gru = getattr(policy, "recurrent", "none") if config.recurrent == "policy" else "none"
    for key, on in (("polyak", config.polyak > 0), ("interleave", config.interleave)):
        if on and gru != "none":
            yield (["critic", key], f'needs a feed-forward critic, but critic.recurrent = "policy" gives it a GRU '
                   f'with policy.recurrent = "{gru}"; set critic.recurrent = "none" (EPyMARL\'s '
                   "ac_critic is feed-forward beside its GRU agents)")
    if config.polyak > 0 and config.value_norm:
        yield (["critic", "value_norm"], "true with critic.polyak > 0: the target critic's values are in env "
               "units and would drift with the normaliser; set value_norm = false (EPyMARL's IPPO has none)")
    if not config.interleave:
        return
    if config.clip_value_loss:
        yield (["critic", "clip_value_loss"], "true with critic.interleave: each interleaved critic step is one "
               "plain step toward the returns, with no old values to clip against; set clip_value_loss = false")
    if config.minibatches != 1:
        yield (["critic", "minibatches"], f"{config.minibatches} with critic.interleave: each round takes one critic "
               "step on the whole rollout; set minibatches = 1")
    if updater is None:
        return
    objective = updater.objective
    if updater.kind != "simultaneous":
        yield (["updater", "kind"], f'"{updater.kind}" with critic.interleave: the rounds update every agent on the '
               'same advantages; set updater.kind = "simultaneous"')
    if objective.kind not in ("ppo", "a2c"):
        yield (["updater", "objective", "kind"], f'"{objective.kind}" with critic.interleave: the rounds take the '
               'surrogate objectives\' steps; use "ppo" or "a2c"')
        return
    if objective.minibatches != 1:
        yield (["updater", "objective", "minibatches"], f"{objective.minibatches} with critic.interleave: each "
               "round is one actor step on the whole rollout (EPyMARL's); set minibatches = 1")
    if config.epochs != objective.epochs:
        yield (["critic", "epochs"], f"{config.epochs} with critic.interleave, but the rounds are "
               f"updater.objective.epochs = {objective.epochs}, one critic step each; set critic.epochs = "
               f"{objective.epochs}")


def obs_shapes(obs_spaces: Sequence[spaces.Space], kind: str, source: str) -> list[tuple[int, ...]]:
    """Each agent's observation shape; an image observation is refused (no CNN here)."""
    for i, space in enumerate(obs_spaces):
        if is_image(space):
            raise ConfigError(
                f'{source}: critic.kind: "{kind}" reads observations through an MLP, but agent {i} observes '
                f"an image {space.shape}; use critic.kind = \"v\" (HARL's CNN on the state) for image envs")
    return [tuple(int(d) for d in (s.shape or ())) for s in obs_spaces]


def stack_observations(obs: Sequence[torch.Tensor], shapes: Sequence[tuple[int, ...]], width: int) -> torch.Tensor:
    """Per-agent ``(..., *shape_i)`` -> ``(..., A, width)`` float32, each flattened and zero-padded to ``width``."""
    rows = []
    for o, shape in zip(obs, shapes):
        o = torch.as_tensor(o)
        flat = o.reshape(*o.shape[:o.dim() - len(shape)], -1).float()
        rows.append(nn.functional.pad(flat, (0, width - flat.shape[-1])))
    return torch.stack(rows, -2)


class IndependentVCritic(NormalizedValues, nn.Module):
    """V_i(o_i) for every agent i; values in env units, shape ``(..., A)``."""

    # registered buffers (register_buffer in __init__)
    agent_ids: torch.Tensor

    per_agent_values = True
    """The rollout buffer keeps a value (and a reward) per agent, as for FP state."""
    fp = True

    def __init__(self, obs_shapes: Sequence[tuple[int, ...]], config: IndependentVConfig,
                 recurrent: bool = False) -> None:
        super().__init__()
        self.shapes = [tuple(s) for s in obs_shapes]
        self.widths = [int(np.prod(s)) for s in self.shapes]
        self.n_agents = len(self.widths)
        self.width = max(self.widths)
        self.shared = config.share_parameters
        self.with_ids = self.shared and config.agent_id
        ids = self.n_agents if self.with_ids else 0
        count = 1 if self.shared else self.n_agents
        widths = [self.width + ids] if self.shared else self.widths
        bases = [MLP(w, config.hidden_sizes, config.activation, config.input_norm, config.layer_norm)
                 for w in widths]
        self.bases = nn.ModuleList(bases)
        feature = bases[0].out_dim
        recurrent = recurrent and config.recurrent == "policy"
        self.rnns = (nn.ModuleList(GRULayer(feature, feature, config.layer_norm) for _ in range(count))
                     if recurrent else None)
        self.outs = nn.ModuleList(init_linear(nn.Linear(feature, 1), 1.0) for _ in range(count))
        self.feature = feature
        self.normalizer = ValueNorm() if config.value_norm else None
        self.register_buffer("agent_ids", torch.eye(self.n_agents))
        if config.init == "torch":
            torch_default_init(self)
        self.target: nn.ModuleDict | None = None
        """``polyak`` > 0: the target critic's networks (a copy of ``bases`` and ``outs``)."""
        if config.polyak > 0:
            if self.rnns is not None:
                raise ConfigError('critic.polyak needs a feed-forward critic: set critic.recurrent = "none"')
            self.target = copy.deepcopy(self.online())
            self.target.requires_grad_(False)

    def online(self) -> nn.ModuleDict:
        """The networks the target critic copies (``bases`` and ``outs``), as one module."""
        return nn.ModuleDict({"bases": self.bases, "outs": self.outs})

    @torch.no_grad()
    def update_target(self, tau: float) -> None:
        """``target <- (1 - tau) * target + tau * critic``, parameter by parameter (no target: nothing)."""
        if self.target is not None:
            polyak_update(self.target, self.online(), tau)

    def reads(self, obs: Sequence[torch.Tensor], state: torch.Tensor | None = None) -> torch.Tensor:
        """What this critic reads of a step (or of a rollout): the agents' observations, stacked and padded."""
        return stack_observations(obs, self.shapes, self.width).to(self.agent_ids.device)

    @property
    def hidden_size(self) -> int:
        """Width of the GRU state (0: a feed-forward critic)."""
        return 0 if self.rnns is None else self.feature

    def encode(self, x: torch.Tensor, bases: nn.ModuleList | None = None) -> torch.Tensor:
        """``(..., A, W)`` -> ``(..., A, F)`` features of each agent's own observation (through
        ``bases``: the critic's own by default, the target's)."""
        bases = self.bases if bases is None else bases
        if self.shared:
            if self.with_ids:
                x = torch.cat([x, self.agent_ids.expand(*x.shape[:-1], self.n_agents)], -1)
            return bases[0](x)
        return torch.stack([base(x[..., i, :w]) for i, (base, w) in enumerate(zip(bases, self.widths))], -2)

    def head(self, features: torch.Tensor, outs: nn.ModuleList | None = None) -> torch.Tensor:
        outs = self.outs if outs is None else outs
        if self.shared:
            return outs[0](features).squeeze(-1)
        return torch.stack([out(features[..., i, :]).squeeze(-1) for i, out in enumerate(outs)], -1)

    def target_values(self, x: torch.Tensor) -> torch.Tensor:
        """The target critic's values ``(..., A)`` in env units (raw: target critics go without value_norm)."""
        assert self.target is not None
        return self.head(self.encode(x, self.target["bases"]), self.target["outs"])  # type: ignore[arg-type]

    def forward_state(self, x: torch.Tensor, hidden: torch.Tensor | None = None,
                      starts: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Raw outputs ``(N, A)`` and the GRU state after each sequence (None: feed-forward).

        Recurrent: ``x`` (N, A, W) holds B sequences of N / B steps, sequence-major, ``hidden``
        (B, A, H) the state before each, ``starts`` (N,) 1 at episode starts.
        """
        features = self.encode(x)
        if self.rnns is None:
            return self.head(features), None
        if hidden is None or starts is None:
            raise ValueError("a recurrent critic needs the GRU state and the episode starts of its rows")
        n_seq, n, agents = hidden.shape[0], x.shape[0], self.n_agents
        length = n // n_seq
        seq = features.reshape(n_seq, length, agents, -1).transpose(0, 1)  # (L, B, A, F)
        st = starts.reshape(n_seq, length).transpose(0, 1)  # (L, B)
        if self.shared:
            out, last = self.rnns[0](seq.reshape(length, n_seq * agents, -1), hidden.reshape(n_seq * agents, -1),
                                     st.unsqueeze(-1).expand(length, n_seq, agents).reshape(length, n_seq * agents))
            out, last = out.reshape(length, n_seq, agents, -1), last.reshape(n_seq, agents, -1)
        else:
            pieces = [rnn(seq[:, :, i], hidden[:, i], st) for i, rnn in enumerate(self.rnns)]
            out = torch.stack([p[0] for p in pieces], 2)
            last = torch.stack([p[1] for p in pieces], 1)
        return self.head(out.transpose(0, 1).reshape(n, agents, -1)), last

    @torch.no_grad()
    def value(self, x: torch.Tensor, hidden: torch.Tensor | None = None,
              starts: torch.Tensor | None = None) -> torch.Tensor:
        """Values in env units, the target critic's when there is one (what the collector stores)."""
        if self.target is not None:
            return self.target_values(x)
        return super().value(x, hidden, starts)

    @torch.no_grad()
    def step(self, x: torch.Tensor, hidden: torch.Tensor | None, starts: torch.Tensor | None
             ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One step of every env: (values in env units ``(E, A)``, the GRU state after it or None)."""
        if self.target is not None:
            return self.target_values(x), None
        return super().step(x, hidden, starts)


class IndependentVLearner(VCriticLearner):
    """The V critic's learner, and what ``polyak`` and ``interleave`` add to it.

    Without ``interleave`` the updater calls ``update`` once per iteration (then the target
    moves); with it, ``advantage_step`` once per round and ``end_update`` after the last.
    """

    def __init__(self, critic: IndependentVCritic, config: IndependentVConfig, generator: torch.Generator) -> None:
        super().__init__(critic, config, generator)  # type: ignore[arg-type]  # the V critic's API and keys
        self.own_critic, self.own_config = critic, config
        self.interleaved = config.interleave
        """The updater runs the objective's epochs as rounds, a critic step first in each."""
        if critic.target is not None:  # the target's parameters never step
            self.optimizer = torch.optim.Adam(self.trainable(), lr=config.lr, eps=config.adam_eps)
        self.round_stats: list[torch.Tensor] = []

    def trainable(self) -> list[torch.Tensor]:
        """The parameters the optimiser steps (a soft target's never do)."""
        return [p for p in self.critic.parameters() if p.requires_grad]

    def update(self, states: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               hidden: torch.Tensor | None = None, starts: torch.Tensor | None = None) -> CriticStats:
        stats = super().update(states, old_values, returns, hidden, starts)
        self.end_update()
        return stats

    def advantage_step(self, states: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
        """One critic step on the whole rollout; returns the advantages ``returns - V`` ``(N, A)`` (env
        units, detached) of the critic *before* the step.  ``states`` ``(N, A, W)``, ``returns`` ``(N, A)``.

        The loss is ``value_loss_coef`` times the mean Huber (``huber_delta = 0``: 0.5 e^2) error
        over all rows: ``value_loss_coef = 2`` with ``huber_delta = 0`` is EPyMARL's mean squared error.
        """
        cfg, critic = self.own_config, self.own_critic
        v = critic.normalized(states)
        advantages = (returns - critic.denormalize(v)).detach()
        target = returns
        if critic.normalizer is not None:
            critic.normalizer.update(target)
            target = critic.normalize_targets(target)
        loss = huber(target - v, cfg.huber_delta).mean()
        norm = optimizer_step(self.optimizer, loss * cfg.value_loss_coef, self.trainable(), cfg.max_grad_norm,
                              report_norm=True)
        assert norm is not None
        self.round_stats.append(torch.stack([loss.detach(), norm.detach()]))
        return advantages

    def end_update(self) -> CriticStats:
        """After the update: the target moves ``polyak`` toward the critic; the rounds' mean stats."""
        self.own_critic.update_target(self.own_config.polyak)
        means = torch.stack(self.round_stats).mean(0).tolist() if self.round_stats else [0.0, 0.0]
        self.round_stats = []
        return CriticStats(means[0], means[1])


def _independent_v(config: IndependentVConfig, parts: Any) -> IndependentVCritic:
    shapes = obs_shapes(parts.obs_spaces, "independent_v", parts.source)
    return IndependentVCritic(shapes, config, recurrent=parts.policy_config.recurrent != "none")


register("critic", IndependentVConfig, _independent_v, family="on_policy", provides=("state_values",),
         check=independent_v_checks,
         learner=lambda critic, config, parts: IndependentVLearner(critic, config, parts.generator))
