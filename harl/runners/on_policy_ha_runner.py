"""Runner for on-policy HA algorithms (HAPPO, HATRPO, HAA2C): agents updated one after another."""

from __future__ import annotations

from typing import Any

from harl.runners.on_policy_base_runner import OnPolicyBaseRunner


class OnPolicyHARunner(OnPolicyBaseRunner):
    """Runner for on-policy HA algorithms: ``[updater] kind = "sequential"``."""

    updater_kind = "sequential"

    def train(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Train the model: each agent in turn, weighted by its predecessors' ratios, then the critic."""
        return super().train()
