"""What a Multi-Agent Transformer's saved weights from older harl need to load today.

``migrate`` runs where the transformer loads a state dict (``MultiAgentTransformer._load_from_state_dict``),
on the dict being loaded, before torch matches its keys:

- weights saved by harl's first MAT (ce055d2), before the decoding order was saved with them, have
  no ``order``: they decode agent 0 first, as they were trained;
- weights saved while the policy kept ``order = "episode"``'s running orders (harl b851e07 up to the
  step record carrying them) have ``env_orders``, each collection env's order in its running episode
  ``(E, A)`` (empty when the run drew none): today the rollout buffer carries them from step to
  step, so the key is taken out and handed back, for the policy to continue those episodes in
  their orders (``mat_policy.TransformerPolicy``).
"""

from __future__ import annotations

from typing import Any

import torch


def migrate(state_dict: dict[str, Any], prefix: str, n_agents: int) -> torch.Tensor | None:
    """Bring ``state_dict`` (the keys under ``prefix``) to today's layout, in place; the running orders
    older weights saved (``(E, A)``), or None where they saved none."""
    state_dict.setdefault(prefix + "order", torch.arange(n_agents))
    orders = state_dict.pop(prefix + "env_orders", None)
    return orders if orders is not None and orders.numel() else None
