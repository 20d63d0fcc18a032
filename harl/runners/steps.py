"""Every call the runner facades make into collector, buffer and updater internals, in one place.

HARL's runners drive one env step at a time (``collect(step)``, ``envs.step``,
``insert(data)``); harl's collectors run a whole rollout in ``collect(buffer)``.  These
functions are the collectors' per-step halves, written against today's stages:

on-policy (``harl/collect/on_policy.py``, one loop iteration of ``collect``)::

    start(stages, obs, state, avail)          # the collector's _start, from the runner's reset
    acting = act(stages, t)                   # policy + critic for step t
    episodes = observe(stages, acting, step, actions, log_probs, values)   # step t into the buffer
    bootstrap(stages); compute(stages)        # V of the last state; the ReturnComputer
    stats = update(stages, progress); roll_over(stages)

off-policy (``harl/collect/off_policy.py``)::

    random(stages, masks) / explore(stages, obs, masks) / greedy(stages, obs, masks)
    active = add(stages, before, actions, step, active)   # one transition per env
    stats = gradient_step(stages, progress)                # one critic (+ actor) step

When the collectors expose ``act(t) -> Acting`` and ``observe(acting, env_step) -> StepRecord``
(+ ``buffer.insert(record)``), and the off-policy ones a ``Transition``, only this module changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import torch

from harl.collect.off_policy import random_actions
from harl.runners.envs import to_numpy


def _tensor(x: Any, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x, dtype=dtype, device=device)


# ---------------------------------------------------------------- on-policy


@attrs.frozen
class Acting:
    """What the team and critic chose for step ``t`` (before the env step)."""

    t: int
    actions: list[torch.Tensor]
    """Per agent ``(E, k_i)``."""
    log_probs: list[torch.Tensor]
    """Per agent ``(E, k_i)``: one log-probability per action dimension."""
    values: torch.Tensor
    """``(E,)`` EP or ``(E, A)`` FP, in env units."""
    hidden: list[torch.Tensor] | None
    """Recurrent actors: each agent's GRU state after this step."""
    critic_hidden: torch.Tensor | None
    """Recurrent critic: its GRU state after this step."""


def start(stages: Any, obs: Sequence[Any], state: Any, avail: Sequence[Any] | None) -> None:
    """Slot 0 of the rollout from a reset: first observations, fresh GRU states."""
    buffer = stages.buffer
    for i, o in enumerate(obs):
        buffer.obs[i][0].copy_(_tensor(o, buffer.device, buffer.obs[i].dtype).reshape(buffer.obs[i][0].shape))
        if avail is not None and avail[i] is not None and buffer.avail[i] is not None:
            buffer.avail[i][0].copy_(_tensor(avail[i], buffer.device))
    buffer.state[0].copy_(_tensor(state, buffer.device, buffer.state.dtype).reshape(buffer.state[0].shape))
    buffer.active[0].fill_(1.0)
    buffer.starts[0].fill_(1.0)
    for h in buffer.hidden or []:
        h[0].zero_()
    if buffer.critic_hidden is not None:
        buffer.critic_hidden[0].zero_()
    stages.collector.started = True  # a later Trainer.train continues these episodes


@torch.no_grad()
def act(stages: Any, t: int) -> Acting:
    buffer = stages.buffer
    obs = [o[t] for o in buffer.obs]
    avail = [None if a is None else a[t] for a in buffer.avail]
    hidden = None if buffer.hidden is None else [h[t] for h in buffer.hidden]
    actions, log_probs = stages.policy.act(obs, avail, hidden=hidden, starts=buffer.starts[t])
    critic_hidden = None
    if buffer.critic_hidden is None:
        values = stages.critic.value(buffer.state[t])
    else:
        values, critic_hidden = stages.critic.step(buffer.state[t], buffer.critic_hidden[t], buffer.starts[t])
    return Acting(t, actions, log_probs, values, hidden, critic_hidden)


@torch.no_grad()
def observe(stages: Any, acting: Acting, step: Any, actions: Sequence[Any] | None = None,
            log_probs: Sequence[Any] | None = None, values: Any = None) -> list[dict[str, Any]]:
    """Store step ``acting.t``; ``actions`` / ``log_probs`` / ``values`` replace the acting's
    (the runner's ``insert`` data).  Returns the episodes that ended at this step."""
    buffer, t, dev = stages.buffer, acting.t, stages.buffer.device
    actions = acting.actions if actions is None else actions
    log_probs = acting.log_probs if log_probs is None else log_probs
    buffer.values[t] = acting.values if values is None else _tensor(values, dev).reshape(buffer.values[t].shape)
    if buffer.critic_hidden is not None:
        buffer.critic_hidden[t + 1] = acting.critic_hidden
    for i in range(buffer.n_agents):
        buffer.actions[i][t] = _tensor(actions[i], dev).reshape(buffer.actions[i][t].shape)
        buffer.log_probs[i][t] = _tensor(log_probs[i], dev).reshape(buffer.log_probs[i][t].shape)
        buffer.obs[i][t + 1].copy_(_tensor(step.obs[i], dev, buffer.obs[i].dtype).reshape(buffer.obs[i][t + 1].shape))
        if step.avail is not None and step.avail[i] is not None and buffer.avail[i] is not None:
            buffer.avail[i][t + 1].copy_(_tensor(step.avail[i], dev))
    buffer.state[t + 1].copy_(_tensor(step.state, dev, buffer.state.dtype).reshape(buffer.state[t + 1].shape))
    buffer.rewards[t].copy_(_tensor(step.rewards, dev))
    terminated = _tensor(step.terminated, dev, torch.bool)
    truncated = _tensor(step.truncated, dev, torch.bool)
    buffer.terminated[t], buffer.truncated[t] = terminated, truncated
    ended = terminated | truncated
    buffer.starts[t + 1] = ended.float()
    for h, new in zip(buffer.hidden or [], acting.hidden or []):
        h[t + 1] = new
    active = _tensor(step.active, dev)
    buffer.active[t + 1] = torch.where(ended.unsqueeze(-1), torch.ones_like(active), active)
    if not bool(ended.any()):
        return []
    final = _tensor(step.final_state, dev)
    if buffer.critic_hidden is None:
        buffer.final_values[t] = stages.critic.value(final)
    else:
        buffer.final_values[t] = stages.critic.value(final, buffer.critic_hidden[t + 1],
                                                     torch.zeros_like(buffer.starts[t + 1]))
    return list(step.episode_infos)


@torch.no_grad()
def bootstrap(stages: Any) -> None:
    """V of the state after the rollout's last step (the collector's last line)."""
    buffer = stages.buffer
    if buffer.critic_hidden is None:
        buffer.values[-1] = stages.critic.value(buffer.state[-1])
    else:
        buffer.values[-1] = stages.critic.value(buffer.state[-1], buffer.critic_hidden[-1], buffer.starts[-1])


def compute(stages: Any) -> None:
    stages.returns.compute(stages.buffer)


def update(stages: Any, progress: float) -> Any:
    return stages.updater.update(stages.buffer, progress=progress)


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
    obs, state, avail = before
    n = stages.buffer.n_envs
    active = np.ones((n, stages.buffer.n_agents), np.float32) if active is None else active
    final_obs = step.final_obs if step.final_obs is not None else step.obs
    final_avail = step.final_avail if step.final_obs is not None else step.avail
    stages.buffer.add(obs, avail, state, actions, step.rewards, step.terminated, step.truncated, active,
                      final_obs, final_avail, step.final_state)
    stages.collector.env_steps += n
    ended = to_numpy(step.terminated).astype(bool) | to_numpy(step.truncated).astype(bool)
    return np.where(ended[:, None], 1.0, to_numpy(step.active).astype(np.float32)).astype(np.float32)


def gradient_step(stages: Any, progress: float) -> Any:
    """One gradient step (HARL's ``train``); harl's updater takes ``updates_per_round`` of them per call."""
    updater = stages.updater
    rounds = updater.updates_per_round
    updater.updates_per_round = 1
    try:
        return updater.update(stages.buffer, progress=progress)
    finally:
        updater.updates_per_round = rounds
