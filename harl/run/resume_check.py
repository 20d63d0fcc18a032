"""Before a resume: edits that would make the resumed run not a continuation of the one on disk.

A resumed run must go on exactly where its checkpoint stopped, and its new rows must come from
the same experiment as the rows before them.  So the run's pipeline (``pipeline.toml`` as
edited by hand, or with ``--resume --set``) is compared key by key with the pipeline saved in
the checkpoint, and an edit of a *continuity key* is refused, before anything is built or
written, naming each key, both values and why:

- ``run.seed``: the seed drew the run's earlier rows;
- ``env.*``: the environment and every one of its settings made the run's data;
- ``collector.*`` (but ``backend``, ``workers``, ``restart_workers``, ``step_timeout_s``): how
  many envs step how far per iteration (``n_envs``, ``rollout_length``, ``warmup_steps``, ...): the
  data stream, the iteration's size and the per-env state saved;
- ``evaluator.n_envs``: the evaluation envs' saved random states, one per env;
- ``buffer.*``: the buffer's shape, what it stores and samples (a saved replay buffer's rows);
- ``policy.*``: the actors' networks;
- ``critic.`` ``hidden_sizes``, ``state_type``, ``activation``, ``input_norm``, ``twin``,
  ``value_norm``, ``encoder``, ``channel_order``, ``dueling_hidden_sizes``,
  ``dueling_activation``: the critic's network and what it reads;
- ``updater.objective.squash``, ``updater.objective.action_aggregation``: how actions are
  formed and scored;
- every ``kind`` (``returns.kind``, ``critic.kind``, ``updater.kind``, ``updater.objective.kind``,
  ...): another stage is another algorithm.

Everything else may change on a resume: the budget (``run.total_env_steps``), the device and
threads, learning rates and the other optimisation settings, the evaluation's schedule and
episodes, logging and checkpointing.  ``resume_keys_doc`` lists the same in words (docs).

Both pipelines are compared in today's names (``harl.config.renames``): a checkpoint written by an
older harl (``[collector] train_interval``) resumes under the pipeline resolved now (``rollout_length``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harl.config.loading import Loader, parse_toml
from harl.config.renames import renamed
from harl.errors import CheckpointError, ConfigError

PER_ENV = ("collector.n_envs", "evaluator.n_envs")
"""Keys the checkpoint's per-env state is shaped by (named first, with that reason)."""
BUFFER_KEYS = ("buffer.capacity",)
"""Also shaping it when the replay buffer is saved (``checkpoint.replay_buffer``)."""
FREE_COLLECTOR_KEYS = ("backend", "workers", "restart_workers", "step_timeout_s")
"""Collector keys that change how envs are run, not what they produce."""
CRITIC_SHAPE_KEYS = ("hidden_sizes", "state_type", "activation", "input_norm", "twin", "value_norm", "encoder",
                     "channel_order", "dueling_hidden_sizes", "dueling_activation")
OBJECTIVE_KEYS = ("squash", "action_aggregation")

REASONS = {
    "seed": "the seed drew the run's earlier rows",
    "env": "the environment and its settings made the run's data",
    "collector": "it sets the data stream and the size of an iteration",
    "buffer": "it shapes the buffer and what it samples",
    "policy": "it shapes the actors' networks",
    "critic": "it shapes the critic's network or what it reads",
    "objective": "it changes how actions are formed and scored",
    "kind": "another stage is another algorithm",
}


def resume_keys_doc() -> str:
    """The continuity keys in one line (``harl train --resume --help``, docs)."""
    return ("run.seed; env.*; collector.* but backend, workers, restart_workers and step_timeout_s; "
            f"evaluator.n_envs; buffer.*; policy.*; critic.{{{','.join(CRITIC_SHAPE_KEYS)}}}; "
            f"updater.objective.{{{','.join(OBJECTIVE_KEYS)}}}; every kind")


def _today(text: str, source: str) -> dict[str, Any]:
    """The pipeline ``text`` with every old key in its new place (as loading it would)."""
    data = parse_toml(text, source)
    loader = Loader()
    loader.use_family_of(data)
    return renamed(data, loader, source)


def _flat(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def reason(key: str) -> str | None:
    """Why an edit of ``key`` breaks the run's continuity (None: it may change on a resume)."""
    table, _, rest = key.partition(".")
    last = key.rpartition(".")[2]
    if last == "kind":
        return REASONS["kind"]
    if key == "run.seed":
        return REASONS["seed"]
    if table in ("env", "buffer", "policy"):
        return REASONS[table]
    if table == "collector" and rest not in FREE_COLLECTOR_KEYS:
        return REASONS["collector"]
    if key == "evaluator.n_envs":
        return "the checkpoint holds one random state per evaluation env"
    if table == "critic" and rest in CRITIC_SHAPE_KEYS:
        return REASONS["critic"]
    if key.startswith("updater.objective.") and last in OBJECTIVE_KEYS:
        return REASONS["objective"]
    return None


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "unset"
    return str(value)


def check_resumable(state: dict[str, Any], text: str, pipeline: Path, checkpoint: Path,
                    edit: str = "") -> None:
    """``CheckpointError`` naming each continuity key of ``text`` (the pipeline to resume with)
    that differs from ``checkpoint``'s pipeline.  ``edit``: how ``text`` came about (``--set
    run.seed=2``), said in the message; empty for ``pipeline`` as it is on disk."""
    try:
        saved = dict(_flat(_today(state.get("pipeline", ""), "the checkpoint's pipeline")))
        now = dict(_flat(_today(text, str(pipeline))))
    except ConfigError:
        return  # a checkpoint without a readable pipeline: restore() reports what does not fit
    per_env = PER_ENV + (BUFFER_KEYS if "buffer" in state else ())
    changed = [key for key in dict.fromkeys([*saved, *now]) if saved.get(key) != now.get(key)]
    shaped = [key for key in changed if key in per_env and saved.get(key) is not None and now.get(key) is not None]
    where = f"{pipeline} with {edit}" if edit else str(pipeline)
    undo = "drop the --set" if edit else ("set them back" if len(shaped) > 1 else "set it back")
    if shaped and len(shaped) == len([k for k in changed if reason(k)]):
        listed = "; ".join(f"{k} is {_show(now[k])} now but was {_show(saved[k])}" for k in shaped)
        raise CheckpointError(
            f"{where}: {listed} when {checkpoint} was written, and the checkpoint holds state per "
            f"environment (or buffer row); {undo} to resume, or start a new run from this pipeline with "
            f"harl train {pipeline}")
    broken = [(key, why) for key in changed if (why := reason(key)) is not None]
    if broken:
        listed = "; ".join(f"{k} is {_show(now.get(k))} now but was {_show(saved.get(k))} ({why})"
                           for k, why in broken)
        undo = "drop the --set" if edit else ("set them back" if len(broken) > 1 else "set it back")
        raise CheckpointError(
            f"{where}: {listed} when {checkpoint} was written. A resumed run continues the run that wrote "
            f"the rows before it, so {'these keys' if len(broken) > 1 else 'this key'} cannot change on a "
            f"resume (docs/reliability.md lists them); {undo} to resume, or start a new run with the edit: "
            f"harl train {pipeline}{' ' + edit.replace('--set ', '--set ') if edit else ''} (nothing was "
            "written)")
