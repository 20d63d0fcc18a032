"""The joint on-policy update: one loss over the whole team and its values, one optimiser (MAT).

``[updater] kind = "joint"``: where ``sequential`` and ``simultaneous`` update one actor per agent
and then fit the critic, this update hands the objective's learner the whole rollout as env steps
with every agent in a row (``TeamBatch``) and the critic's value loss, and the learner takes each
gradient step on ``policy loss - entropy_coef * entropy + value_loss_coef * value loss`` over
one network (the Multi-Agent Transformer, whose encoder's value head is the critic).  Built by the
on-policy family like its other updaters (``harl.update.on_policy.build_on_policy_updater`` asks
this kind's ``build``); its objective must provide ``joint_loss`` (``mat``, ``mat_dec``, ``sable``).
A learner with a ``team_batch(buffer, critic_learner)`` of its own (Sable's: env-major rollouts with
their retention states) reads the rollout itself; MAT's get ``team_batch`` below.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

from harl.buffers.rollout import RolloutBuffer
from harl.errors import ConfigError
from harl.policy.mat_orders import FIELD
from harl.registry import register
from harl.settings import kind_field, one_of, setting
from harl.update.common import lr_scale, set_lr
from harl.update.mat_values import TransformerValueLoss
from harl.update.objectives.mat import MATConfig, TeamBatch, TeamStats, TransformerLearner


@attrs.frozen
class JointConfig:
    """``[updater] kind = "joint"``: one loss over the whole team and its values, one optimiser (MAT, MAT-Dec)."""

    kind: str = kind_field("joint")
    lr_decay: str = setting("none", "learning-rate schedule over the run: none or linear (to 0), as MAT's "
                            "use_linear_lr_decay", one_of(("none", "linear")))
    objective: Any = setting(factory=MATConfig, doc="the team's objective ([updater.objective]: mat, mat_dec or sable)")


def team_batch(buffer: RolloutBuffer, critic_learner: TransformerValueLoss) -> TeamBatch:
    """The rollout in ``buffer`` as env steps with every agent in one row (reads the buffer, writes nothing),
    with each step's decoding order where the step records hold them (``order = "random"`` / ``"episode"``)."""
    if not buffer.fp_state:
        raise ConfigError('updater.kind = "joint" needs one value per agent in the rollout buffer; '
                          'set critic.kind = "mat_v"')
    n, agents = buffer.n_samples, range(buffer.n_agents)
    critic = critic_learner.critic

    def team(per_agent: list[torch.Tensor]) -> torch.Tensor:
        """Per agent ``(T, E, k)`` -> ``(N, A, k)``."""
        return torch.stack(per_agent, 2).reshape(n, buffer.n_agents, -1)

    masks = [buffer.avail[i] for i in agents]
    avail = None if any(m is None for m in masks) else team([m[:-1] for m in masks])  # type: ignore[index]
    obs = critic.reads([o[:-1] for o in buffer.obs], None).reshape(n, buffer.n_agents, -1)
    return TeamBatch(
        obs=obs, actions=team(buffer.actions), old_log_probs=team(buffer.log_probs), avail=avail,
        active=buffer.active[:-1].reshape(n, -1),
        advantages=torch.stack([buffer.normalized_advantages(i) for i in agents], -1).reshape(n, -1),
        old_values=critic_learner.old_values(buffer.values[:-1].reshape(n, -1)),
        returns=buffer.returns.reshape(n, -1),
        orders=buffer.recorded(FIELD) if FIELD in buffer.extras else None)


@attrs.frozen
class JointStats:
    team: TeamStats
    lr_scale: float

    def row(self) -> dict[str, Any]:
        """The metrics.csv columns of this update."""
        return {**attrs.asdict(self.team), "lr_scale": self.lr_scale}


class JointUpdater:
    """Per iteration: the rollout as one team batch, the learner's epochs x minibatches of joint steps."""

    def __init__(self, config: JointConfig, learner: Any, critic_learner: Any,
                 generator: torch.Generator) -> None:
        self.config = config
        self.learner = learner
        self.critic_learner = critic_learner
        self.generator = generator

    def update(self, buffer: RolloutBuffer, progress: float) -> JointStats:
        scale = lr_scale(self.config, progress)
        set_lr([self.learner], scale)
        own = getattr(self.learner, "team_batch", None)  # a learner that reads the rollout its own way (Sable)
        batch = team_batch(buffer, self.critic_learner) if own is None else own(buffer, self.critic_learner)
        stats = self.learner.update(batch, self.critic_learner, self.critic_learner.value_loss_coef)
        return JointStats(stats, scale)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.learner.optimizer.state_dict(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])


def build_joint_updater(config: JointConfig, learners: list[Any], critic_learner: Any, parts: Any) -> JointUpdater:
    own = len(learners) == 1 and hasattr(learners[0], "team_batch")  # Sable's learner and sable_v's loss
    if len(learners) != 1 or not (isinstance(learners[0], TransformerLearner) or own):
        raise ConfigError('updater.kind = "joint" trains one network for the whole team; set '
                          'updater.objective.kind = "mat", "mat_dec" or "sable"')
    if not (isinstance(critic_learner, TransformerValueLoss) or (own and hasattr(critic_learner, "value_loss_coef"))):
        raise ConfigError('updater.kind = "joint" adds the value loss of critic.kind = "mat_v" (or "sable_v" with '
                          'Sable); set it')
    return JointUpdater(config, learners[0], critic_learner, parts.generator)


register("updater", JointConfig, None, family="on_policy", provides=("joint_update",),
         requires={"updater.objective": "joint_loss"}, build=build_joint_updater)
