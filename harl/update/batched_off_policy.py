"""The off-policy updater's per-agent calls with agents as a batch dimension (``[policy] batch_agents``).

Agents whose learners are of one kind with the same settings (DDPG/TD3's, or SAC's) and whose
actors stack (``harl.policy.off_policy_stack``) are grouped, and each group takes:

- the critic target's next actions in one call: the target actors' (TD3's smoothing noise
  drawn as one block) or, for SAC, samples of the current actors and their entropy terms;
- the MA simultaneous actor step (MADDPG, MATD3, MASAC) in one forward and one backward pass:
  every agent's loss reads the critic before any actor changes and the others' actions as
  constants, so the sum of the losses gives each agent its own gradient.  One pass of the
  stacked actors, one pass of the critic's first network (or twins) over all the agents' joint
  actions (``agent_values``), then each agent's own gradient clip and Adam step, and SAC's
  temperature steps, from each learner's own methods;
- the target actors' polyak averaging as one ``_foreach_lerp_`` (elementwise: the same numbers).

The HA sequential actor round stays one agent after another: each agent's loss reads its
predecessors' new actions.  D3QN's learners, and agents whose actors do not stack, take the
per-agent calls.  Each call agrees with the per-agent loop to float rounding, given the same
inputs and noise (``tests/update/test_batched_off_policy.py``); the noise is drawn as one
block per group, so a run's numbers part from the loop's while one seed repeats itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from harl.buffers.replay import ReplayBatch
from harl.nets.heads import add_up
from harl.policy.off_policy_stack import OffPolicyStack, group_off_policy
from harl.update.common import clip_grads, learner_groups, polyak_update
from harl.update.objectives.ddpg import DeterministicLearner
from harl.update.objectives.sac import SACLearner
from harl.update.q_critic import agent_values


def _key(learner: Any) -> Any:
    """What a group's learners share (None: this learner is updated alone)."""
    if isinstance(learner, DeterministicLearner):
        return ("deterministic", learner.config, learner.smoothing)
    if isinstance(learner, SACLearner):
        return ("sac", learner.config, learner.critic_temp is None)
    return None


def _rows(tensors: Sequence[torch.Tensor | None], agents: Sequence[int]) -> Any:
    """The agents' rows stacked on a leading axis (None where they have none: no masks)."""
    picked = [tensors[i] for i in agents]
    return None if picked[0] is None else torch.stack(picked)  # type: ignore[arg-type]


class BatchedOffPolicy:
    """``next_action``, the simultaneous actor round and ``soft_update`` of ``learners`` (one per
    agent), stackable agents grouped."""

    def __init__(self, learners: Sequence[Any]) -> None:
        self.learners = list(learners)
        self.groups = learner_groups(group_off_policy([getattr(learner, "actor", None) for learner in self.learners]),
                                     self.learners, _key)
        several = [g for g in self.groups if len(g) > 1]
        self.stacks = {g[0]: OffPolicyStack([self.learners[i].actor for i in g]) for g in several}
        """First agent of a group -> its actors' stack."""
        self.targets = {g[0]: OffPolicyStack([self.learners[i].target for i in g]) for g in several
                        if isinstance(self.learners[g[0]], DeterministicLearner)}
        """First agent of a DDPG/TD3 group -> its target actors' stack."""
        self.polyak = {g[0]: (nn.ModuleList([self.learners[i].target for i in g]),
                              nn.ModuleList([self.learners[i].actor for i in g])) for g in several
                       if g[0] in self.targets}
        """First agent of a DDPG/TD3 group -> (its target actors, its actors) for one polyak step."""

    @torch.no_grad()
    def next_actions(self, batch: ReplayBatch) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Every learner's ``next_action``, a group's in one call."""
        out: list[tuple[torch.Tensor, torch.Tensor | None]] = [(torch.empty(0), None)] * len(self.learners)
        for group in self.groups:
            first = self.learners[group[0]]
            if len(group) == 1:
                out[group[0]] = first.next_action(batch)
                continue
            obs = _rows(batch.next_obs, group)
            if isinstance(first, DeterministicLearner):
                stack = self.targets[group[0]]
                actions = first.smoothed(stack.outputs(stack.params(), obs))
                for g, i in enumerate(group):
                    out[i] = (actions[g], None)
                continue
            stack = self.stacks[group[0]]
            actions, log_probs = first.actor.sample(stack.outputs(stack.params(), obs, _rows(batch.next_avail, group)))
            for g, i in enumerate(group):
                out[i] = (actions[g], self.learners[i].penalty(log_probs[g]))
        return out

    def actor_round(self, batch: ReplayBatch, replayed: Sequence[torch.Tensor] | None
                    ) -> dict[int, dict[str, torch.Tensor]]:
        """The MA simultaneous round (``harl.update.off_policy.actor_round`` with ``sequential`` off):
        every agent's step against the same critic; the others act ``replayed`` when given, else
        as the current policies."""
        n = len(self.learners)
        actions: list[torch.Tensor] = list(replayed) if replayed is not None else [torch.empty(0)] * n
        fresh: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        for group in self.groups:
            first = self.learners[group[0]]
            if len(group) == 1:
                current = first.initial_action(batch)  # its forward pass, kept for its own loss
                if replayed is None:
                    actions[group[0]] = current
                continue
            action, log_prob, current = self._fresh(group, batch, replayed is None)
            for g, i in enumerate(group):
                fresh[i] = (action[g], None if log_prob is None else log_prob[g])
                if current is not None:
                    actions[i] = current[g]
        stats: dict[int, dict[str, torch.Tensor]] = {}
        for group in self.groups:
            if len(group) == 1:
                stats[group[0]] = self.learners[group[0]].update(batch, list(actions))
            else:
                stats.update(self._step(group, batch, actions, fresh))
        return dict(sorted(stats.items()))

    def _fresh(self, group: Sequence[int], batch: ReplayBatch, current: bool
               ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """The group's fresh actions with their graph ``(G, B, k)``, their log-probs ``(G, B)`` (SAC;
        else None) and, when ``current``, the actions the other agents see (no graph)."""
        first, stack = self.learners[group[0]], self.stacks[group[0]]
        out = stack.outputs(stack.params(grad=True), _rows(batch.obs, group), _rows(batch.avail, group))
        if not isinstance(first, SACLearner):
            return out, None, out.detach() if current else None
        others = None
        if current:  # as initial_action: a sample of the current policies, drawn before the fresh ones
            with torch.no_grad():
                others = first.actor.sample(out)[0]
        action, log_prob = first.actor.sample(out)
        return action, log_prob, others

    def _step(self, group: Sequence[int], batch: ReplayBatch, actions: Sequence[torch.Tensor],
              fresh: dict[int, tuple[torch.Tensor, torch.Tensor | None]]) -> dict[int, dict[str, torch.Tensor]]:
        """One actor step of each agent of ``group``: one critic pass, one backward pass, then each
        agent's own clip, Adam step and ``after_step``."""
        learners = [self.learners[i] for i in group]
        joints = []
        for i in group:
            joint = list(actions)
            joint[i] = fresh[i][0]
            joints.append(joint)
        q = agent_values(learners[0].critic, batch, joints, group, learners[0].reduce)
        losses = [learner.actor_loss(q[g], fresh[i][1], batch) for g, (i, learner) in enumerate(zip(group, learners))]
        for learner in learners:
            learner.optimizer.zero_grad(set_to_none=True)
        add_up(losses).backward()
        stats = {}
        for i, learner, loss in zip(group, learners, losses):
            if learner.config.max_grad_norm > 0:
                clip_grads(learner.actor.parameters(), learner.config.max_grad_norm)
            learner.optimizer.step()
            stats[i] = learner.after_step(loss, fresh[i][1], batch)
        return stats

    def soft_update(self) -> None:
        """Every learner's ``soft_update``; a DDPG/TD3 group's target actors in one step."""
        for group in self.groups:
            pair = self.polyak.get(group[0])
            if pair is None:
                for i in group:
                    self.learners[i].soft_update()
            else:
                polyak_update(pair[0], pair[1], self.learners[group[0]].config.polyak)
