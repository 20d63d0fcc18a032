"""harl's policy over the Multi-Agent Transformer (``harl.policy.mat``): what the on-policy stages ask of
a team, for MAT and MAT-Dec.

``sample`` is one collection step of the whole team: one encoder pass gives every agent's value
(the critic's, ``[critic] kind = "mat_v"``) and the representations the decoder reads, and the
agents decode one after another (``harl.policy.mat_decode``).  What the update needs beyond the
actions and log-probabilities travels in the step record: the encoder's values (``TeamSample.values``,
the collector stores them as V(s_t)) and, where the agents do not always decode agent 0 first
(``order = "random"`` / ``"episode"``), each env's decoding order (``TeamSample.extras``, declared by
``record_fields``; ``harl.policy.mat_orders``).  ``act`` is evaluation's and a frozen team's: agents in
the network's ``order``, nothing drawn, nothing recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch
from gymnasium import spaces
from torch import nn

from harl.errors import ConfigError
from harl.policy import mat_decode, mat_migrate, mat_orders
from harl.policy.mat import MultiAgentTransformer


class TeamSample(NamedTuple):
    """One step of the team as ``sample`` draws it (what the on-policy collector reads)."""

    actions: list[torch.Tensor]
    """Per agent ``(E, k)``: a category index (k = 1) or the Box's values."""
    log_probs: list[torch.Tensor]
    """Per agent ``(E, k)`` per-dimension log-probabilities (as the rollout buffer stores them)."""
    hidden: None
    """Nothing is carried between steps."""
    values: torch.Tensor
    """``(E, A)`` the encoder's value of each agent, in the units of the critic's value normaliser
    (``TransformerValues.normalized``): the collector stores ``critic.denormalize(values)``."""
    extras: dict[str, torch.Tensor]
    """The step record's fields of ``record_fields``: ``{"orders": (E, A)}``, or nothing (``fixed``)."""


class TransformerPolicy(MultiAgentTransformer):
    """The transformer as the pipeline's policy: ``order`` (``mat_orders.ORDERS``) says how collection
    orders the agents, ``generator`` is where ``episode`` draws (the run's)."""

    hidden_size = 0
    """Nothing is carried from step to step."""

    def __init__(self, observation_spaces: Sequence[spaces.Space], action_spaces: Sequence[spaces.Space],
                 n_block: int, n_embd: int, n_head: int, decentralised: bool = False, share_actor: bool = False,
                 source: str = "pipeline", order: str = "fixed", generator: torch.Generator | None = None,
                 agent_id: bool = False) -> None:
        super().__init__(observation_spaces, action_spaces, n_block, n_embd, n_head, decentralised, share_actor,
                         source, agent_id)
        self.order_kind = "fixed" if decentralised else order
        """MAT-Dec: no agent reads another, every order decodes alike."""
        self.generator = generator
        self.saved_orders: torch.Tensor | None = None
        """Running episode orders that weights from older harl held (``mat_migrate``), for the first step."""

    @property
    def record_fields(self) -> dict[str, tuple[tuple[int, ...], torch.dtype, int]]:
        """The step record's fields this policy fills (the rollout buffer stores them): each step's
        decoding orders, unless every step decodes agent 0 first."""
        return {} if self.order_kind == "fixed" else {mat_orders.FIELD: mat_orders.record_field(self.n_agents)}

    @property
    def actors(self) -> list[nn.Module]:
        """The networks one learner trains: the whole transformer (one objective learner, one optimiser)."""
        return [self]

    def initial_hidden(self, n_envs: int, device: Any = "cpu") -> None:
        return None

    def export_actors(self) -> list[nn.Module]:
        raise ConfigError("MAT's agents act through one transformer, decoding one agent after another; "
                          "its agents have no modules of their own; harl export ships the whole team as one "
                          "TorchScript module (harl.export.joint)")

    def weights_device(self) -> torch.device:
        """Where the weights are (what ``stack_obs`` moves the observations to)."""
        return next(self.parameters()).device

    def stack_obs(self, obs: Sequence[Any]) -> torch.Tensor:
        """Per-agent ``(..., d_i)`` observations -> ``(..., A, in_dim)``: zero-padded to the widest, then
        each agent's id where ``agent_id`` (``identify``)."""
        device = self.weights_device()
        rows = [torch.as_tensor(o, dtype=torch.float32, device=device) for o in obs]
        rows = [nn.functional.pad(o, (0, self.obs_dim - o.shape[-1])) if o.shape[-1] < self.obs_dim else o
                for o in rows]
        return self.identify(torch.stack(rows, -2))

    def stack_avail(self, avail: Sequence[Any] | None) -> torch.Tensor | None:
        """Per-agent ``(E, n)`` masks -> ``(E, A, n)`` (None: a Box, or an agent without a mask)."""
        if avail is None or not self.discrete or any(a is None for a in avail):
            return None
        device = self.weights_device()
        return torch.stack([torch.as_tensor(a, dtype=torch.float32, device=device) for a in avail], -2)

    @torch.no_grad()
    def sample(self, obs: Sequence[Any], avail: Sequence[Any] | None, deterministic: bool = False,
               hidden: Any = None, starts: Any = None, carried: Mapping[str, torch.Tensor] | None = None
               ) -> TeamSample:
        """One collection step of every agent in every env (see the module docstring).  ``order =
        "episode"``: ``carried`` holds the orders the previous step recorded (the rollout buffer's
        ``StepInputs.extras``), kept where no episode begins (``starts`` 0)."""
        x = self.stack_obs(obs)
        orders, extras = None, {}
        if self.order_kind == "episode":
            running = None if carried is None else carried.get(mat_orders.FIELD)
            if running is None:
                running = torch.full((x.shape[0], self.n_agents), mat_orders.UNKNOWN, device=x.device)
            orders = mat_orders.episode_orders(running, starts, self.generator, self.saved_orders)
            self.saved_orders = None
            extras = {mat_orders.FIELD: orders}
        elif self.order_kind == "random":
            extras = {mat_orders.FIELD: self.order.expand(x.shape[0], -1).clone()}
        actions, log_probs, values = mat_decode.act(self, x, self.stack_avail(avail), deterministic, orders)
        return TeamSample(list(actions.unbind(1)), list(log_probs.unbind(1)), None, values, extras)

    @torch.no_grad()
    def act(self, obs: Sequence[Any], avail: Sequence[Any] | None, deterministic: bool = True,
            hidden: Any = None, starts: Any = None) -> tuple[list[torch.Tensor], None]:
        """``(actions, next hidden)`` as every family's policy acts (``harl.evaluator.ActingPolicy``):
        agents in ``order``, whatever collection draws."""
        actions, _, _ = mat_decode.act(self, self.stack_obs(obs), self.stack_avail(avail), deterministic)
        return list(actions.unbind(1)), None

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        self.saved_orders = mat_migrate.migrate(state_dict, prefix, self.n_agents)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def transformer_policy(config: Any, parts: Any) -> TransformerPolicy:
    """The policy an ``updater.objective`` of kind ``mat`` / ``mat_dec`` trains (``order = "random"``:
    the first rollout's order drawn from the run's generator)."""
    order = getattr(config, "order", "fixed")
    policy = TransformerPolicy(parts.obs_spaces, parts.act_spaces, config.n_block, config.n_embd, config.n_head,
                               decentralised=getattr(config, "decentralised", False),
                               share_actor=getattr(config, "share_actor", False), source=parts.source,
                               order=order, generator=parts.generator, agent_id=getattr(config, "agent_id", False))
    if order == "random":
        policy.set_order(mat_orders.draw_order(policy.n_agents, parts.generator))
    return policy
