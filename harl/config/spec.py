"""A whole pipeline: one config per slot.

Slots with variants (``harl.registry.SLOTS``) hold the config of the kind their table
names; the others have one config class each (``SINGLE_SLOTS``).
"""

from __future__ import annotations

from typing import Any

import attrs

from harl.config.run import CheckpointConfig, LoggingConfig, RunConfig
from harl.evaluator import EvaluatorConfig
from harl.policy.on_policy import PolicyConfig


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
    policy: PolicyConfig
    evaluator: EvaluatorConfig
    logging: LoggingConfig
    checkpoint: CheckpointConfig


SINGLE_SLOTS: dict[str, type] = {"run": RunConfig, "policy": PolicyConfig, "evaluator": EvaluatorConfig,
                                 "logging": LoggingConfig, "checkpoint": CheckpointConfig}
"""Slots with one config class and no ``kind``."""

TOP_SLOTS = [f.name for f in attrs.fields(PipelineSpec)]
NESTED_SLOTS = {"updater.objective"}
"""Slots whose table sits inside another's (``[updater.objective]``)."""
