"""Heterogeneous-agent (HA) sequential update: the heart of HAPPO/HATRPO/HAA2C.

Agents are updated one after another.  Agent i_m maximises its objective weighted by
``factor = prod_{j < m} r_{i_j}``, the product of its predecessors' new/old probability
ratios on the same batch, so it optimises the joint advantage given the changes its
predecessors already made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import attrs
import torch

from harl.buffers.rollout import AgentBatch
from harl.registry import register
from harl.settings import kind_field, one_of, setting
from harl.update.common import AgentStats
from harl.update.fused import compile_checks, compile_setting
from harl.update.objectives.ppo import PPOConfig


class PolicyLearner(Protocol):
    """One agent's objective + optimiser, as the updaters see it."""

    def update(self, batch: AgentBatch, factor: torch.Tensor) -> AgentStats: ...

    def ratio(self, batch: AgentBatch) -> torch.Tensor:
        """(N, 1) new/old probability ratio of the batch's actions after ``update``."""
        ...


@attrs.frozen
class SequentialConfig:
    """``[updater] kind = "sequential"``: HA updates, each agent sees its predecessors' change."""

    kind: str = kind_field("sequential")
    order: str = setting("random", "agent order: a new random permutation each iteration, or fixed 0..n-1", one_of(("random", "fixed")))
    lr_decay: str = setting("none", "learning-rate schedule over the run, one for every optimiser (the actors' "
                            "[updater.objective] lr and the critic's [critic] lr, as HARL's use_linear_lr_decay): "
                            "none or linear (to 0)", one_of(("none", "linear")))
    compile: str = compile_setting()
    objective: Any = setting(factory=PPOConfig, doc="the per-agent objective ([updater.objective])")


def sequential_update(learners: Sequence[PolicyLearner], batches: Sequence[AgentBatch],
                      order: Sequence[int]) -> dict[int, AgentStats]:
    """Update agents in ``order``; each is weighted by the product of the earlier ratios."""
    factor = torch.ones_like(batches[order[0]].active)
    stats: dict[int, AgentStats] = {}
    for agent in order:
        stats[agent] = learners[agent].update(batches[agent], factor)
        factor = factor * learners[agent].ratio(batches[agent])
    return stats


register("updater", SequentialConfig, None, family=("on_policy", "off_policy"), default=True, check=compile_checks)
