"""The value family's update: one joint TD loss over batches of whole episodes (IQL, VDN, QMIX).

One gradient step (``JointTD.update``), as EPyMARL's ``QLearner.train``::

    Q      = agents(episodes from their first step)                       (B, T+1, A, n)
    Q_a    = Q[:, :-1] at the actions taken                               (B, T, A)
    a*     = argmax over available actions of Q[:, 1:] (double Q), else of Q'
    next   = mixer'(Q'[:, 1:] at a*, s_{t+1})                              (B, T, K)
    y      = returns.targets(r, d, filled, next)                          1-step, n-step or TD(lambda)
    loss   = sum(filled * (mixer(Q_a, s_t) - y)^2) / sum(filled)          K = 1 (VDN, QMIX) or A (IQL)

then the gradient norm is clipped and Adam (or RMSprop) steps.  The target networks (the
agents' and the mixer's) are copied every ``target_update_interval`` gradient steps, or
moved by ``polyak`` after every one when the interval is 0.  With ``[returns] reward_norm`` (the
default) rewards are standardised by a running mean and variance of the real steps' rewards
(EPyMARL's ``standardise_rewards``; EPyMARL's own statistics also count the padding's zeros).

The updater (``QUpdater``) decides how many gradient steps are taken and when:
``updates_per_episode`` for each episode the buffer receives once it can sample
``batch_size``.  ``update_timing = "per_episode"`` (the default) takes them inside collection, as
EPyMARL's run loop does: after each vector step at which episodes end (the episode
collector's ``hook``), the episodes that ended there earn their steps if the buffer can
sample once they are in, and the steps are taken before the next action (EPyMARL inserts
each ``runner.run()`` batch, then takes one step if ``buffer.can_sample``: its episode
runner is ``n_envs = 1``, ``updates_per_episode = 1``; its parallel runner's
``batch_size_run = B`` is ``n_envs = B``, ``updates_per_episode = 1 / B`` where the B
episodes end together).  ``update`` then reports them at the iteration's end.
``update_timing = "per_iteration"`` queues the steps to the end of each collection iteration
(harl before issue 47): the episodes received since the buffer first held ``batch_size``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import attrs
import torch
from torch import nn

from harl.buffers.episodes import EpisodeBatch, EpisodeBuffer
from harl.policy.agent_q import MASKED_Q, AgentQNetworks, greedy
from harl.registry import register
from harl.returns.episode_td import EpisodeTD
from harl.returns.running_stats import RunningMeanStd
from harl.settings import in_range, kind_field, one_of, positive, setting

UPDATE_TIMINGS = ("per_episode", "per_iteration")


@attrs.frozen
class JointTDConfig:
    """``[updater.objective] kind = "joint_td"``: one TD loss through the mixer, and its optimiser (the agents'
    Q networks are set in ``[policy]``, as every family's acting networks are)."""

    kind: str = kind_field("joint_td")
    lr: float = setting(5e-4, "learning rate (EPyMARL: 5e-4; its IQL 3e-4)", positive())
    optimizer: str = setting("adam", "adam (EPyMARL's QLearner), rmsprop (PyMARL's, with optim_alpha and optim_eps) "
                             "or radam (JaxMARL's QLearning: optax.radam)", one_of(("adam", "rmsprop", "radam")))
    optim_alpha: float = setting(0.99, "RMSprop's smoothing constant", in_range(0, 1, high_open=True))
    optim_eps: float = setting(1e-5, "RMSprop's epsilon (Adam keeps torch's 1e-8)", positive())
    max_grad_norm: float = setting(10.0, "clip the gradient's L2 norm to this (EPyMARL's grad_norm_clip)", positive())
    double_q: bool = setting(True, "the online agents pick the next action, the target agents value it")
    reward_scale: float = setting(1.0, "the team reward is multiplied by this before anything else (JaxMARL's "
                                  "REW_SCALE: 10 on SMAX, with [returns] reward_norm = false)", positive())


@attrs.frozen
class QUpdaterConfig:
    """``[updater] kind = "q_learning"``: when the joint TD loss steps and when the target networks follow."""

    kind: str = kind_field("q_learning")
    updates_per_episode: float = setting(
        1.0, "gradient steps per episode collected once the buffer holds batch_size episodes (EPyMARL: 1)",
        in_range(0, None, low_open=True))
    update_timing: str = setting(
        "per_episode", "per_episode: the gradient steps follow the episodes that earn them inside collection, "
        "before the next action (EPyMARL's run loop); per_iteration: queued to the end of each collection "
        "iteration (harl before issue 47)", one_of(UPDATE_TIMINGS))
    target_update_interval: int = setting(
        200, "copy the online networks into the target networks every this many gradient steps (EPyMARL's "
        "target_update_interval_or_tau = 200); 0: soft updates by polyak after every step", in_range(0, None))
    polyak: float = setting(0.01, "soft target update rate when target_update_interval = 0: target <- (1 - polyak) "
                            "target + polyak online (EPyMARL's target_update_interval_or_tau below 1)",
                            in_range(0, 1, low_open=True))
    objective: Any = setting(factory=JointTDConfig, doc="the agents' networks and the loss ([updater.objective])")


LOSS_STATS = ("loss", "td_error_abs", "q_taken_mean", "target_mean", "grad_norm")


def previous_actions(actions: torch.Tensor) -> torch.Tensor:
    """``(B, T, A)`` actions -> ``(B, T + 1, A)`` each step's previous action (-1 at the first step)."""
    first = torch.full_like(actions[:, :1], -1)
    return torch.cat([first, actions], 1)


def next_action_values(online: torch.Tensor, target: torch.Tensor, masks: torch.Tensor,
                       double_q: bool) -> torch.Tensor:
    """Each agent's value of its next step, ``(..., A)`` from ``(..., A, n)`` Qs: the target network's Q of
    the online network's best available action (double Q), or the target's best available Q."""
    masked = target.masked_fill(masks == 0, MASKED_Q)
    if double_q:
        return masked.gather(-1, greedy(online, masks).unsqueeze(-1)).squeeze(-1)
    return masked.max(-1).values


class JointTD:
    """The loss and its optimiser; the online and target agents and mixers (see the module docstring)."""

    def __init__(self, config: JointTDConfig, policy: AgentQNetworks, mixer: nn.Module, returns: EpisodeTD) -> None:
        self.config = config
        self.policy = policy
        self.mixer = mixer
        self.returns = returns
        self.target_policy = copy.deepcopy(policy)
        self.target_mixer = copy.deepcopy(mixer)
        for p in (*self.target_policy.parameters(), *self.target_mixer.parameters()):
            p.requires_grad_(False)
        self.params = [*policy.parameters(), *mixer.parameters()]
        if config.optimizer == "rmsprop":
            self.optimizer: torch.optim.Optimizer = torch.optim.RMSprop(
                self.params, lr=config.lr, alpha=config.optim_alpha, eps=config.optim_eps)
        elif config.optimizer == "radam":
            self.optimizer = torch.optim.RAdam(self.params, lr=config.lr)
        else:
            self.optimizer = torch.optim.Adam(self.params, lr=config.lr)
        self.base_lr = config.lr
        device = next(iter(self.params)).device
        self.reward_stats = RunningMeanStd((), device)

    def q_values(self, policy: AgentQNetworks, batch: EpisodeBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """(Q (B, T+1, A, n) of ``policy`` over the batch's episodes, available actions (B, T+1, A, n))."""
        B, T1 = batch.state.shape[:2]
        device = batch.state.device
        obs = policy.stack_obs([o.float() for o in batch.obs])
        masks = policy.stack_avail(batch.avail, (B, T1), device)
        rows = batch.filled.sum(1) + 1  # an episode's real steps and the one after (its bootstrap); the
        # padding's Q (0 from a GRU policy) never reaches the loss, which masks it out
        return policy.unroll(policy.inputs(obs, previous_actions(batch.actions)), rows), masks

    def loss(self, batch: EpisodeBatch, update_stats: bool = True) -> tuple[torch.Tensor, dict[str, float]]:
        """The masked mean squared TD error of ``batch`` and its statistics (``update_stats``: fold the batch's
        rewards into the running reward statistics first, as a gradient step does)."""
        c = self.config
        q, masks = self.q_values(self.policy, batch)
        chosen = q[:, :-1].gather(-1, batch.actions.unsqueeze(-1)).squeeze(-1)   # (B, T, A)
        state = batch.state.float()
        filled = batch.filled
        with torch.no_grad():
            target_q, _ = self.q_values(self.target_policy, batch)
            next_q = next_action_values(q.detach()[:, 1:], target_q[:, 1:], masks[:, 1:], c.double_q)
            next_total = self.target_mixer(next_q, state[:, 1:])                  # (B, T, K)
            rewards = batch.rewards * c.reward_scale if c.reward_scale != 1.0 else batch.rewards
            if self.returns.config.reward_norm:
                if update_stats:
                    self.reward_stats.update(rewards[filled])
                rewards = self.reward_stats.standardise(rewards)
            targets = self.returns.targets(rewards, batch.terminated, filled, next_total)
        total = self.mixer(chosen, state[:, :-1])                                   # (B, T, K)
        mask = filled.unsqueeze(-1).expand_as(total).to(total.dtype)
        td = (total - targets) * mask
        count = mask.sum().clamp(min=1.0)
        loss = td.square().sum() / count
        stats = {"td_error_abs": float(td.detach().abs().sum() / count),
                 "q_taken_mean": float((total.detach() * mask).sum() / count),
                 "target_mean": float((targets * mask).sum() / count)}
        return loss, stats

    def update(self, batch: EpisodeBatch) -> dict[str, float]:
        """One gradient step on ``batch``; its statistics."""
        loss, stats = self.loss(batch)
        self.optimizer.zero_grad()
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.params, self.config.max_grad_norm)
        self.optimizer.step()
        return {"loss": float(loss.detach()), **stats, "grad_norm": float(grad_norm)}

    def sync_targets(self, tau: float | None) -> None:
        """Copy the online networks into the targets (``tau`` None), or move them by ``tau`` (``polyak``)."""
        with torch.no_grad():
            for online, target in ((self.policy, self.target_policy), (self.mixer, self.target_mixer)):
                if tau is None:
                    target.load_state_dict(online.state_dict())
                    continue
                for p, t in zip(online.parameters(), target.parameters()):
                    t.mul_(1.0 - tau).add_(p, alpha=tau)

    def state_dict(self) -> dict[str, Any]:
        return {"target_policy": self.target_policy.state_dict(), "target_mixer": self.target_mixer.state_dict(),
                "optimizer": self.optimizer.state_dict(), "reward_stats": self.reward_stats.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.target_policy.load_state_dict(state["target_policy"])
        self.target_mixer.load_state_dict(state["target_mixer"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.reward_stats.load_state_dict(state["reward_stats"])


@attrs.frozen
class QUpdateStats:
    """One iteration's gradient steps: how many, and the means of their statistics (None: none ran)."""

    updates: int
    stats: dict[str, float | None]

    def row(self) -> dict[str, Any]:
        return {"updates": self.updates, **self.stats}


class QUpdater:
    """How many joint TD steps are taken and when, and when the targets follow (see the module docstring).

    With ``update_timing = "per_episode"`` it is the episode collector's ``hook``: ``after_episodes`` takes
    the steps, ``update`` reports them once per iteration, ``abandon`` undoes an iteration that failed
    inside collection (the networks, optimiser, targets, reward statistics, counters and generator
    as the iteration began).
    """

    def __init__(self, config: QUpdaterConfig, objective: JointTD, batch_size: int,
                 generator: torch.Generator) -> None:
        self.config = config
        self.objective = objective
        self.batch_size = batch_size
        self.generator = generator
        self.updates = 0
        """Gradient steps since the run began."""
        self.since_sync = 0
        self.credit = 0.0
        """Gradient steps owed (a fraction of one carries over)."""
        self.seen = 0
        """Episodes the buffer had received when last counted."""
        self._pending_steps = 0
        self._pending: dict[str, float] = dict.fromkeys(LOSS_STATS, 0.0)
        self._began = (self.credit, self.seen)
        """(credit, seen) as this iteration began (``abandon`` puts them back)."""
        self._snapshot: dict[str, Any] | None = None
        """The learning state before this iteration's first gradient step (``per_episode``)."""

    def _take(self, buffer: EpisodeBuffer, steps: int, sums: dict[str, float]) -> None:
        """``steps`` gradient steps, their statistics added to ``sums``, the targets following."""
        for _ in range(steps):
            batch = buffer.sample(self.batch_size, self.generator)
            for key, value in self.objective.update(batch).items():
                sums[key] += value
            self.updates += 1
            self.since_sync += 1
            if self.config.target_update_interval == 0:
                self.objective.sync_targets(self.config.polyak)
            elif self.since_sync >= self.config.target_update_interval:
                self.objective.sync_targets(None)
                self.since_sync = 0

    def after_episodes(self, buffer: EpisodeBuffer, ended: int) -> None:
        """``ended`` episodes went into ``buffer`` at the vector step just taken: if it can sample now,
        they earn ``updates_per_episode`` steps each, taken here (``update_timing = "per_episode"``)."""
        self.seen = buffer.episodes_added
        if ended <= 0 or buffer.size < self.batch_size:
            return
        self.credit += ended * self.config.updates_per_episode
        steps = int(self.credit + 1e-9)  # 8 x 1/8 is one step, whatever the rounding
        self.credit = max(0.0, self.credit - steps)
        if steps == 0:
            return
        if self._snapshot is None:
            self._snapshot = self._learning_state()
        with torch.enable_grad():  # the collector acts under no_grad
            self._take(buffer, steps, self._pending)
        self._pending_steps += steps

    def abandon(self) -> None:
        """Collection failed or was interrupted inside an iteration: back to the state it began with."""
        began = self._began
        if self._snapshot is not None:
            saved = self._snapshot
            self.objective.policy.load_state_dict(saved["policy"])
            self.objective.mixer.load_state_dict(saved["mixer"])
            self.load_state_dict(saved["updater"])
        self.credit, self.seen = began
        self._end_iteration()

    def _learning_state(self) -> dict[str, Any]:
        return copy.deepcopy({"policy": self.objective.policy.state_dict(),
                              "mixer": self.objective.mixer.state_dict(), "updater": self.state_dict()})

    def _end_iteration(self) -> None:
        self._pending_steps, self._pending = 0, dict.fromkeys(LOSS_STATS, 0.0)
        self._snapshot = None
        self._began = (self.credit, self.seen)

    def update(self, buffer: EpisodeBuffer, progress: float) -> QUpdateStats:
        if self.config.update_timing == "per_episode":
            missing = buffer.episodes_added - self.seen
            if missing > 0:  # episodes no collector hook reported: their steps now
                self.after_episodes(buffer, missing)
            steps, sums = self._pending_steps, self._pending
        else:
            added = buffer.episodes_added
            eligible = added - max(self.seen, self.batch_size - 1)  # episodes since the buffer could first sample
            self.seen = added
            if eligible > 0:
                self.credit += eligible * self.config.updates_per_episode
            steps = int(self.credit)
            self.credit -= steps
            sums = dict.fromkeys(LOSS_STATS, 0.0)
            self._take(buffer, steps, sums)
        self._end_iteration()
        stats: dict[str, float | None] = {k: (v / steps if steps else None) for k, v in sums.items()}
        return QUpdateStats(steps, stats)

    def state_dict(self) -> dict[str, Any]:
        return {"objective": self.objective.state_dict(), "updates": self.updates, "since_sync": self.since_sync,
                "credit": self.credit, "seen": self.seen, "generator": self.generator.get_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.objective.load_state_dict(state["objective"])
        self.updates, self.since_sync = int(state["updates"]), int(state["since_sync"])
        self.credit, self.seen = float(state["credit"]), int(state["seen"])
        self.generator.set_state(state["generator"])
        self._end_iteration()


register("updater.objective", JointTDConfig, lambda config, parts: JointTD(config, parts.policy, parts.critic, parts.returns),
         family="value", requires={"critic": "mixer"})
register("updater", QUpdaterConfig, None, family="value")
