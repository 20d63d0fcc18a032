"""A whole pipeline: one config per slot.

Slots with variants (``harl.registry.SLOTS``) hold the config of the kind their table
names; the others have one config class each (``SINGLE_SLOTS``).
"""

from __future__ import annotations

from typing import Any

import attrs

from harl.config.run import CheckpointConfig, LoggingConfig, RunConfig
from harl.config.teams import TeamSpec, learning_teams
from harl.evaluator import EvaluatorConfig
from harl.policy.config import AgentQPolicyConfig, PolicyConfig


@attrs.frozen
class PipelineSpec:
    """A whole pipeline: one config per slot."""

    run: RunConfig
    env: Any
    collector: Any
    buffer: Any
    returns: Any
    critic: Any
    updater: Any
    policy: PolicyConfig | AgentQPolicyConfig
    """``[policy]``: its class is the family's (``Family.policy_config``; ``PolicyConfig`` by default)."""
    evaluator: EvaluatorConfig
    logging: LoggingConfig
    checkpoint: CheckpointConfig
    teams: tuple[TeamSpec, ...] = ()
    """``[teams.NAME]`` (``harl.config.teams``); empty: one team of every agent, as before teams."""

    @property
    def learning_teams(self) -> tuple[TeamSpec, ...]:
        """The ``[teams]`` that learn (each with its own stages, ``TeamSpec.spec``), in the file's order;
        () for a pipeline without ``[teams]``."""
        return learning_teams(self.teams)


SINGLE_SLOTS: dict[str, type] = {"run": RunConfig, "policy": PolicyConfig, "evaluator": EvaluatorConfig,
                                 "logging": LoggingConfig, "checkpoint": CheckpointConfig}
"""Slots with one config class and no ``kind`` (``[policy]``'s: the default; a family may name its own)."""

TOP_SLOTS = [f.name for f in attrs.fields(PipelineSpec) if f.name != "teams"]
"""The slot tables; ``[teams]`` holds whole tables of its own (``harl.config.loading``)."""
NESTED_SLOTS = {"updater.objective"}
"""Slots whose table sits inside another's (``[updater.objective]``)."""
