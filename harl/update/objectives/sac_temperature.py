"""HASAC's critic temperature: the alpha of the critic's soft target, kept apart from the agents'.

HARL's soft critic bootstraps on ``min Q'(s', a') - alpha_c sum_i log pi_i(a'_i | o'_i)`` with
one temperature of its own.  With ``auto_alpha`` it starts at 1 (log alpha_c = 0) and, after
each actor round, takes one Adam step on::

    loss(log alpha_c) = -mean[ log alpha_c * (sum_i log pi_i(a_i | o_i) + sum_i target_entropy_i) ]

where ``log pi_i`` is agent i's log-probability of the action it sampled for its own update
in that round.  Without ``auto_alpha`` it stays at the fixed ``alpha``, like the agents'.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from harl.update.common import optimizer_step


def critic_alpha_loss(log_alpha: torch.Tensor, log_probs: list[torch.Tensor], target_entropy: float) -> torch.Tensor:
    """``-mean[log alpha_c (sum_i log pi_i + target)]`` over the batch, as HARL's ``update_alpha``."""
    joint = torch.stack(log_probs).sum(0).detach()
    return -(log_alpha * (joint + target_entropy)).mean()


class CriticTemperature:
    """The critic's alpha; steps once every agent of the team has reported its round's log pi."""

    def __init__(self, n_agents: int, alpha: float, lr: float | None, target_entropy: float,
                 device: torch.device) -> None:
        self.n_agents = n_agents
        self.target_entropy = target_entropy
        self.log_alpha = torch.tensor(math.log(alpha), device=device, requires_grad=lr is not None)
        self.optimizer = None if lr is None else torch.optim.Adam([self.log_alpha], lr=lr)
        self.pending: dict[int, torch.Tensor] = {}

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    def observe(self, agent: int, log_prob: torch.Tensor) -> None:
        """Agent ``agent``'s log pi (B,) of this round; the last agent's report makes the step."""
        if self.optimizer is None:
            return
        self.pending[agent] = log_prob
        if len(self.pending) < self.n_agents:
            return
        log_probs = [self.pending[i] for i in sorted(self.pending)]
        self.pending = {}
        optimizer_step(self.optimizer, critic_alpha_loss(self.log_alpha, log_probs, self.target_entropy))

    def state_dict(self) -> dict[str, Any]:
        return {"log_alpha": self.log_alpha.detach().clone(),
                "optimizer": None if self.optimizer is None else self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        if self.optimizer is not None and state["optimizer"] is not None:
            self.optimizer.load_state_dict(state["optimizer"])


def critic_temperature(shared: dict[str, Any], critic: nn.Module, alpha: float, lr: float | None,
                       target_entropy: float) -> CriticTemperature:
    """The critic's temperature, made by the first learner built around ``critic`` and kept in
    ``shared`` (one build's ``Parts.shared``) for the rest of the team's learners."""
    if "critic_temperature" not in shared:
        device = next(critic.parameters()).device
        shared["critic_temperature"] = CriticTemperature(len(critic.spaces), alpha, lr, target_entropy,  # type: ignore[arg-type]
                                                         device)
    return shared["critic_temperature"]
