"""Runner for off-policy MA algorithms (MADDPG, MATD3): every actor updated at once."""

from __future__ import annotations

from typing import Any

from harl.runners.off_policy_base_runner import OffPolicyBaseRunner


class OffPolicyMARunner(OffPolicyBaseRunner):
    """Runner for off-policy MA algorithms: ``[updater] kind = "simultaneous"``."""

    updater_kind = "simultaneous"

    def train(self) -> Any:
        """Train the model: every actor against the replayed actions of the others."""
        return super().train()
