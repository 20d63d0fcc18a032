"""Runner for on-policy MA algorithms (MAPPO): every agent updated at once."""

from __future__ import annotations

from typing import Any

from harl.runners.on_policy_base_runner import OnPolicyBaseRunner


class OnPolicyMARunner(OnPolicyBaseRunner):
    """Runner for on-policy MA algorithms: ``[updater] kind = "simultaneous"``."""

    updater_kind = "simultaneous"

    def train(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Training procedure for MAPPO: every agent on the same advantages, then the critic."""
        return super().train()
