"""Builds the off-policy stages (HASAC, HATD3, HADDPG, HAD3QN, MADDPG, MATD3).

``harl.build.build_stages`` hands a spec whose collector is ``off_policy`` to
``build_off_policy_stages``; the result meets the Trainer's contract (see
``harl.trainer.Trainer``): one iteration is ``train_interval`` vector steps into the
replay buffer, a no-op ``returns.compute`` (n-step targets are formed per sampled batch)
and ``updates_per_round`` gradient steps (none while the buffer holds only warm-up data).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import attrs
import numpy as np
import torch

from harl.buffers.replay import ReplayBuffer
from harl.collect.off_policy import OffPolicyCollector
from harl.envs.vector import make_vector_env
from harl.errors import ConfigError
from harl.evaluate import Evaluator
from harl.policy.off_policy import OffPolicyTeam
from harl.returns.n_step import NStepReturns
from harl.sizes import check_replay, replay_bytes_per_transition
from harl.update.objectives import d3qn, ddpg, sac, td3
from harl.update.off_policy_updater import OffPolicyUpdater
from harl.update.q_critic import MAX_JOINT_ACTIONS, JointQCritic, QCritic, QCriticLearner

OFF_POLICY_OBJECTIVES: dict[type, tuple[ModuleType, bool]] = {
    ddpg.DDPGConfig: (ddpg, True),
    td3.TD3Config: (td3, True),
    sac.SACConfig: (sac, False),
    d3qn.D3QNConfig: (d3qn, True),
}
"""Objective config -> (module with ``make_actor`` / ``make_learner``, uses target actors)."""


@attrs.define
class OffPolicyStages:
    venv: Any
    eval_venv: Any
    policy: OffPolicyTeam
    critic: QCritic | JointQCritic
    buffer: ReplayBuffer
    collector: OffPolicyCollector
    returns: NStepReturns
    updater: OffPolicyUpdater
    evaluator: Evaluator
    device: torch.device
    save_buffer: bool = False
    """``[checkpoint] replay_buffer``: also save the replay buffer's filled rows."""

    STATEFUL = ("policy", "critic", "updater", "collector", "evaluator")
    """Slots a checkpoint always holds.  The replay buffer only with ``save_buffer`` (it can
    hold gigabytes): without it a resumed run refills it, and updates wait until it holds
    more than ``warmup_steps``; with it the resumed run continues exactly."""

    def state_dict(self) -> dict[str, Any]:
        state = {name: getattr(self, name).state_dict() for name in self.STATEFUL}
        if self.save_buffer:
            state["buffer"] = self.buffer.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any], networks_only: bool = False) -> None:
        self.policy.load_state_dict(state["policy"])
        self.critic.load_state_dict(state["critic"])
        if networks_only:
            return
        for name in (*self.STATEFUL[2:], "buffer"):
            if name in state:
                getattr(self, name).load_state_dict(state[name])

    def close(self) -> None:
        self.venv.close()
        self.eval_venv.close()


def _check_joint_size(critic: JointQCritic, source: str) -> None:
    joint = int(np.prod(critic.sizes))
    if joint > MAX_JOINT_ACTIONS:
        raise ConfigError(
            f'{source}: critic.kind: "joint_q" scores all {joint:,} joint actions at once (more than '
            f"{MAX_JOINT_ACTIONS:,}); use fewer agents or actions, or a \"q\" critic with objective \"sac\""
        )


def build_off_policy_stages(spec: Any, device: torch.device, source: str = "pipeline") -> OffPolicyStages:
    """Build every off-policy stage of ``spec`` (envs included); seeding is the caller's."""
    run, col, objective = spec.run, spec.collector, spec.updater.objective
    module, with_targets = OFF_POLICY_OBJECTIVES[type(objective)]
    venv = make_vector_env(spec.env, col.n_envs, col.backend, col.workers, seed=run.seed * 1000)
    eval_venv = None
    try:
        eval_venv = make_vector_env(spec.env, spec.evaluator.n_envs, "inline", seed=run.seed * 1000 + 500)
        obs_spaces, act_spaces = venv.observation_spaces, venv.action_spaces
        n_agents = venv.n_agents
        state_dim = int(np.prod(venv.state_space.shape))
        obs_dims = [int(np.prod(s.shape)) for s in obs_spaces]
        extra = {"warmup_steps": col.warmup_steps} if module is d3qn else {}
        actors = [module.make_actor(obs_dims[i], act_spaces[i], spec.policy, objective, i, source, **extra)
                  for i in range(n_agents)]
        team = OffPolicyTeam(actors, with_targets).to(device)
        if spec.critic.kind == "joint_q":
            critic: QCritic | JointQCritic = JointQCritic(state_dim, act_spaces, spec.critic)
            _check_joint_size(critic, source)
        else:
            critic = QCritic(state_dim, act_spaces, spec.critic)
        critic = critic.to(device)
        agents = [module.make_learner(i, team, critic, objective, act_spaces[i]) for i in range(n_agents)]
        generator = torch.Generator().manual_seed(run.seed)
        returns = NStepReturns(spec.returns)
        updater = OffPolicyUpdater(spec.updater, agents, QCriticLearner(critic, spec.critic), returns,
                                   spec.buffer.batch_size, col.updates_per_round, col.warmup_steps,
                                   getattr(objective, "policy_freq", 1), generator, run.precision)
        check_replay(replay_bytes_per_transition(obs_spaces, act_spaces, state_dim), spec.buffer.capacity,
                     source, device)
        buffer = ReplayBuffer(obs_spaces, act_spaces, state_dim, col.n_envs, spec.buffer.capacity, device)
        collector = OffPolicyCollector(col, venv, team, device, seed=run.seed * 1000)
        evaluator = Evaluator(spec.evaluator, eval_venv, team, device, seed=run.seed * 1000 + 500)  # type: ignore[arg-type]
    except BaseException:
        venv.close()
        if eval_venv is not None:
            eval_venv.close()
        raise
    return OffPolicyStages(venv, eval_venv, team, critic, buffer, collector, returns, updater, evaluator, device,
                           save_buffer=spec.checkpoint.replay_buffer)
