"""TD targets over batches of whole episodes, for the value family (IQL, VDN, QMIX).

Every function takes (B episodes, T steps, K = 1 for a mixed Q_tot or A for IQL's per-agent Qs)::

    rewards     (B, T)      the team reward of step t
    terminated  (B, T)      bool: step t reached a terminal state
    filled      (B, T)      bool: step t is a real step (False on padding)
    next_q      (B, T, K)   the target network's value of the state step t reached, Q'(s_{t+1})

and returns ``(B, T, K)`` targets, zero on padding.  Where an episode was cut by a time
limit (its last step not terminal), the last target bootstraps from ``next_q`` at that step
(``truncation = "bootstrap"``, the default); ``truncation = "terminal"`` treats every
episode's last step as terminal, as EPyMARL's gymma envs and JaxMARL's baselines do (a
time limit there ends the episode with ``terminated`` true: no bootstrap).

- ``one_step_targets``: ``r_t + gamma (1 - d_t) Q'(s_{t+1})`` (EPyMARL's ``q_learner``)
- ``n_step_targets``: ``sum_{k<m} gamma^k r_{t+k} + gamma^m (1 - d) Q'(s_{t+m})``, m = min(n, steps left)
- ``lambda_targets``: the lambda-return, ``G_t = r_t + gamma (1 - d_t) [(1 - lam) Q'(s_{t+1}) + lam G_{t+1}]``,
  with ``G_{t+1}`` replaced by ``Q'(s_{t+1})`` after the episode's last step

The ``[returns]`` stage computes nothing per collect: the targets need the target networks'
values on the sampled batch, so the updater calls ``targets`` on each batch (as ``n_step``
does for the replay of transitions).
"""

from __future__ import annotations

import attrs
import torch

from harl.registry import register
from harl.settings import in_range, kind_field, one_of, positive, setting


@attrs.frozen
class EpisodeTDConfig:
    """``[returns] kind = "episode_td"``: 1-step (EPyMARL's), n-step or TD(lambda) targets over whole episodes."""

    kind: str = kind_field("episode_td")
    gamma: float = setting(0.99, "discount factor", in_range(0, 1))
    mode: str = setting("one_step", "one_step (EPyMARL's q_learner), n_step or lambda (TD(lambda))",
                        one_of(("one_step", "n_step", "lambda")))
    n_step: int = setting(3, "rewards summed before bootstrapping when mode = n_step", positive())
    lam: float = setting(0.6, "lambda of mode = lambda (0: one-step, 1: Monte-Carlo)", in_range(0, 1))
    truncation: str = setting(
        "bootstrap", "an episode cut by a time limit: bootstrap (its last step's target adds gamma Q' of what it "
        "reached) or terminal (no bootstrap: EPyMARL's gymma and JaxMARL treat a time limit as terminal)",
        one_of(("bootstrap", "terminal")))
    reward_norm: bool = setting(
        True, "standardise rewards by a running mean and variance of the real steps' rewards before the targets "
        "(EPyMARL's standardise_rewards; after [updater.objective] reward_scale; the statistics are the joint_td "
        "learner's, checkpointed with it)")


def _check(rewards: torch.Tensor, next_q: torch.Tensor) -> None:
    if next_q.dim() != 3 or next_q.shape[:2] != rewards.shape:
        raise ValueError(f"next_q must be (B, T, K) with (B, T) = rewards' {tuple(rewards.shape)}, "
                         f"got {tuple(next_q.shape)}")


def one_step_targets(rewards: torch.Tensor, terminated: torch.Tensor, filled: torch.Tensor,
                     next_q: torch.Tensor, gamma: float) -> torch.Tensor:
    """``r_t + gamma (1 - d_t) Q'(s_{t+1})`` on real steps, 0 on padding."""
    _check(rewards, next_q)
    alive = (~terminated).unsqueeze(-1).to(next_q.dtype)
    out = rewards.unsqueeze(-1) + gamma * alive * next_q
    return out * filled.unsqueeze(-1).to(out.dtype)


def _shifted(x: torch.Tensor, k: int, fill: float | bool) -> torch.Tensor:
    """``x[:, t + k]`` at every t, ``fill`` past the end."""
    if k == 0:
        return x
    pad = torch.full((x.shape[0], min(k, x.shape[1]), *x.shape[2:]), fill, dtype=x.dtype, device=x.device)
    return torch.cat([x[:, k:], pad], 1)


def n_step_targets(rewards: torch.Tensor, terminated: torch.Tensor, filled: torch.Tensor,
                   next_q: torch.Tensor, gamma: float, n: int) -> torch.Tensor:
    """``sum_{k<m} gamma^k r_{t+k} + gamma^m (1 - d_{t+m-1}) Q'(s_{t+m})`` with m = min(n, L - t)."""
    _check(rewards, next_q)
    out = torch.zeros_like(next_q)
    for k in range(n):
        here = _shifted(filled, k, False)
        after = _shifted(filled, k + 1, False) if k + 1 < n else torch.zeros_like(filled)
        out = out + (gamma ** k) * (_shifted(rewards, k, 0.0) * here).unsqueeze(-1)
        last = here & ~after  # step t + k is the window's last: bootstrap from what it reached
        alive = (~_shifted(terminated, k, True)).to(next_q.dtype)
        out = out + (gamma ** (k + 1)) * (last.to(next_q.dtype) * alive).unsqueeze(-1) * _shifted(next_q, k, 0.0)
    return out * filled.unsqueeze(-1).to(out.dtype)


def lambda_targets(rewards: torch.Tensor, terminated: torch.Tensor, filled: torch.Tensor,
                   next_q: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
    """The lambda-return by its backward recursion (see the module docstring)."""
    _check(rewards, next_q)
    T = rewards.shape[1]
    out = torch.zeros_like(next_q)
    later = torch.zeros_like(next_q[:, 0])
    for t in range(T - 1, -1, -1):
        has_next = filled[:, t + 1] if t + 1 < T else torch.zeros_like(filled[:, t])
        nxt = next_q[:, t]
        blend = torch.where(has_next.unsqueeze(-1), (1 - lam) * nxt + lam * later, nxt)
        alive = (~terminated[:, t]).unsqueeze(-1).to(nxt.dtype)
        g = (rewards[:, t].unsqueeze(-1) + gamma * alive * blend) * filled[:, t].unsqueeze(-1).to(nxt.dtype)
        out[:, t] = g
        later = g
    return out


def last_steps(filled: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` bool: True at each episode's last real step (every stored episode has ended)."""
    after = torch.cat([filled[:, 1:], torch.zeros_like(filled[:, :1])], 1)
    return filled & ~after


class EpisodeTD:
    """The ``[returns]`` stage: ``targets`` on a sampled batch; ``compute`` has nothing to do."""

    def __init__(self, config: EpisodeTDConfig) -> None:
        self.config = config

    @property
    def gamma(self) -> float:
        return self.config.gamma

    def compute(self, buffer: object) -> None:
        """Nothing per collect: targets need the target networks on each sampled batch."""
        return None

    def targets(self, rewards: torch.Tensor, terminated: torch.Tensor, filled: torch.Tensor,
                next_q: torch.Tensor) -> torch.Tensor:
        c = self.config
        if c.truncation == "terminal":
            terminated = terminated | last_steps(filled)
        if c.mode == "n_step":
            return n_step_targets(rewards, terminated, filled, next_q, c.gamma, c.n_step)
        if c.mode == "lambda":
            return lambda_targets(rewards, terminated, filled, next_q, c.gamma, c.lam)
        return one_step_targets(rewards, terminated, filled, next_q, c.gamma)


register("returns", EpisodeTDConfig, lambda config, parts: EpisodeTD(config), family="value")
