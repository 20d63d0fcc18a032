"""HARL's ``get_defaults_yaml_args`` and ``update_args``, with HARL's meaning, over harl's copy of
HARL's defaults (``harl/compat/defaults``, JSON data in HARL's dict structure).

One difference on purpose: HARL drops an override key that matches nothing; harl raises a
``ConfigError`` with "did you mean" instead, so a misspelt ``--num_env_step`` is never lost.
"""

from __future__ import annotations

from typing import Any

from harl.compat.args import update_args
from harl.compat.data import algo_defaults, env_defaults

__all__ = ["get_defaults_yaml_args", "update_args"]


def get_defaults_yaml_args(algo: str, env: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(algo_args, env_args): HARL's default config of ``algo`` and of ``env``, fresh copies."""
    return algo_defaults(algo), env_defaults(env)
