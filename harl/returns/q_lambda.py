"""PQN's targets: Peng's Q(lambda) returns over a rollout, bootstrapped from max Q, no target network.

JaxMARL's ``_compute_targets`` (``baselines/QLearning/pqn_vdn_ff.py:277-303``, the same in
``pqn_vdn_rnn.py:348-377``), with ``q_t`` the max available Q at step t's observation (summed over
the agents for VDN, per agent for IQL) and ``d_t`` whether the episode ended at step t::

    G_{T-1} = r_{T-1} + gamma (1 - d_{T-1}) q_T
    G_t     = r_t + gamma (1 - d_t) q_{t+1} + gamma lambda (G_{t+1} - q_{t+1}),  then G_t = r_t where d_t
            = r_t + gamma (1 - d_t) ((1 - lambda) q_{t+1} + lambda G_{t+1})

The team reward is what JaxMARL's rollout manager gives as ``reward["__all__"]`` (the sum of the
agents' rewards on MPE, ``jaxmarl/wrappers/baselines.py:371-373``; the first agent's on SMAX, whose
agents share one, ``:382``), times ``reward_scale`` (REW_SCALE, ``pqn_vdn_ff.py:234``).  A time limit
ends the return as a terminal does (JaxMARL's ``done``).

The feed-forward update's targets are made once per rollout from the Q values the acting network
gave (``compute``); the recurrent update makes them inside each minibatch from the network's Q of
the sequence, gradients stopped (``pqn_vdn_rnn.py:391-403``), with the same function (``targets``).
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

from harl.registry import register
from harl.settings import in_range, kind_field, one_of, setting


@attrs.frozen
class QLambdaConfig:
    """``[returns] kind = "q_lambda"``: PQN's lambda-returns from max Q (Peng's Q(lambda))."""

    kind: str = kind_field("q_lambda")
    gamma: float = setting(0.9, "discount (JaxMARL's GAMMA: MPE 0.9, SMAX 0.99)", in_range(0, 1))
    lam: float = setting(0.3, "lambda of the returns (JaxMARL's LAMBDA: MPE 0.3, SMAX 0.85); 0: one-step "
                         "Q-learning targets", in_range(0, 1))
    team_reward: str = setting(
        "first", "the team's reward from the agents' (E, A) rewards: first (the first agent's, for envs that give "
        "every agent the team's: torch MPE with team_reward = true holds the sum of the agents' rewards, SMAX "
        "the shared one), sum, or mean", one_of(("first", "sum", "mean")))
    reward_scale: float = setting(1.0, "rewards are multiplied by this (JaxMARL's REW_SCALE: SMAX 10)",
                                  in_range(0, None, low_open=True))


def q_lambda(rewards: torch.Tensor, dones: torch.Tensor, next_q: torch.Tensor, gamma: float,
             lam: float) -> torch.Tensor:
    """Lambda-returns of a rollout: ``rewards`` (T, N, ...) and ``dones`` (T, N, ...) of each step,
    ``next_q`` (T, N, ...) the max Q of the observation after each step -> (T, N, ...)."""
    out = torch.empty_like(next_q)
    g = rewards[-1] + gamma * (1 - dones[-1]) * next_q[-1]
    out[-1] = g
    for t in range(rewards.shape[0] - 2, -1, -1):
        boot = rewards[t] + gamma * (1 - dones[t]) * next_q[t]
        g = boot + gamma * lam * (g - next_q[t])
        g = (1 - dones[t]) * g + dones[t] * rewards[t]
        out[t] = g
    return out


class QLambda:
    """Sets the buffer's targets from its rewards, ends and recorded max Qs; ``targets`` for the
    recurrent update's own."""

    def __init__(self, config: QLambdaConfig, mixer: Any) -> None:
        self.config = config
        self.mixer = mixer
        """The ``[critic]``'s mixer: ``vdn`` sums the agents' Qs, ``none`` keeps them per agent (IQL)."""

    def team(self, rewards: torch.Tensor) -> torch.Tensor:
        """``(..., A)`` agents' rewards -> ``(..., 1)`` the team's, scaled."""
        how = self.config.team_reward
        r = rewards[..., :1] if how == "first" else rewards.sum(-1, keepdim=True) if how == "sum" else \
            rewards.mean(-1, keepdim=True)
        return r * self.config.reward_scale

    def targets(self, rewards: torch.Tensor, dones: torch.Tensor, q_max: torch.Tensor) -> torch.Tensor:
        """``rewards`` (L, N, A), ``dones`` (L, N) of the steps, ``q_max`` (L + 1, N, A) each step's
        per-agent max Q and the observation's after the last -> (L, N, M) (M: 1 for VDN, A for IQL)."""
        mixed = self.mixer(q_max, None)
        return q_lambda(self.team(rewards), dones.unsqueeze(-1), mixed[1:], self.config.gamma, self.config.lam)

    @torch.no_grad()
    def compute(self, buffer: Any) -> None:
        if buffer.hidden is not None:  # recurrent: the update makes them per minibatch
            return
        v = buffer.valid
        buffer.set_targets(self.targets(buffer.rewards[v:], buffer.dones[v:], buffer.q_max[v:]))


register("returns", QLambdaConfig, lambda config, parts: QLambda(config, parts.critic), family="pqn")
