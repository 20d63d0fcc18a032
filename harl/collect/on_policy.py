"""The on-policy Collector: runs the current policy for T steps in every env.

::

    collector = OnPolicyCollector(config, venv, policy, critic, device)
    for iteration in range(n):
        stats = collector.collect(buffer)     # fills T steps, continues open episodes
        ...                                   # returns, update

A tensor-native vector env (VMAS) gets the policy's action tensors as they are, and its
tensors are copied straight into the buffer; a numpy env gets numpy arrays (one
device-to-host copy of the actions per step), copied into the buffer the same way.
Both paths store the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import attrs
import torch

from harl.buffers.rollout import RolloutBuffer
from harl.envs.protocol import VectorEnv, is_tensor_native
from harl.errors import EnvCrashedError
from harl.policy.on_policy import TeamPolicy
from harl.registry import register
from harl.settings import in_range, kind_field, one_of, positive, setting


class ValueFunction(Protocol):
    """What the collector asks of the critic (``harl.update.v_critic.VCritic``): V of states as it goes."""

    def value(self, *inputs: Any) -> torch.Tensor: ...

    def step(self, *inputs: Any) -> tuple[torch.Tensor, torch.Tensor]: ...


@attrs.frozen
class OnPolicyCollectorConfig:
    """``[collector] kind = "on_policy"``."""

    kind: str = kind_field("on_policy")
    rollout_length: int = setting(200, "env steps per env per iteration (T)", positive())
    n_envs: int = setting(20, "environments stepped together", positive())
    backend: str = setting("inline", "inline (one process), subprocess (worker processes) or ray (Ray actors, any node)",
                           one_of(("inline", "subprocess", "ray")))
    workers: int = setting(0, "subprocess workers or Ray actors (0: one per CPU core, at most n_envs)", in_range(0, None))
    restart_workers: bool = setting(False, "ray backend: restart a dead worker and reset its envs instead of stopping")


def backend_checks(config: Any, built: Any) -> Iterator[tuple[list[str], str]]:
    """``restart_workers`` restarts Ray actors only."""
    if config.restart_workers and config.backend != "ray":
        yield (["collector", "restart_workers"], f'applies to backend = "ray" only, but backend = '
               f'"{config.backend}"; remove the key or set backend = "ray"')


@attrs.frozen
class CollectStats:
    env_steps: int
    episodes: list[dict[str, Any]]
    """One dict per finished episode: ``return``, ``length`` and env metrics."""


class OnPolicyCollector:
    def __init__(self, config: OnPolicyCollectorConfig, venv: VectorEnv, policy: TeamPolicy,
                 critic: ValueFunction, device: torch.device, seed: int) -> None:
        self.config = config
        self.venv = venv
        self.policy = policy
        self.critic = critic
        self.device = device
        self.seed = seed
        self.native = is_tensor_native(venv)
        """The env takes and returns torch tensors: no numpy round trip."""
        self.started = False
        self._restart: list[dict[str, Any]] | None = None  # episode starts from a checkpoint
        self._saved: dict[str, Any] = {"started": False, "episode_starts": None}
        self._use_saved = False  # inside collect(), or after it or the envs failed: see state_dict

    @property
    def steps_per_iteration(self) -> int:
        """Env steps one ``collect`` call takes (T x n_envs)."""
        return self.config.rollout_length * self.config.n_envs

    def state_dict(self) -> dict[str, Any]:
        """How the envs' current episodes began, so a resumed run can begin them again.

        Asked while a ``collect`` was cut short (an env crashed, a second Ctrl-C), or after the
        envs failed to answer it, it does not talk to them (closed, or with a step in flight):
        it returns the state as of the end of the last whole ``collect``, which matches the
        counters saved with it.
        """
        if self._use_saved:
            return self._saved
        try:
            return {"started": self.started, "episode_starts": self.venv.episode_starts() if self.started else None}
        except EnvCrashedError:  # a worker died since the collect: the exit-save takes the saved state
            self._use_saved = True
            raise

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The first ``collect`` after this restarts the saved episodes instead of seeding anew.

        Exact when every env was at an episode's first step at the checkpoint (as when the
        rollout length is a multiple of the episode length); otherwise those episodes start over.
        """
        self._restart = state["episode_starts"] if state["started"] else None
        self._saved = state

    def _start(self, buffer: RolloutBuffer) -> None:
        if self._restart is not None:
            obs, state, avail = self.venv.restart(self._restart)
            self._restart = None
        else:
            obs, state, avail = self.venv.reset(seed=self.seed)
        for i, o in enumerate(obs):
            buffer.obs[i][0].copy_(torch.as_tensor(o))
            if avail is not None and buffer.avail[i] is not None:
                buffer.avail[i][0].copy_(torch.as_tensor(avail[i]))  # type: ignore[union-attr]
        buffer.state[0].copy_(torch.as_tensor(state))
        buffer.active[0].fill_(1.0)
        buffer.starts[0].fill_(1.0)
        for h in buffer.hidden or []:
            h[0].zero_()
        if buffer.critic_hidden is not None:
            buffer.critic_hidden[0].zero_()
        self.started = True

    @torch.no_grad()
    def collect(self, buffer: RolloutBuffer) -> CollectStats:
        self._use_saved = True
        if not self.started:
            self._start(buffer)
        else:
            buffer.roll_over()
        episodes: list[dict[str, Any]] = []
        n_agents = buffer.n_agents
        for t in range(buffer.length):
            obs = [o[t] for o in buffer.obs]
            avail = [None if a is None else a[t] for a in buffer.avail]
            hidden = None if buffer.hidden is None else [h[t] for h in buffer.hidden]
            actions, log_probs = self.policy.act(obs, avail, hidden=hidden, starts=buffer.starts[t])
            critic_hidden = buffer.critic_hidden
            if critic_hidden is None:
                buffer.values[t] = self.critic.value(buffer.state[t])
            else:  # the state after step t, before any reset (applied where starts[t + 1] = 1)
                buffer.values[t], critic_hidden[t + 1] = self.critic.step(
                    buffer.state[t], critic_hidden[t], buffer.starts[t])
            step = self.venv.step(actions if self.native else [a.cpu().numpy() for a in actions])
            for i in range(n_agents):
                buffer.actions[i][t] = actions[i]
                buffer.log_probs[i][t] = log_probs[i]
                buffer.obs[i][t + 1].copy_(torch.as_tensor(step.obs[i]))
                if step.avail is not None and buffer.avail[i] is not None:
                    buffer.avail[i][t + 1].copy_(torch.as_tensor(step.avail[i]))  # type: ignore[union-attr]
            buffer.state[t + 1].copy_(torch.as_tensor(step.state))
            buffer.rewards[t].copy_(torch.as_tensor(step.rewards))
            terminated = torch.as_tensor(step.terminated)
            truncated = torch.as_tensor(step.truncated)
            buffer.terminated[t] = terminated
            buffer.truncated[t] = truncated
            ended = terminated | truncated
            buffer.starts[t + 1] = ended.float()
            for h, new in zip(buffer.hidden or [], hidden or []):
                h[t + 1] = new
            active = torch.as_tensor(step.active, dtype=torch.float32)
            buffer.active[t + 1] = torch.where(ended.unsqueeze(-1), torch.ones_like(active), active)
            if bool(ended.any()):
                final = torch.as_tensor(step.final_state, dtype=torch.float32, device=self.device)
                if critic_hidden is None:
                    buffer.final_values[t] = self.critic.value(final)
                else:  # the pre-reset state continues the ended episode: its GRU state, no reset
                    buffer.final_values[t] = self.critic.value(
                        final, critic_hidden[t + 1], torch.zeros_like(buffer.starts[t + 1]))
                episodes.extend(step.episode_infos)
        if buffer.critic_hidden is None:
            buffer.values[-1] = self.critic.value(buffer.state[-1])
        else:
            buffer.values[-1] = self.critic.value(buffer.state[-1], buffer.critic_hidden[-1], buffer.starts[-1])
        self._saved = {"started": True, "episode_starts": self.venv.episode_starts()}
        self._use_saved = False
        return CollectStats(buffer.length * buffer.n_envs, episodes)

    def close(self) -> None:
        self.venv.close()


register("collector", OnPolicyCollectorConfig, family="on_policy", default=True, check=backend_checks,
         factory=lambda config, parts: OnPolicyCollector(config, parts.venv, parts.team, parts.critic,
                                                          parts.device, seed=parts.env_seed))
