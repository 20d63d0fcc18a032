"""The off-policy Updater: ``updates_per_round`` gradient steps on replayed batches.

One gradient step::

    batch  = returns.sample(buffer, batch_size)         # n-step targets, per-sample discount
    critic <- TD step toward R_n + discount * (Q_target(s', a') - penalty)
    every policy_freq steps:
        actions = [agent.initial_action(batch) for each agent]          # no gradient
        simultaneous, others_actions = "replayed": actions = the batch's   (HARL's MA runner)
        for i in order:                         # sequential: random or fixed order
            agent i: one actor step on Q(s, actions with its own slot fresh)
            sequential:   actions[i] = agent i's *updated* action      (HA: later agents see it)
            simultaneous: actions stay as they were                    (MA: MADDPG, MATD3)
        polyak-update the target networks

The critic's weights are frozen during the actor round (``requires_grad_(False)``: the
actor losses' backward passes skip the critic's weight gradients).

With ``[policy] batch_agents`` the next actions, the simultaneous round and the target
actors' polyak step take stackable agents as one call (``harl.update.batched_off_policy``);
the sequential round stays one agent after another.

Iterations whose buffer holds at most ``warmup_steps`` transitions (the random warm-up)
do no gradient step; their stats row has empty cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import torch

from harl.buffers.replay import ReplayBatch, ReplayBuffer
from harl.errors import old_names
from harl.returns.n_step import NStepReturns
from harl.update.batched_off_policy import BatchedOffPolicy
from harl.update.common import agent_order, lr_scale, set_lr
from harl.update.q_critic import QCriticLearner
from harl.update.sequential import SequentialConfig
from harl.update.simultaneous import SimultaneousConfig


class OffPolicyLearner(Protocol):
    """One agent's learner: its objective (``ddpg``, ``td3``, ``sac``, ``d3qn``) as the updater drives it."""

    stat_names: tuple[str, ...]
    base_lr: float
    optimizer: torch.optim.Optimizer

    def next_action(self, batch: ReplayBatch) -> tuple[torch.Tensor, torch.Tensor | None]:
        """At the bootstrap observation: the critic-format action and an entropy penalty (B,) or None."""
        ...

    def initial_action(self, batch: ReplayBatch) -> torch.Tensor:
        """The agent's current action (no gradient) that the others' losses start from."""
        ...

    def update(self, batch: ReplayBatch, actions: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """One actor step; ``actions[j]`` is agent j's action as this agent must see it."""
        ...

    def updated_action(self, batch: ReplayBatch, actions: list[torch.Tensor]) -> torch.Tensor:
        """The agent's action after its update (what its successors see in a sequential round)."""
        ...

    def soft_update(self) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


if not TYPE_CHECKING:  # mypy does not see old names, so harl's own code cannot use one
    __getattr__ = old_names(__name__, {"OffPolicyAgent": ("OffPolicyLearner", OffPolicyLearner)})


def actor_round(learners: Sequence[OffPolicyLearner], batch: ReplayBatch, order: Sequence[int],
                sequential: bool, replayed: Sequence[torch.Tensor] | None = None) -> dict[int, dict[str, torch.Tensor]]:
    """Update every agent once, in ``order``; the others act ``replayed`` (critic format) when given."""
    actions = [learner.initial_action(batch) for learner in learners]
    if replayed is not None:
        actions = list(replayed)
    stats: dict[int, dict[str, torch.Tensor]] = {}
    for position, i in enumerate(order):
        stats[i] = learners[i].update(batch, list(actions))
        if sequential and position < len(order) - 1:  # the last agent's new action has no reader
            actions[i] = learners[i].updated_action(batch, actions)
    return stats


@attrs.frozen
class OffPolicyUpdateStats:
    updates: int
    """Gradient (critic) steps this iteration; 0 during warm-up."""
    critic: dict[str, float | None]
    agents: list[dict[str, float | None]]
    order: list[int]
    lr_scale: float

    def row(self) -> dict[str, Any]:
        out: dict[str, Any] = {"updates": self.updates, **self.critic, "lr_scale": self.lr_scale,
                               "agent_order": "-".join(map(str, self.order)) or None}
        for i, agent in enumerate(self.agents):
            out.update({f"agent{i}_{k}": v for k, v in agent.items()})
        return out


CRITIC_STATS = ("critic_loss", "q_mean", "target_mean")


class OffPolicyUpdater:
    """Critic TD steps and HA-sequential (or MA-simultaneous) actor rounds on replayed batches."""

    def __init__(self, config: SequentialConfig | SimultaneousConfig, learners: Sequence[OffPolicyLearner],
                 critic_learner: QCriticLearner, returns: NStepReturns, batch_size: int, updates_per_round: int,
                 warmup_steps: int, policy_freq: int, generator: torch.Generator, precision: str = "fp32",
                 batched: BatchedOffPolicy | None = None) -> None:
        self.config = config
        self.sequential = isinstance(config, SequentialConfig)
        self.learners = list(learners)
        self.critic_learner = critic_learner
        self.returns = returns
        self.batch_size = batch_size
        self.updates_per_round = updates_per_round
        self.warmup_steps = warmup_steps
        self.policy_freq = policy_freq
        self.generator = generator
        self.steps = 0
        """Critic steps since the start of the run (TD3's delayed updates count them)."""
        self.precision = precision
        """``[run] precision``: "bf16" runs each gradient step under bfloat16 autocast."""
        self.batched = batched
        """``[policy] batch_agents``: the per-agent calls with stackable agents grouped (None: the loop)."""

    def _empty(self, scale: float) -> OffPolicyUpdateStats:
        return OffPolicyUpdateStats(0, dict.fromkeys(CRITIC_STATS), [dict.fromkeys(a.stat_names) for a in self.learners],
                                    [], scale)

    def update(self, buffer: ReplayBuffer, progress: float, steps: int | None = None) -> OffPolicyUpdateStats:
        """``steps`` gradient steps (default ``updates_per_round``; HARL's runner ``train()`` takes one)."""
        scale = lr_scale(self.config, progress)
        if buffer.env_steps <= self.warmup_steps or buffer.size == 0:
            return self._empty(scale)
        set_lr([*self.learners, self.critic_learner], scale)
        critic_rows: list[torch.Tensor] = []
        agent_rows: list[list[torch.Tensor]] = [[] for _ in self.learners]
        device = next(self.critic_learner.critic.parameters()).device
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16"):
            order = self._gradient_steps(buffer, critic_rows, agent_rows, steps or self.updates_per_round)
        critic_means = torch.stack(critic_rows).mean(0).tolist()
        agents_stats = []
        for learner, rows in zip(self.learners, agent_rows):
            means = torch.stack(rows).mean(0).tolist() if rows else [None] * len(learner.stat_names)
            agents_stats.append(dict(zip(learner.stat_names, means)))
        return OffPolicyUpdateStats(len(critic_rows), dict(zip(CRITIC_STATS, critic_means)), agents_stats,
                                    order, scale)

    def _gradient_steps(self, buffer: ReplayBuffer, critic_rows: list[torch.Tensor],
                        agent_rows: list[list[torch.Tensor]], steps: int) -> list[int]:
        """``steps`` critic steps (and actor rounds every ``policy_freq``); the last order."""
        critic = self.critic_learner.critic
        order: list[int] = []
        for _ in range(steps):
            batch = self.returns.sample(buffer, self.batch_size, self.generator)
            if self.batched is not None:
                nexts = self.batched.next_actions(batch)
            else:
                nexts = [learner.next_action(batch) for learner in self.learners]
            penalties = [p for _, p in nexts if p is not None]
            penalty = None
            if penalties:  # their sum (B,), or (B, A) each agent's own for an independent critic
                own = getattr(self.critic_learner, "per_agent_penalty", False)
                penalty = torch.stack(penalties, -1) if own else torch.stack(penalties).sum(0)
            taken = critic.encode(batch.actions)
            stats = self.critic_learner.update(batch, taken, [a for a, _ in nexts], penalty)
            critic_rows.append(torch.stack([stats[k] for k in CRITIC_STATS]))
            self.steps += 1
            if self.steps % self.policy_freq:
                continue
            order = agent_order(self.config, len(self.learners), self.generator)
            critic.nets.requires_grad_(False)  # actor losses need no critic weight gradients
            try:
                replay = not self.sequential and self.config.others_actions == "replayed"  # type: ignore[union-attr]
                if self.batched is not None and not self.sequential:
                    rounds = self.batched.actor_round(batch, taken if replay else None)
                else:
                    rounds = actor_round(self.learners, batch, order, self.sequential, taken if replay else None)
            finally:
                critic.nets.requires_grad_(True)
            for i, learner in enumerate(self.learners):
                agent_rows[i].append(torch.stack([rounds[i][k].float() for k in learner.stat_names]))
                if self.batched is None:
                    learner.soft_update()
            if self.batched is not None:
                self.batched.soft_update()
            self.critic_learner.soft_update()
        return order

    def state_dict(self) -> dict[str, Any]:
        """The learners' and critic learner's state (checkpoint keys ``agents`` and ``critic``, as before)."""
        return {"agents": [learner.state_dict() for learner in self.learners], "critic": self.critic_learner.state_dict(),
                "generator": self.generator.get_state(), "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for learner, learner_state in zip(self.learners, state["agents"]):
            learner.load_state_dict(learner_state)
        self.critic_learner.load_state_dict(state["critic"])
        self.generator.set_state(state["generator"])
        self.steps = state["steps"]


def build_off_policy_updater(config: SequentialConfig | SimultaneousConfig, learners: list[Any],
                             critic_learner: QCriticLearner, parts: Any) -> OffPolicyUpdater:
    """The off-policy family's updater, from the composition root's parts."""
    w = parts.wiring
    batched = BatchedOffPolicy(learners) if parts.policy_config.batch_agents and len(learners) > 1 else None
    return OffPolicyUpdater(config, learners, critic_learner, parts.returns, w.batch_size, w.updates_per_round,
                            w.warmup_steps, w.policy_freq, parts.generator, w.precision, batched)

