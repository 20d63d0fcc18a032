"""Base runner for on-policy algorithms: HARL's step-level API over harl's on-policy stages.

Shapes (E = n_rollout_threads, A = agents; mixed teams are padded, see ``harl.runners.envs``):
``values`` ``(E, 1)`` (EP) or ``(E, A, 1)`` (FP); ``actions`` and ``action_log_probs``
``(E, A, k)`` with ``k`` the widest action (harl keeps one log-probability per action
dimension; the objective aggregates them); ``rnn_states`` ``(E, A, 1, H)`` and
``rnn_states_critic`` ``(E, 1, H)`` (EP) or ``(E, A, 1, H)`` (FP), zeros for feed-forward
networks (``H``: the GRU width, else the last hidden layer's).
"""

from __future__ import annotations

from typing import Any, cast

import attrs
import numpy as np
import torch

import harl.runners.steps as steps
from harl.errors import HarlError
from harl.runners.core import RunnerCore
from harl.runners.envs import pad_agents, to_numpy, unpad_agents
from harl.update.on_policy import UpdateStats


class OnPolicyBaseRunner:
    """Base runner for on-policy algorithms: builds a harl pipeline and forwards to its stages."""

    updater_kind = "sequential"
    """``[updater] kind`` of this runner's pipelines: what makes a runner HA or MA."""

    def __init__(self, args: dict[str, Any], algo_args: dict[str, Any], env_args: dict[str, Any], *,
                 pipeline: Any = None) -> None:
        """``pipeline``: a harl pipeline (file or tables) to run instead of converting HARL's dicts."""
        self._core = core = RunnerCore(args, algo_args, env_args, self.updater_kind, "on_policy", pipeline)
        self.args, self.algo_args, self.env_args = args, algo_args, env_args
        self.run_dir = self.log_dir = core.run_dir
        self.save_dir = None if core.run_dir is None else core.run_dir / "checkpoints"
        self.stages = core.stages
        """harl's built stages (policy, critic, buffer, collector, returns, updater, evaluator)."""
        self._acting: steps.Acting | None = None
        if core.render_only:
            return
        self.envs, self.eval_envs = core.envs, core.eval_envs
        self.num_agents = core.envs.n_agents
        self.device = self.stages.device
        self.state_type = "FP" if steps.fp_state(self.stages) else "EP"

    def run(self) -> Any:
        """Run the training (or rendering) pipeline: ``harl train`` on the converted pipeline."""
        if self._core.render_only:
            return self.render()
        return self._core.train()

    def warmup(self) -> None:
        """Reset the envs and put the first observations into the rollout."""
        self.envs.reset()
        steps.start(self.stages, *self.envs.before)  # type: ignore[misc]

    def collect(self, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Actions and values for ``step`` of the episode:
        values, actions, action_log_probs, rnn_states, rnn_states_critic."""
        acting = self._acting = steps.act(self.stages, step)
        n, widths = self.envs.num_envs, max(self.envs.action_widths)
        actor_h, critic_h = steps.hidden_size(self.stages)
        width = actor_h or self._core.spec.policy.hidden_sizes[-1]
        rnn = np.zeros((n, self.num_agents, 1, width), np.float32)
        for i, h in enumerate(acting.hidden or []):
            rnn[:, i, 0] = to_numpy(h)
        tail = (self.num_agents,) if self.state_type == "FP" else ()
        rnn_critic = np.zeros((n, *tail, 1, critic_h or width), np.float32)
        if acting.critic_hidden is not None:
            rnn_critic[..., 0, :] = to_numpy(acting.critic_hidden)
        values = to_numpy(acting.values).reshape(n, *tail, 1)
        return (values, pad_agents(acting.actions, widths), pad_agents(acting.log_probs, widths), rnn, rnn_critic)

    def insert(self, data: tuple[Any, ...]) -> None:
        """Insert one step into the rollout: the policy's side from ``data``, the env's side from
        ``runner.envs``'s last step (harl's terminated / truncated / pre-reset state)."""
        if self._acting is None or self.envs.last_step is None:
            raise HarlError("insert(data) needs collect(step) and then runner.envs.step(actions) first, "
                            "as in HARL's OnPolicyBaseRunner.run")
        values, actions, log_probs = data[6], data[7], data[8]
        widths = self.envs.action_widths
        self._core.episodes.extend(steps.observe(
            self.stages, self._acting, self.envs.last_step, unpad_agents(actions, widths),
            unpad_agents(log_probs, widths), to_numpy(values)))
        self._acting = None

    def compute(self) -> None:
        """Value of the last state, then returns and advantages (the pipeline's return computer)."""
        steps.bootstrap(self.stages)
        self._core.trainer.compute_returns()

    def prep_rollout(self) -> None:
        """Nothing to switch: harl's networks act the same in training and rollout."""

    def prep_training(self) -> None:
        """Nothing to switch: harl's networks act the same in training and rollout."""

    def train(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """One update of every actor and the critic; (per-agent stats, critic stats)."""
        trainer = self._core.trainer
        stats = cast(UpdateStats, trainer.update())  # the Trainer's own step (its progress, its stage error
        trainer.check(stats)                          # messages); the sequential or simultaneous updater's stats
        self._core.end_iteration(steps.rollout_length(self.stages) * self.envs.num_envs)
        return [attrs.asdict(a) for a in stats.agents], attrs.asdict(stats.critic)

    def after_update(self) -> None:
        """Carry the rollout's last step into its first slot for the next rollout."""
        steps.roll_over(self.stages)

    @torch.no_grad()
    def eval(self) -> Any:
        """Evaluate the team on the eval envs (the pipeline's evaluator); returns its stats."""
        return self._core.evaluate(f"iteration {self._core.counters.iteration}")

    def render(self) -> Any:
        """Film ``render_episodes`` episodes of the checkpoint in ``model_dir`` (harl render)."""
        return self._core.render()

    def dump_metrics_to_csv(self, metrics: dict[str, Any], eval_episode: int) -> Any:
        """Append one row of ``metrics`` (per-agent lists spread over columns) to eval_metrics.csv."""
        return self._core.dump_metrics(metrics, eval_episode)

    def save(self) -> Any:
        """Write a harl checkpoint (networks, optimisers, counters, RNGs) into checkpoints/."""
        return self._core.save()

    def restore(self) -> None:
        """Load the harl checkpoint that ``algo_args["train"]["model_dir"]`` names (all of its state)."""
        self._core.restore()

    def close(self) -> None:
        """Close the environments."""
        self._core.close()
