"""Before a resume: keys whose edit changes the shape of what the checkpoint holds.

A checkpoint stores per-env state (each env's episode start, each eval env's RNG state,
a saved replay buffer's rows), so a run's ``pipeline.toml`` edited after it was written
(``collector.n_envs = 4`` -> ``8``) cannot continue from it; without this check the
mismatch surfaced only at the first collect, as a traceback.  Networks that no longer
fit (``policy.hidden_sizes``, another env) are reported by ``harl.run.restore``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harl.config.loading import parse_toml
from harl.errors import CheckpointError, ConfigError

SHAPE_KEYS = ("collector.n_envs", "evaluator.n_envs")
"""Keys a checkpoint's contents are shaped by, in every run."""
BUFFER_KEYS = ("buffer.capacity",)
"""Also shaping it when the replay buffer is saved (``checkpoint.replay_buffer``)."""


def _at(data: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def check_resumable(state: dict[str, Any], spec: Any, pipeline: Path, checkpoint: Path) -> None:
    """``CheckpointError`` naming each shape key of ``pipeline`` that differs from ``checkpoint``'s."""
    try:
        saved = parse_toml(state.get("pipeline", ""), "the checkpoint's pipeline")
    except ConfigError:
        return  # a checkpoint without a readable pipeline: restore() reports what does not fit
    keys = SHAPE_KEYS + (BUFFER_KEYS if "buffer" in state else ())
    differ = []
    for key in keys:
        then = _at(saved, key)
        slot, _, name = key.partition(".")
        now = getattr(getattr(spec, slot), name, None)
        if then is not None and now is not None and then != now:
            differ.append(f"{key} is {now:,} now but was {then:,}")
    if differ:
        listed = "; ".join(differ)
        raise CheckpointError(
            f"{pipeline}: {listed} when {checkpoint} was written, and the checkpoint holds state per "
            f"environment (or buffer row); set {'them' if len(differ) > 1 else 'it'} back to resume, or "
            f"start a new run from this pipeline with harl train {pipeline}"
        )
