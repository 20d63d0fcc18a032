"""PQN's rollout buffer: the last ``memory_window + T`` vector steps of every env, no replay.

::

    buffer.start(PQNStart(x, masks, hidden, starts))   # the envs' first inputs (or carry_in)
    for t in range(T):
        buffer.insert(PQNStep(actions, q_max, rewards, dones, x, masks, hidden, starts))
    buffer.finish(q_max)                               # max Q of the observation after the last step
    returns.compute(buffer) -> buffer.set_targets(...) # feed-forward: the lambda-returns
    buffer.roll_over()                                 # keep the last memory_window steps

Rows are indexed by step ``0 .. L`` with ``L = memory_window + T``: a step's inputs (the network's
input ``x``, the action masks, the GRU state before it, whether it starts an episode, and the
per-agent max Q the acting network gave it) at ``t``, what the envs answered at ``t`` too, and the
observation after the last step at ``L``.  ``memory_window`` (JaxMARL's MEMORY_WINDOW,
``pqn_vdn_rnn.py:319-324``) keeps that many steps of the previous rollout in front of the new one,
so a recurrent update's sequences start in the middle of an episode with a stored GRU state;
``valid`` is the first row that holds a real step (``memory_window`` until the window has filled).
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

from harl.registry import register
from harl.settings import in_range, kind_field, setting


@attrs.frozen
class PQNBufferConfig:
    """``[buffer] kind = "pqn"``: the last rollout of every env (and a memory window before it)."""

    kind: str = kind_field("pqn")
    memory_window: int = setting(
        0, "steps of the previous rollout kept in front of each new one, trained on again (JaxMARL's "
        "MEMORY_WINDOW: 0 for its feed-forward PQN, 4 for its recurrent one)", in_range(0, None))


@attrs.frozen
class PQNStart:
    """The envs' inputs before a rollout's first step."""

    x: torch.Tensor
    """``(E, A, D)`` the network's input."""
    masks: torch.Tensor
    """``(E, A, K)`` 1 where an action is available."""
    hidden: torch.Tensor | None
    """``(E, A, H)`` the GRU state before the step (None: feed-forward)."""
    starts: torch.Tensor
    """``(E,)`` 1 where the step begins an episode."""


@attrs.frozen
class PQNStep:
    """One vector step: what was chosen and what the envs answered (with the next step's inputs)."""

    actions: torch.Tensor
    """``(E, A)`` long."""
    q_max: torch.Tensor
    """``(E, A)`` each agent's max available Q at this step's input, from the acting network."""
    rewards: torch.Tensor
    """``(E, A)``."""
    dones: torch.Tensor
    """``(E,)`` 1 where the episode ended at this step (terminated or truncated, as JaxMARL's done)."""
    next: PQNStart
    """The inputs after the step (an ended episode's next: the new episode's first)."""


class PQNBuffer:
    """See the module docstring."""

    def __init__(self, config: PQNBufferConfig, n_envs: int, length: int, n_agents: int, in_dim: int,
                 n_actions: int, hidden_size: int, device: torch.device) -> None:
        self.window = config.memory_window
        self.length = length
        """T: the steps one rollout adds."""
        self.n_envs = n_envs
        L, E, A = self.window + length, n_envs, n_agents
        self.rows = L
        self.x = torch.zeros(L + 1, E, A, in_dim, device=device)
        self.masks = torch.ones(L + 1, E, A, n_actions, device=device)
        self.hidden = torch.zeros(L + 1, E, A, hidden_size, device=device) if hidden_size else None
        self.starts = torch.zeros(L + 1, E, device=device)
        self.q_max = torch.zeros(L + 1, E, A, device=device)
        self.actions = torch.zeros(L, E, A, dtype=torch.long, device=device)
        self.rewards = torch.zeros(L, E, A, device=device)
        self.dones = torch.zeros(L, E, device=device)
        self.targets: torch.Tensor | None = None
        """``(L - valid, E, M)`` the lambda-returns of the stored steps (set by the returns stage)."""
        self.valid = self.window
        self.cursor = self.window

    # ------------------------------------------------------------------ writing

    def _put(self, t: int, s: PQNStart) -> None:
        self.x[t] = s.x
        self.masks[t] = s.masks
        self.starts[t] = s.starts
        if self.hidden is not None and s.hidden is not None:
            self.hidden[t] = s.hidden

    def start(self, first: PQNStart) -> None:
        """The envs began (a reset): their inputs are the first step's; no memory yet."""
        self.valid = self.cursor = self.window
        self._put(self.cursor, first)

    def inputs(self) -> PQNStart:
        """The current step's inputs."""
        t = self.cursor
        return PQNStart(self.x[t], self.masks[t], None if self.hidden is None else self.hidden[t], self.starts[t])

    def insert(self, step: PQNStep) -> None:
        t = self.cursor
        self.actions[t] = step.actions
        self.q_max[t] = step.q_max
        self.rewards[t] = step.rewards
        self.dones[t] = step.dones
        self.cursor = t + 1
        self._put(t + 1, step.next)

    def finish(self, q_max: torch.Tensor) -> None:
        """The max Q of the observation after the rollout's last step (the bootstrap)."""
        assert self.cursor == self.rows, f"finish() after {self.cursor - self.window} of {self.length} steps"
        self.q_max[self.rows] = q_max

    def set_targets(self, targets: torch.Tensor) -> None:
        self.targets = targets

    # ------------------------------------------------------------------ the next rollout

    def _kept(self) -> dict[str, Any]:
        """What the next rollout starts from: the last ``window`` steps and the observation after them."""
        T = self.length
        kept: dict[str, Any] = {name: getattr(self, name)[T:].clone() for name in ("x", "masks", "starts", "q_max")}
        kept.update({name: getattr(self, name)[T:].clone() for name in ("actions", "rewards", "dones")})
        kept["hidden"] = None if self.hidden is None else self.hidden[T:].clone()
        kept["valid"] = max(0, self.valid - T)
        return kept

    def carry_in(self, kept: dict[str, Any]) -> None:
        """Begin the next rollout from ``kept`` (``roll_over``, or a checkpoint's ``carried``)."""
        for name in ("x", "masks", "starts", "q_max", "actions", "rewards", "dones"):
            value = kept[name]
            getattr(self, name)[:len(value)] = torch.as_tensor(value).to(getattr(self, name).device)
        if self.hidden is not None and kept["hidden"] is not None:
            self.hidden[:len(kept["hidden"])] = torch.as_tensor(kept["hidden"]).to(self.hidden.device)
        self.valid = int(kept["valid"])
        self.cursor = self.window
        self.targets = None

    def roll_over(self) -> None:
        """A rollout begins where the last one ended, its last ``memory_window`` steps kept in front."""
        self.carry_in(self._kept())

    def carried(self) -> dict[str, Any]:
        """What a checkpoint needs to go on exactly (the next rollout's start), on the CPU."""
        return {k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in self._kept().items()}


def _build(config: PQNBufferConfig, parts: Any) -> PQNBuffer:
    policy = parts.policy
    return PQNBuffer(config, parts.wiring.n_envs, parts.wiring.rollout_length, parts.n_agents, policy.in_dim,
                     policy.n_actions, policy.hidden_size, parts.device)


register("buffer", PQNBufferConfig, _build, family="pqn")
