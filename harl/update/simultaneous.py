"""Multi-agent (MA) simultaneous update, MAPPO-style: every agent sees factor 1."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import torch

from harl.buffers.rollout import AgentBatch
from harl.registry import register
from harl.settings import kind_field, one_of, setting
from harl.update.common import AgentStats
from harl.update.fused import compile_checks, compile_setting
from harl.update.objectives.ppo import PPOConfig
from harl.update.sequential import PolicyLearner


@attrs.frozen
class SimultaneousConfig:
    """``[updater] kind = "simultaneous"``: all agents updated on the same advantages."""

    kind: str = kind_field("simultaneous")
    lr_decay: str = setting("none", "learning-rate schedule over the run, one for every optimiser (the actors' "
                            "[updater.objective] lr and the critic's [critic] lr, as HARL's use_linear_lr_decay): "
                            "none or linear (to 0)", one_of(("none", "linear")))
    others_actions: str = setting(
        "replayed", "off-policy actor step: the other agents' actions in Q are the batch's replayed ones "
        "(HARL, MADDPG) or the current policies' (current)", one_of(("replayed", "current")))
    compile: str = compile_setting()
    objective: Any = setting(factory=PPOConfig, doc="the per-agent objective ([updater.objective])")


def simultaneous_update(learners: Sequence[PolicyLearner],
                        batches: Sequence[AgentBatch]) -> dict[int, AgentStats]:
    """Update each agent independently of the others' changes (factor fixed at 1)."""
    return {i: learner.update(batch, torch.ones_like(batch.active))
            for i, (learner, batch) in enumerate(zip(learners, batches))}


def merge_batches(batches: Sequence[AgentBatch]) -> AgentBatch:
    """Stack agents' samples for one shared actor (needs identical spaces)."""
    avail = None if batches[0].avail is None else torch.cat([b.avail for b in batches])  # type: ignore[misc]
    return AgentBatch(
        obs=torch.cat([b.obs for b in batches]),
        actions=torch.cat([b.actions for b in batches]),
        old_log_probs=torch.cat([b.old_log_probs for b in batches]),
        avail=avail,
        active=torch.cat([b.active for b in batches]),
        advantages=torch.cat([b.advantages for b in batches]),
        hidden=None if batches[0].hidden is None else torch.cat([b.hidden for b in batches]),  # type: ignore[misc]
        starts=None if batches[0].starts is None else torch.cat([b.starts for b in batches]),  # type: ignore[misc]
    )


register("updater", SimultaneousConfig, None, family=("on_policy", "off_policy"), check=compile_checks)
