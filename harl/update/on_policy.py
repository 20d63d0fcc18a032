"""The on-policy Updater: agents' actors (sequential or simultaneous), then the critic.

A critic learner with ``interleaved`` set (``[critic] interleave``, EPyMARL's ppo_learner) turns
the update into rounds, one per objective epoch: a critic step that returns the round's
advantages (returns minus its values before the step), then one pass of every actor on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import torch

from harl import registry
from harl.buffers.rollout import AgentBatch, RolloutBuffer
from harl.errors import ConfigError
from harl.update.batched import BatchedSimultaneous
from harl.update.common import AgentStats, agent_order, lr_scale, set_lr
from harl.update.fused import CompileSwitch
from harl.update.sequential import PolicyLearner, SequentialConfig, sequential_update
from harl.update.simultaneous import SimultaneousConfig, merge_batches, simultaneous_update
from harl.update.v_critic import CriticStats, VCriticLearner

UpdaterConfig = SequentialConfig | SimultaneousConfig


@attrs.frozen
class UpdateStats:
    agents: list[AgentStats]
    critic: CriticStats
    order: list[int]
    lr_scale: float

    def row(self) -> dict[str, Any]:
        """The metrics.csv columns of this update (per-agent columns as agent<i>_<name>)."""
        out: dict[str, Any] = {"value_loss": self.critic.value_loss,
                               "critic_grad_norm": self.critic.grad_norm,
                               "lr_scale": self.lr_scale, "agent_order": "-".join(map(str, self.order))}
        for i, agent in enumerate(self.agents):
            out.update({f"agent{i}_{k}": v for k, v in attrs.asdict(agent).items()})
        return out


class OnPolicyUpdater:
    """Updates the actors (HA-sequential or MA-simultaneous), then fits the critic.

    ``learners`` holds one learner per agent, or a single one when the actor is shared
    (then the agents' samples are stacked, as MAPPO with shared parameters does).
    """

    def __init__(self, config: UpdaterConfig, learners: Sequence[PolicyLearner],
                 critic_learner: VCriticLearner, n_agents: int, generator: torch.Generator,
                 batch_agents: bool = False) -> None:
        """``batch_agents``: ``[policy] batch_agents``, the MA update's stackable agents in batched
        steps (``harl.update.batched``); the HA update stays one agent after another."""
        self.config = config
        self.sequential = isinstance(config, SequentialConfig)
        if self.sequential and len(learners) != n_agents:
            raise ConfigError(
                'updater.kind: "sequential" updates agents one after another, which needs one '
                "actor per agent; set policy.share_parameters = false (or updater.kind = "
                '"simultaneous")'
            )
        self.learners = list(learners)
        self.critic_learner = critic_learner
        self.n_agents = n_agents
        self.generator = generator
        self.batched = (BatchedSimultaneous(self.learners)
                        if batch_agents and not self.sequential and len(self.learners) > 1 else None)
        self.fused = CompileSwitch(getattr(config, "compile", "off"), [*self.learners, critic_learner])
        """``[updater] compile``: which learners take the fused minibatch step (``harl.update.fused``), and when."""

    def update(self, buffer: RolloutBuffer, progress: float) -> UpdateStats:
        started = self.fused.start()
        stats = self._update(buffer, progress)
        self.fused.finish(started, (buffer.length, buffer.n_envs, self.n_agents))
        return stats

    def _update(self, buffer: RolloutBuffer, progress: float) -> UpdateStats:
        scale = lr_scale(self.config, progress)
        set_lr([*self.learners, self.critic_learner], scale)
        batches = [buffer.agent_batch(i) for i in range(self.n_agents)]
        order = agent_order(self.config, self.n_agents, self.generator)
        if getattr(self.critic_learner, "interleaved", False):
            agents, critic_stats = self._interleaved(buffer, batches)
            return UpdateStats(agents, critic_stats, order, scale)
        if self.sequential:
            stats = sequential_update(self.learners, batches, order)
            agents = [stats[i] for i in range(self.n_agents)]
        elif len(self.learners) == 1 and self.n_agents > 1:
            shared = simultaneous_update(self.learners, [merge_batches(batches)])[0]
            agents = [shared] * self.n_agents
        else:
            stats = (simultaneous_update(self.learners, batches) if self.batched is None or self.fused.active
                     else self.batched.update(batches))  # the fused steps are per learner
            agents = [stats[i] for i in range(self.n_agents)]
        critic_stats = self.critic_learner.update(*buffer.critic_batch())
        return UpdateStats(agents, critic_stats, order, scale)

    def _interleaved(self, buffer: RolloutBuffer, batches: list[AgentBatch]) -> tuple[list[AgentStats], CriticStats]:
        """The objective's epochs as rounds: a critic step, then one pass of each actor on that
        step's advantages (unstandardised; the buffer's own advantages are not used)."""
        learner: Any = self.critic_learner
        states, _, returns, _, _ = buffer.critic_batch()
        rounds = self.learners[0].config.epochs  # type: ignore[attr-defined]
        per_round: list[list[AgentStats]] = []
        for _ in range(rounds):
            advantages = learner.advantage_step(states, returns).reshape(buffer.length, buffer.n_envs, -1)
            mine = [attrs.evolve(b, advantages=buffer.agent_rows(advantages[..., i]).reshape(-1, 1))
                    for i, b in enumerate(batches)]
            if len(self.learners) == 1 and self.n_agents > 1:
                merged = merge_batches(mine)
                shared = self.learners[0].update(merged, torch.ones_like(merged.active), epochs=1)  # type: ignore[call-arg]
                per_round.append([shared] * self.n_agents)
            else:
                per_round.append([learner_i.update(b, torch.ones_like(b.active), epochs=1)  # type: ignore[call-arg]
                                  for learner_i, b in zip(self.learners, mine)])
        agents = [AgentStats(*(sum(getattr(r[i], f.name) for r in per_round) / rounds
                               for f in attrs.fields(AgentStats)))
                  for i in range(self.n_agents)]
        return agents, learner.end_update()

    def state_dict(self) -> dict[str, Any]:
        return {
            "actor_optimizers": [None if learner.optimizer is None else learner.optimizer.state_dict()  # type: ignore[attr-defined]
                                 for learner in self.learners],
            "critic_optimizer": self.critic_learner.optimizer.state_dict(),
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for learner, opt in zip(self.learners, state["actor_optimizers"]):
            if learner.optimizer is not None and opt is not None:  # type: ignore[attr-defined]
                learner.optimizer.load_state_dict(opt)  # type: ignore[attr-defined]
        self.critic_learner.optimizer.load_state_dict(state["critic_optimizer"])
        self.generator.set_state(state["generator"])


def build_on_policy_updater(config: UpdaterConfig, learners: list[Any], critic_learner: VCriticLearner,
                            parts: Any) -> Any:
    """The on-policy family's updater, from the composition root's parts; an updater kind registered
    with a ``build`` of its own (``harl.update.joint``) builds itself."""
    build = registry.entry_of(config).extra("build")
    if build is not None:
        return build(config, learners, critic_learner, parts)
    return OnPolicyUpdater(config, learners, critic_learner, parts.n_agents, parts.generator,
                           batch_agents=getattr(parts.policy_config, "batch_agents", False))

