"""n-step targets for the off-policy family, formed when a replay batch is sampled.

For a sampled transition at time t of one env, the target sums up to ``n`` rewards of
the same episode and bootstraps from the state reached after the last one::

    y_t = r_t + g r_{t+1} + ... + g^(m-1) r_{t+m-1} + g^m (1 - terminated) Q'(s_{t+m}, a')

``m <= n`` stops early where the episode ended (terminated or truncated) or where the
buffer holds no later step of that env yet.  Truncation and "no later step yet" still
bootstrap (from the observation actually reached); termination does not.  Each sample
carries its own ``g^m (1 - terminated)`` as ``discount``.

Targets depend on which steps follow a sample, which changes while the buffer fills, so
they are computed per batch (``NStepReturns.sample``), not once per iteration: the
Trainer's ``returns.compute(buffer)`` is a no-op here.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

from harl.registry import register
from harl.settings import in_range, kind_field, positive, setting


@attrs.frozen
class NStepConfig:
    """``[returns] kind = "n_step"``: off-policy targets from n-step reward sums."""

    kind: str = kind_field("n_step")
    gamma: float = setting(0.99, "discount factor", in_range(0, 1))
    n_step: int = setting(1, "rewards summed before bootstrapping (fewer where the episode ends)", positive())
    proper_time_limits: bool = setting(True, "bootstrap on truncation; false treats a time limit as termination")


def n_step_returns(rewards: torch.Tensor, ends: torch.Tensor, gamma: float
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Discounted sums over windows that stop at the first end.

    ``rewards`` ``(B, n, ...)``: the rewards of the n steps from each sample on, in order;
    ``ends`` ``(B, n)`` bool: the episode (or the data) ends after that step.  Returns
    ``(returns (B, ...), last (B,) index of the last step used, discount (B,) = gamma^(last+1))``.
    Rewards after the first end never enter the sum (not even as NaN times zero).
    """
    batch, n = ends.shape
    ends_before = torch.cumsum(ends.to(torch.int64), 1) - ends.to(torch.int64)
    used = ends_before == 0
    powers = gamma ** torch.arange(n, dtype=rewards.dtype, device=rewards.device)
    weight = (used.to(rewards.dtype) * powers).reshape(batch, n, *([1] * (rewards.dim() - 2)))
    terms = torch.where(weight > 0, rewards * weight, torch.zeros_like(rewards))
    last = used.sum(1) - 1
    return terms.sum(1), last, gamma ** (last + 1).to(rewards.dtype)


class NStepReturns:
    """The ``n_step`` return computer: forms each sampled batch's targets.

    ::

        returns.compute(buffer)                      # no-op (Trainer contract)
        batch = returns.sample(buffer, 1000, gen)    # n-step sums + per-sample discount
    """

    def __init__(self, config: NStepConfig) -> None:
        self.config = config

    def compute(self, buffer: Any) -> None:
        """Nothing to do per iteration, by design: targets are formed per sampled batch (``sample``).

        Precomputing them here would mean an n-step window for every stored transition each
        iteration (capacity x n reads, e.g. 10^6 x 20) where the update round reads only
        ``updates_per_round x batch_size`` of them; and a transition's window depends on what
        the buffer holds after it, which ``collect`` changes between iterations.
        """

    def sample(self, buffer: Any, batch_size: int, generator: torch.Generator) -> Any:
        """A uniformly sampled batch of transitions with their n-step targets."""
        return self.batch(buffer, buffer.sample_index(batch_size, generator))

    def batch(self, buffer: Any, index: torch.Tensor) -> Any:
        """The batch of the flat transition indices ``index`` (see ``ReplayBuffer``)."""
        cfg = self.config
        rows, envs = buffer.windows(index, cfg.n_step)
        ends = buffer.ends(rows, envs)
        rewards = buffer.at_windows(buffer.rewards, rows, envs)  # (B, n, A)
        returns, last, discount = n_step_returns(rewards, ends, cfg.gamma)
        last_rows = rows.gather(1, last.unsqueeze(1)).squeeze(1)
        stop = buffer.terminated[last_rows, envs]
        if not cfg.proper_time_limits:
            stop = stop | buffer.truncated[last_rows, envs]
        discount = torch.where(stop, torch.zeros_like(discount), discount)
        return buffer.gather(rows[:, 0], envs, last_rows, returns, discount, last + 1)


register("returns", NStepConfig, lambda config, parts: NStepReturns(config), family="off_policy")
