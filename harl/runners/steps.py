"""Every call the runner facades make into collector, buffer and updater internals, in one place.

HARL's runners drive one env step at a time (``collect(step)``, ``envs.step``,
``insert(data)``); harl's collectors run a whole rollout in ``collect(buffer)``.  These
functions are the collectors' per-step halves, written against today's stages:

on-policy (``harl/collect/on_policy.py``, one loop iteration of ``collect``)::

    start(stages, obs, state, avail)          # the collector's start, from the runner's own reset
    acting = act(stages, t)                   # policy + critic for step t
    episodes = observe(stages, acting, step, actions, log_probs, values)   # step t into the buffer
    bootstrap(stages)                         # V of the last state
    trainer.compute_returns(); stats = trainer.update(); roll_over(stages)   # the Trainer's own steps

off-policy (``harl/collect/off_policy.py``)::

    random(stages, masks) / explore(stages, obs, masks) / greedy(stages, obs, masks)
    active = add(stages, before, actions, step, active)   # one transition per env
    stats = trainer.update(steps=1)                        # one critic (+ actor) step, the Trainer's

Every call goes through the stages' public per-step methods (the collectors' ``start`` /
``act`` / ``observe`` / ``finish`` / ``advance``, the buffers' ``insert``); returns, updates,
checks and counting are the Trainer's own step functions (``harl.trainer.Trainer``), the ones
its loop calls: no stage's arrays are written here and no step is written twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import torch

from harl.buffers.records import StartRecord
from harl.collect.off_policy import random_actions
from harl.collect.on_policy import Acting
from harl.runners.envs import to_numpy


def _tensor(x: Any, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x, dtype=dtype, device=device)


# ---------------------------------------------------------------- on-policy


def start(stages: Any, obs: Sequence[Any], state: Any, avail: Sequence[Any] | None) -> None:
    """Slot 0 of the rollout from the runner's own reset: first observations, fresh GRU states."""
    stages.collector.start(stages.buffer, StartRecord(obs, state, avail))


def act(stages: Any, t: int) -> Acting:
    """The team's actions and the critic's values for step ``t`` of the rollout."""
    return stages.collector.act(stages.buffer, t)


def observe(stages: Any, acting: Acting, step: Any, actions: Sequence[Any] | None = None,
            log_probs: Sequence[Any] | None = None, values: Any = None) -> list[dict[str, Any]]:
    """Insert step ``t`` into the rollout; ``actions`` / ``log_probs`` / ``values`` replace the
    acting's (the runner's ``insert`` data).  Returns the episodes that ended at this step."""
    record = stages.collector.observe(acting, step)
    dev = stages.buffer.device
    if actions is not None:
        record = attrs.evolve(record, actions=[_tensor(a, dev).reshape(b.shape) for a, b in zip(actions, acting.actions)])
    if log_probs is not None:
        record = attrs.evolve(record, log_probs=[_tensor(p, dev).reshape(b.shape)
                                                 for p, b in zip(log_probs, acting.log_probs)])
    if values is not None:
        record = attrs.evolve(record, values=_tensor(values, dev).reshape(acting.values.shape))
    stages.buffer.insert(record)
    return list(step.episode_infos)


def bootstrap(stages: Any) -> None:
    """V of the state after the rollout's last step (the collector's last call of a rollout)."""
    stages.collector.finish(stages.buffer)


def roll_over(stages: Any) -> None:
    stages.buffer.roll_over()


def rollout_length(stages: Any) -> int:
    return int(stages.buffer.length)


def hidden_size(stages: Any) -> tuple[int, int]:
    """(actor, critic) GRU widths; 0 where feed-forward."""
    return int(stages.policy.hidden_size), int(getattr(stages.critic, "hidden_size", 0) or 0)


def fp_state(stages: Any) -> bool:
    return bool(stages.buffer.fp_state)


# ---------------------------------------------------------------- off-policy


def masks(stages: Any, avail: Sequence[Any | None]) -> list[torch.Tensor | None]:
    return [None if a is None else _tensor(a, stages.device) for a in avail]


def random(stages: Any, agent_masks: Sequence[torch.Tensor | None], n: int) -> list[torch.Tensor]:
    """Warm-up actions: uniform in each Box, among the available categories (the collector's generator)."""
    return random_actions(stages.venv.action_spaces, agent_masks, n, stages.device, stages.collector.generator)


def explore(stages: Any, obs: Sequence[Any], agent_masks: Sequence[torch.Tensor | None]) -> list[torch.Tensor]:
    """Actions with the objective's exploration (noise, sampling, epsilon) at the collector's step count."""
    return stages.policy.explore([_tensor(o, stages.device) for o in obs], agent_masks, stages.collector.env_steps)


def greedy(stages: Any, obs: Sequence[Any], agent_masks: Sequence[torch.Tensor | None]) -> list[torch.Tensor]:
    actions, _ = stages.policy.act([_tensor(o, stages.device) for o in obs], agent_masks, deterministic=True)
    return actions


def warming_up(stages: Any) -> bool:
    return bool(stages.collector.warming_up)


def add(stages: Any, before: tuple[Sequence[Any], Any, Sequence[Any] | None], actions: Sequence[Any],
        step: Any, active: np.ndarray | None) -> np.ndarray:
    """One transition per env into the replay buffer; returns who is alive for the next one."""
    n = stages.buffer.n_envs
    active = np.ones((n, stages.buffer.n_agents), np.float32) if active is None else active
    transition, alive = stages.collector.observe(before, actions, step, active)
    stages.buffer.insert(transition)
    stages.collector.advance(n)
    return to_numpy(alive).astype(np.float32)
