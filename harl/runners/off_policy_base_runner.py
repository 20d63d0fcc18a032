"""Base runner for off-policy algorithms: HARL's step-level API over harl's off-policy stages.

``get_actions`` and ``sample_actions`` take and return ``(n_threads, n_agents, dim)``
arrays (mixed teams padded to the widest agent, see ``harl.runners.envs``); a
Discrete agent's action is its index as a float in column 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import harl.runners.steps as steps
from harl.errors import HarlError
from harl.runners.core import RunnerCore
from harl.runners.envs import pad_agents, unpad_agents


class OffPolicyBaseRunner:
    """Base runner for off-policy algorithms: builds a harl pipeline and forwards to its stages."""

    updater_kind = "sequential"
    """``[updater] kind`` of this runner's pipelines: what makes a runner HA or MA."""

    def __init__(self, args: dict[str, Any], algo_args: dict[str, Any], env_args: dict[str, Any], *,
                 pipeline: Any = None) -> None:
        """``pipeline``: a harl pipeline (file or tables) to run instead of converting HARL's dicts."""
        self._core = core = RunnerCore(args, algo_args, env_args, self.updater_kind, "off_policy", pipeline)
        self.args, self.algo_args, self.env_args = args, algo_args, env_args
        self.run_dir = self.log_dir = core.run_dir
        self.save_dir = None if core.run_dir is None else core.run_dir / "checkpoints"
        self.stages = core.stages
        """harl's built stages (team, critic, replay buffer, collector, returns, updater, evaluator)."""
        self._active: np.ndarray | None = None
        if core.render_only:
            return
        self.envs, self.eval_envs = core.envs, core.eval_envs
        self.num_agents = core.envs.n_agents
        self.device = self.stages.device
        self.action_spaces = self.envs.action_space

    def run(self) -> Any:
        """Run the training (or rendering) pipeline: ``harl train`` on the converted pipeline."""
        if self._core.render_only:
            return self.render()
        return self._core.train()

    def warmup(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Warmup the replay buffer with random actions; returns obs, share_obs, available_actions."""
        n = self.envs.num_envs
        obs, share_obs, available_actions = self.envs.reset()
        for _ in range(self._core.spec.collector.warmup_steps // n):
            actions = self.sample_actions(available_actions)
            new_obs, new_share_obs, rewards, dones, infos, new_available = self.envs.step(actions)
            self.insert((share_obs, obs.transpose(1, 0, 2), actions.transpose(1, 0, 2), None, rewards, dones,
                         infos, new_share_obs, new_obs, None))
            obs, share_obs, available_actions = new_obs, new_share_obs, new_available
        return obs, share_obs, available_actions

    def _masks(self, available_actions: Any) -> list[Any]:
        return steps.masks(self.stages, self.envs.masks(available_actions))

    def sample_actions(self, available_actions: Any = None) -> np.ndarray:
        """Uniformly random actions (among the available ones), ``(n_threads, n_agents, dim)``."""
        actions = steps.random(self.stages, self._masks(available_actions), self.envs.num_envs)
        return pad_agents(actions, max(self.envs.action_widths))

    def get_actions(self, obs: Any, available_actions: Any = None, add_random: bool = True) -> np.ndarray:
        """The team's actions for ``obs`` ``(n_threads, n_agents, dim)``; ``add_random``: with the
        objective's exploration (noise, sampling, epsilon), else deterministic."""
        per_agent = unpad_agents(obs, self.envs.obs_widths)
        masks = self._masks(available_actions)
        act = steps.explore if add_random else steps.greedy
        return pad_agents(act(self.stages, per_agent, masks), max(self.envs.action_widths))

    def insert(self, data: tuple[Any, ...]) -> None:
        """One transition per env into the replay buffer: the actions from ``data`` (HARL's
        ``(n_agents, n_threads, dim)``), the rest from ``runner.envs``'s last step."""
        env = self.envs
        if env.last_step is None or env.previous is None:
            raise HarlError("insert(data) needs runner.envs.step(actions) first, as in HARL's "
                            "OffPolicyBaseRunner.run")
        actions = env.env_actions(np.asarray(data[2]).transpose(1, 0, 2))
        self._active = steps.add(self.stages, env.previous, actions, env.last_step, self._active)
        self._core.episodes.extend(env.last_step.episode_infos)
        self._core.counters.env_steps += env.num_envs

    def train(self) -> Any:
        """Train the model: one gradient step of the critic (and, every policy_freq, the actors)."""
        return self._core.trainer.update(steps=1)  # the Trainer's own step: its progress

    def eval(self, step: int) -> Any:
        """Evaluate the model (the pipeline's evaluator); returns its stats."""
        return self._core.evaluate(f"step {step}")

    def render(self) -> Any:
        """Render the model: film ``render_episodes`` episodes of the checkpoint in ``model_dir``."""
        return self._core.render()

    def save(self) -> Any:
        """Save the model: a harl checkpoint (networks, optimisers, counters, RNGs) into checkpoints/."""
        c = self._core.counters
        c.iteration = c.env_steps // max(1, self.stages.collector.steps_per_iteration)
        return self._core.save()

    def restore(self) -> None:
        """Restore the model from the harl checkpoint that ``algo_args["train"]["model_dir"]`` names."""
        self._core.restore()

    def close(self) -> None:
        """Close the environments."""
        self._core.close()
