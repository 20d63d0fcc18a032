"""Runner for off-policy HA algorithms (HADDPG, HATD3, HASAC, HAD3QN): actors updated in turn."""

from __future__ import annotations

from typing import Any

from harl.runners.off_policy_base_runner import OffPolicyBaseRunner


class OffPolicyHARunner(OffPolicyBaseRunner):
    """Runner for off-policy HA algorithms: ``[updater] kind = "sequential"``."""

    updater_kind = "sequential"

    def train(self) -> Any:
        """Train the model: each actor sees its predecessors' already-updated actions."""
        return super().train()
