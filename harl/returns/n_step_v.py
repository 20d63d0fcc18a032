"""n-step returns from V for the on-policy family (EPyMARL's ``nstep_returns`` of its IPPO and IA2C).

For step t of one env, the return sums up to ``n_step`` rewards of the same episode and
bootstraps from the value of the state the last of them reached::

    G_t = r_t + g r_{t+1} + ... + g^(m-1) r_{t+m-1} + g^m V(s_{t+m})        m <= n_step

The window stops early (``m < n_step``) where the episode ends or where the rollout does:

- termination: no bootstrap (EPyMARL masks every later reward and value);
- truncation (a time limit): the value of the state actually reached, as GAE's
  ``proper_time_limits`` (false: truncation is a termination);
- the rollout's last step: the value of the state after it (``buffer.values[T]``): what
  EPyMARL's ``add_value_last_step`` adds at the last step of its batch.

The values are the buffer's (what the collector stored; with ``[critic] polyak`` (``independent_v``) the
target critic's, as EPyMARL's targets read its target critic).  The advantages handed back
are ``G - V(s_t)``; an interleaved update (``[critic] interleave``) forms its own each round.

``reward_norm``: each reward is first standardised by a running mean and variance of
every reward seen, per agent (EPyMARL's ``standardise_rewards``, ``RunningMeanStd``: with a
common reward every agent's column is the same stream, so the statistics are EPyMARL's one
common set).  The statistics are this stage's state, saved in checkpoints.  They count the
rollout's real steps only; EPyMARL's also count the zeros that pad its batch of episodes.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

from harl.registry import register
from harl.returns.gae import ReturnStats, RolloutTargets
from harl.returns.running_stats import RunningMeanStd
from harl.settings import in_range, kind_field, positive, setting


@attrs.frozen
class NStepVConfig:
    """``[returns] kind = "n_step_v"``: EPyMARL's n-step returns from V (IPPO, IA2C)."""

    kind: str = kind_field("n_step_v")
    gamma: float = setting(0.99, "discount factor", in_range(0, 1))
    n_step: int = setting(5, "rewards summed before bootstrapping from V (EPyMARL's q_nstep); fewer where the "
                          "episode or the rollout ends", positive())
    proper_time_limits: bool = setting(True, "bootstrap on truncation; false treats a time limit as termination")
    reward_norm: bool = setting(False, "standardise rewards by a running mean and variance of all rewards "
                                "seen, per agent, before the returns (EPyMARL's standardise_rewards)")
    value_after_last_step: bool = setting(
        False, "an episode that terminates at the rollout's last step still bootstraps from V of its terminal "
        "observation (EPyMARL's add_value_last_step as its padded batches play it: the batch's longest "
        "episode, every episode while all run to the time limit; with rollout_length = the episode limit, "
        "the same steps)")


def n_step_v_returns(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor,
                     terminated: torch.Tensor, truncated: torch.Tensor, gamma: float, n_step: int) -> torch.Tensor:
    """``G_t`` for a rollout of T steps (the module's formula).

    ``rewards`` ``(T, E, ...)``; ``values`` ``(T + 1, E, ...)`` V(s_t) with the state after the
    last step at T; ``next_values`` ``(T, E, ...)`` V of the state reached after step t (the
    pre-reset one where an episode ended); ``terminated``, ``truncated`` ``(T, E)`` bool,
    broadcast over any trailing agent axis.
    """
    T = rewards.shape[0]
    extra = rewards.dim() - terminated.dim()
    shape = terminated.shape + (1,) * extra
    term = terminated.reshape(shape)
    stop = (terminated | truncated).reshape(shape)
    returns = torch.zeros_like(rewards)
    zero = torch.zeros_like(rewards[0])
    for t in range(T):
        total = zero
        running = torch.ones_like(term[0])  # the window of step t still runs (per env)
        for k in range(min(n_step, T - t)):
            s = t + k
            total = total + torch.where(running, gamma**k * rewards[s], zero)
            ends = torch.ones_like(running) if k == n_step - 1 or s == T - 1 else stop[s]
            boot = running & ends & ~term[s]
            total = total + torch.where(boot, gamma ** (k + 1) * next_values[s], zero)
            running = running & ~ends
        returns[t] = total
    return returns


class NStepV:
    """The ``n_step_v`` return computer (its reward statistics are its checkpointed state)."""

    def __init__(self, config: NStepVConfig, columns: int, device: torch.device | str = "cpu") -> None:
        """``columns``: the critic's rewards per step, one per agent (FP state, independent critics) or 1."""
        self.config = config
        self.reward_stats = RunningMeanStd((columns,), device) if config.reward_norm else None

    def compute(self, buffer: RolloutTargets) -> ReturnStats:
        cfg = self.config
        rewards = buffer.critic_rewards()
        if self.reward_stats is not None:
            per_agent = rewards if rewards.dim() == 3 else rewards.unsqueeze(-1)  # EP state: the team reward
            self.reward_stats.update(per_agent)
            rewards = self.reward_stats.standardise(per_agent).reshape(rewards.shape)
        terminated, truncated = buffer.terminated, buffer.truncated
        if not cfg.proper_time_limits:
            terminated = terminated | truncated
        if cfg.value_after_last_step:
            terminated = terminated.clone()
            terminated[-1] = False
        values = buffer.values
        returns = n_step_v_returns(rewards, values, buffer.next_values, terminated, truncated, cfg.gamma, cfg.n_step)
        advantages = returns - values[:-1]
        buffer.set_targets(advantages, returns)
        return ReturnStats(float(advantages.mean()), float(returns.mean()))

    def state_dict(self) -> dict[str, Any]:
        return {} if self.reward_stats is None else {"reward_stats": self.reward_stats.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.reward_stats is not None and "reward_stats" in state:
            self.reward_stats.load_state_dict(state["reward_stats"])


def _n_step_v(config: NStepVConfig, parts: Any) -> NStepV:
    per_agent = parts.wiring.fp_state or getattr(parts.critic, "per_agent_values", False)
    return NStepV(config, parts.n_agents if per_agent else 1, parts.device)


register("returns", NStepVConfig, _n_step_v, family="on_policy")
