"""One agent's actor as a plain tensor function: the part of a team that ships.

``deploy_actor(actor, space)`` wraps any harl actor (on-policy ``Actor`` with a Gaussian or
categorical head, with or without a GRU; off-policy ``DeterministicActor``,
``SquashedGaussianActor``, ``CategoricalActor``, ``DuelingQActor``; the value family's
``AgentQActor`` and the PQN family's ``PQNActor``, the greedy policy of one agent's Q network)
in a module whose ``forward`` takes only tensors and has no data-dependent Python control flow,
so ``torch.jit.trace`` and ``torch.onnx.export`` record it exactly::

    inputs:  obs (B, obs_dim) float32 [, avail (B, n_mask) float32] [, hidden (B, H) float32]
             [, last_action (B,) int64]
    outputs: action [, hidden_out (B, H)] [, distribution parameters...]

``action`` is what the env takes: Box actions as float32 ``(B, *shape)`` inside the bounds
(on-policy means are clipped to the Box, as every harl env adapter clips them; off-policy
actors are bounded by their tanh), Discrete as int64 ``(B,)``, MultiDiscrete as int64
``(B, k)``.  A GRU actor's state starts at zeros at each episode's first step; pass
``hidden_out`` back as ``hidden`` on the next step.  An agent Q network that takes its previous
action (``last_action = true``) takes it as ``last_action``: -1 at an episode's first step,
then the ``action`` it output on the step before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from harl.nets.heads import GaussianHead, avail_size
from harl.nets.plain import masked_argmax
from harl.policy.agent_q import AgentQActor
from harl.policy.off_policy import (
    CategoricalActor,
    DeterministicActor,
    DuelingQActor,
    SquashedGaussianActor,
)
from harl.policy.on_policy import Actor, AgentIdActor
from harl.policy.pqn import PQNActor

PARAMS = {"gaussian": ["mean", "std"], "squashed_gaussian": ["mu", "log_std"],
          "categorical": ["logits"], "deterministic": [], "q": ["q_values"]}
"""Distribution kind -> names of the parameter outputs (``with_params``).  ``logits`` are the
masked logits (on-policy) or log-probabilities (HASAC) of the sub-actions, concatenated."""
Q_ACTORS = (AgentQActor, PQNActor)
"""An agent's greedy policy over its Q values (value family, PQN): ``actor(obs, avail, hidden, last)``
-> ``(action, Q, next hidden)``."""


def _argmax_each(log_probs: Sequence[torch.Tensor]) -> torch.Tensor:
    """(B, k) int64: the most likely action of each sub-action's (masked) log-probabilities."""
    return torch.stack([part.argmax(-1) for part in log_probs], -1)


class DeployActor(nn.Module):
    """``forward(obs [, avail] [, hidden] [, last_action])`` -> ``(action [, hidden_out] [, params...])``."""

    # registered buffers (register_buffer in __init__)
    low: torch.Tensor
    high: torch.Tensor

    def __init__(self, actor: nn.Module, space: spaces.Space, masked: bool, with_params: bool) -> None:
        super().__init__()
        self.actor = actor
        self.with_id = actor if isinstance(actor, AgentIdActor) else None
        """A shared actor with ``[policy] agent_id``: the agent's id is appended to ``obs`` first."""
        if isinstance(actor, AgentIdActor):
            actor = actor.actor
        self.kind = distribution_kind(actor)
        self.masked = masked and avail_size(space) > 0
        self.recurrent = bool(actor.recurrent) if isinstance(actor, Q_ACTORS) else (
            isinstance(actor, Actor) and actor.rnn is not None)
        self.hidden_size = int(getattr(actor, "hidden_size", 0)) if self.recurrent else 0
        self.last_action = isinstance(actor, Q_ACTORS) and actor.last_action
        self.with_params = with_params
        self.discrete = not isinstance(space, spaces.Box)
        self.scalar = isinstance(space, spaces.Discrete)
        self.shape = tuple(space.shape) if isinstance(space, spaces.Box) else ()
        if isinstance(space, spaces.Box):
            self.register_buffer("low", torch.as_tensor(np.asarray(space.low, np.float32).ravel()))
            self.register_buffer("high", torch.as_tensor(np.asarray(space.high, np.float32).ravel()))

    def input_names(self) -> list[str]:
        return (["obs"] + (["avail"] if self.masked else []) + (["hidden"] if self.recurrent else [])
                + (["last_action"] if self.last_action else []))

    def output_names(self) -> list[str]:
        names = ["action"] + (["hidden_out"] if self.recurrent else [])
        return names + (PARAMS[self.kind] if self.with_params else [])

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        named = dict(zip(self.input_names(), inputs))
        action, params, hidden_out = self._act(named["obs"], named.get("avail"), named.get("hidden"),
                                               named.get("last_action"))
        if self.scalar:
            action = action[:, 0]
        elif self.shape:
            action = action.reshape((-1, *self.shape))
        out = [action] + ([hidden_out] if hidden_out is not None else [])
        return tuple(out + (params if self.with_params else []))

    def _act(self, obs: torch.Tensor, avail: torch.Tensor | None, hidden: torch.Tensor | None,
             last: torch.Tensor | None = None) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor | None]:
        actor: Any = self.actor
        if self.with_id is not None:
            obs, actor = self.with_id.inputs(obs), self.with_id.actor
        if isinstance(actor, Q_ACTORS):  # value family, PQN: the greedy available action of the agent's Qs
            action, q, h = actor(obs, avail, hidden, last)
            return action.unsqueeze(-1), [q], (h if self.recurrent else None)
        if isinstance(actor, Actor):
            x, hidden_out = actor.base(obs), None
            if hidden is not None and actor.rnn is not None:  # one GRU step from the given state (zeros at an episode start)
                out, h = actor.rnn.gru(x.unsqueeze(0), hidden.unsqueeze(0))
                x, hidden_out = actor.rnn.norm(out[0]), h[0]
            params = list(actor.head.distribution(x, avail))
            if isinstance(actor.head, GaussianHead):  # (mean, std); harl's env adapters clip into the Box
                return torch.minimum(torch.maximum(params[0], self.low), self.high), params, hidden_out
            log_probs = [torch.log_softmax(part, -1) for part in params]  # harl's argmax is of these
            return _argmax_each(log_probs), [torch.cat(params, -1)], hidden_out
        if isinstance(actor, DeterministicActor):
            return actor(obs), [], None
        if isinstance(actor, SquashedGaussianActor):
            mu, log_std = actor.distribution(obs)
            return actor.centre + actor.half_range * torch.tanh(mu), [mu, log_std], None
        if isinstance(actor, CategoricalActor):
            log_probs = actor.log_probs(obs, avail)
            return _argmax_each(log_probs), [torch.cat(log_probs, -1)], None
        q = actor(obs)  # DuelingQActor
        return masked_argmax(q, avail).unsqueeze(-1), [q], None


def distribution_kind(actor: nn.Module) -> str:
    """The name of an actor's action distribution (a key of ``PARAMS``)."""
    if isinstance(actor, Actor):
        return "gaussian" if isinstance(actor.head, GaussianHead) else "categorical"
    kinds = {DeterministicActor: "deterministic", SquashedGaussianActor: "squashed_gaussian",
             CategoricalActor: "categorical", DuelingQActor: "q", AgentQActor: "q", PQNActor: "q"}
    for cls, kind in kinds.items():
        if isinstance(actor, cls):
            return kind
    raise TypeError(f"cannot export an actor of type {type(actor).__name__}")


def team_actors(policy: nn.Module) -> list[nn.Module]:
    """Each agent's actor, in agent order (a shared actor repeats), as the team says: its
    ``export_actors()`` (on- and off-policy teams: their actors; the value family's: each
    agent's greedy policy over its Q network)."""
    export = getattr(policy, "export_actors", None)
    if not callable(export):
        raise TypeError(f"cannot export the actors of a {type(policy).__name__} (it has no export_actors())")
    return list(export())


def deploy_team(policy: nn.Module, action_spaces: list[spaces.Space], masked: bool,
                with_params: bool) -> list[DeployActor]:
    """A ``DeployActor`` per agent, in eval mode, on the CPU, sharing the team's parameters."""
    return [DeployActor(actor, space, masked, with_params).cpu().eval()
            for actor, space in zip(team_actors(policy), action_spaces)]
