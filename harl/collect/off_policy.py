"""The off-policy Collector: ``rollout_length`` vector steps into the replay buffer.

::

    collector = OffPolicyCollector(config, venv, policy, device, seed)
    for iteration in range(n):
        stats = collector.collect(buffer)   # rollout_length x n_envs transitions
        updater.update(buffer, progress)    # updates_per_round gradient steps (none in warm-up)

The first ``warmup_steps`` env steps take uniformly random actions (inside the Box,
among the available categories); after that the policy explores as its objective says
(Gaussian noise for DDPG/TD3, sampling for SAC, epsilon-greedy for D3QN, on this collector's
``epsilon_*`` schedule, where the value family's collector keeps its own).  Every
transition keeps what the step reached, the pre-reset observation and state where an
episode ended, so truncated transitions can bootstrap.

The collector hands the buffer one ``Transition`` per vector step (``harl.buffers.records``).
A tensor-native vector env (VMAS) gets the action tensors as they are, and its tensors
go into the replay buffer without a numpy round trip; a numpy env gets numpy arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import torch
from gymnasium import spaces

from harl.buffers.records import StartRecord, Transition
from harl.buffers.replay import ReplayBuffer
from harl.collect.rollout import RolloutLoop
from harl.collect.stats import CollectStats
from harl.collect.workers import EnvWorkers, backend_checks
from harl.envs.protocol import VectorEnv, VectorStep, is_tensor_native
from harl.nets.heads import avail_size
from harl.policy.off_policy import OffPolicyActors, masked_uniform
from harl.registry import register
from harl.settings import in_range, kind_field, one_of, own_first, positive, setting

EPSILON_COINS = ("per_env", "per_step")


@attrs.frozen(field_transformer=own_first)
class OffPolicyCollectorConfig(EnvWorkers):
    """``[collector] kind = "off_policy"``: steps into a replay buffer between update rounds (its envs: ``EnvWorkers``)."""

    kind: str = kind_field("off_policy")
    n_envs: int = setting(20, "environments stepped together", positive())
    rollout_length: int = setting(
        50, "vector steps per iteration, each iteration followed by an update round (the on-policy collectors' "
        "name; harl convert maps HARL's own key here)", positive())
    updates_per_round: int = setting(
        50, "gradient steps per iteration (HARL: update_per_train x its vector steps per iteration)", positive())
    warmup_steps: int = setting(10_000, "env steps of uniformly random actions before learning starts", in_range(0, None))
    epsilon_start: float = setting(
        0.05, "D3QN's exploration rate right after warm-up (the objectives that explore otherwise do not read "
        "it)", in_range(0, 1))
    epsilon_finish: float = setting(0.05, "D3QN's exploration rate after the anneal", in_range(0, 1))
    epsilon_anneal_steps: int = setting(
        0, "env steps after warm-up over which D3QN's epsilon falls linearly from epsilon_start to "
        "epsilon_finish (0: epsilon_finish throughout)", in_range(0, None))
    epsilon_coin: str = setting(
        "per_env", "D3QN's draw: per_env, each env explores on its own coin; per_step, one coin per vector step "
        "decides for every env (HARL's HAD3QN)", one_of(EPSILON_COINS))


EPSILON_KEYS = ("epsilon_start", "epsilon_finish", "epsilon_anneal_steps", "epsilon_coin")
"""The keys of the epsilon-greedy schedule, which only an objective registered ``epsilon_greedy=True``
(D3QN) reads."""


def random_actions(action_spaces: Sequence[spaces.Space], avail: Sequence[torch.Tensor | None],
                   n: int, device: torch.device, generator: torch.Generator | None = None) -> list[torch.Tensor]:
    """Uniform actions per agent, ``(n, k_i)`` floats: inside the Box (standard normal on an
    unbounded side), uniform among available categories (per sub-action for MultiDiscrete)."""
    out = []
    for space, mask in zip(action_spaces, avail):
        if isinstance(space, spaces.Box):
            low = torch.as_tensor(np.asarray(space.low, np.float32).ravel(), device=device)
            high = torch.as_tensor(np.asarray(space.high, np.float32).ravel(), device=device)
            # drawn where the (CPU) generator lives, so a GPU run takes the same warm-up actions
            u = torch.rand(n, low.numel(), generator=generator).to(device)
            bounded = torch.isfinite(low) & torch.isfinite(high)
            normal = torch.randn(n, low.numel(), generator=generator).to(device)
            out.append(torch.where(bounded, low + u * (high - low), normal))
            continue
        if isinstance(space, spaces.Discrete):
            sizes = [int(space.n)]
        elif isinstance(space, spaces.MultiDiscrete):
            sizes = [int(k) for k in np.asarray(space.nvec).ravel()]
        else:
            raise TypeError(f"no random actions of a {type(space).__name__} space (Box, Discrete, MultiDiscrete)")
        parts = [None] * len(sizes) if mask is None else mask.split(sizes, -1)
        picks = [masked_uniform(part, size, n, device, generator) for part, size in zip(parts, sizes)]
        out.append(torch.stack(picks, -1).float())
    return out


class OffPolicyCollector:
    def __init__(self, config: OffPolicyCollectorConfig, venv: VectorEnv, policy: OffPolicyActors,
                 device: torch.device, seed: int) -> None:
        self.config = config
        self.venv = venv
        self.policy = policy
        self.device = device
        self.seed = seed
        self.masked = [avail_size(s) > 0 for s in venv.action_spaces]
        self.env_steps = 0
        """Env steps taken since the run began (drives warm-up and epsilon schedules)."""
        self.generator = torch.Generator().manual_seed(seed)
        self.native = is_tensor_native(venv)
        """The env takes and returns torch tensors: no numpy round trip."""
        # The current observations, as the env returned them (arrays, or tensors if native).
        self._obs: Sequence[Any] | None = None
        self._state: Any = None
        self._avail: Sequence[Any] | None = None
        self._active: Any = (torch.ones(config.n_envs, venv.n_agents, device=venv.device)
                             if is_tensor_native(venv) else np.ones((config.n_envs, venv.n_agents), dtype=np.float32))
        self.loop = RolloutLoop(venv, seed, config.rollout_length, self._own_state)
        """The one rollout loop (``harl.collect.rollout``): resets, restarts, resumes and steps the envs."""
        self._actor: OffPolicyActor | None = None

    def actor(self, buffer: ReplayBuffer) -> OffPolicyActor:
        """This collector acting into ``buffer``, as the rollout loop drives it (one per buffer)."""
        if self._actor is None or self._actor.buffer is not buffer:
            self._actor = OffPolicyActor(self, buffer)
        return self._actor

    @property
    def steps_per_iteration(self) -> int:
        """Env steps one ``collect`` call takes (rollout_length x n_envs)."""
        return self.config.rollout_length * self.config.n_envs

    @property
    def warming_up(self) -> bool:
        return self.env_steps < self.config.warmup_steps

    def _tensors(self, arrays: Sequence[Any]) -> list[torch.Tensor]:
        return [torch.as_tensor(a, dtype=torch.float32, device=self.device) for a in arrays]

    def _masks(self, avail: Sequence[Any] | None) -> list[torch.Tensor | None]:
        if avail is None:
            return [None] * len(self.masked)
        return [torch.as_tensor(a, dtype=torch.float32, device=self.device) if m else None
                for a, m in zip(avail, self.masked)]

    def take_restart(self) -> list[dict[str, Any]] | None:
        """The checkpoint's episode starts the next ``start`` would restart (and forget them):
        for a caller that resets the envs itself (a population, ``harl.population``)."""
        return self.loop.take_restart()

    def start(self, buffer: ReplayBuffer | None = None, first: StartRecord | None = None) -> None:
        """Reset the envs (or restart a checkpoint's episodes); ``first``: the caller reset them.
        ``buffer`` is unused (the on-policy collector's ``start`` takes one; a population calls both alike)."""
        self.loop.start(self.actor(buffer) if buffer is not None else _Starting(self), first)

    def observe_first(self, first: StartRecord) -> None:
        """The envs' first observations (a reset, a restart, or the caller's ``first``)."""
        self._obs, self._state, self._avail = list(first.obs), first.state, \
            None if first.avail is None else list(first.avail)
        self._active[:] = 1.0

    def begin(self) -> None:
        """A round of steps begins: a checkpoint taken inside it keeps the last whole round's state."""
        self.loop.exit.collecting()
        if self._obs is None:
            self.start()

    def end(self) -> None:
        """The round is whole: a checkpoint now takes the envs' current episodes."""
        self.loop.exit.collected()

    def inputs(self) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
        """The current observations and action masks, as tensors on the training device."""
        assert self._obs is not None, "begin() first"
        return self._tensors(self._obs), self._masks(self._avail)

    def random_actions(self, masks: Sequence[torch.Tensor | None]) -> list[torch.Tensor]:
        """Warm-up actions for this collector's envs, from its own generator."""
        return random_actions(self.venv.action_spaces, masks, self.config.n_envs, self.device, self.generator)

    def record(self, env_actions: Sequence[Any], step: VectorStep, buffer: ReplayBuffer) -> list[dict[str, Any]]:
        """Store the step the envs took on ``env_actions`` and move on to what it reached; its
        finished episodes.  ``collect`` calls it per step; a population too, per member."""
        assert self._obs is not None, "begin() first"
        transition, self._active = self.observe((self._obs, self._state, self._avail), env_actions, step,
                                                self._active)
        buffer.insert(transition)
        self._obs, self._state, self._avail = step.obs, step.state, step.avail
        self.advance(self.config.n_envs)
        return step.episode_infos

    @torch.no_grad()
    def collect(self, buffer: ReplayBuffer) -> CollectStats:
        return self.loop.collect(self.actor(buffer))

    def explore(self) -> list[torch.Tensor]:
        """The actions for the current observations: warm-up's random ones, else the policy's exploration."""
        obs, masks = self.inputs()
        return self.random_actions(masks) if self.warming_up else self.policy.explore(obs, masks, self.env_steps)

    def observe(self, before: tuple[Sequence[Any], Any, Sequence[Any] | None], env_actions: Sequence[Any],
                step: VectorStep, active: Any) -> tuple[Transition, Any]:
        """The replay's record of one vector step from ``before`` = (obs, state, avail), and who is
        alive at the next step (1 where an episode begins).  ``collect`` calls it for every step;
        a caller driving the envs itself (HARL's runner facade) calls it, then ``advance``."""
        obs, state, avail = before
        final_obs = step.final_obs if step.final_obs is not None else step.obs
        final_avail = step.final_avail if step.final_obs is not None else step.avail
        transition = Transition(obs=obs, avail=avail, state=state, actions=env_actions, rewards=step.rewards,
                                terminated=step.terminated, truncated=step.truncated, active=active,
                                next_obs=final_obs, next_avail=final_avail, next_state=step.final_state)
        ended = step.terminated | step.truncated
        if self.native:
            return transition, torch.where(torch.as_tensor(ended).unsqueeze(-1), 1.0, torch.as_tensor(step.active).float())
        return transition, np.where(ended[:, None], 1.0, step.active).astype(np.float32)

    def advance(self, env_steps: int) -> None:
        """Count env steps taken (warm-up and exploration schedules read the count)."""
        self.env_steps += env_steps

    def _own_state(self) -> dict[str, Any]:
        return {"env_steps": self.env_steps, "generator": self.generator.get_state()}

    def state_dict(self) -> dict[str, Any]:
        """Steps taken (warm-up, epsilon) and how the envs' current episodes began (and their whole
        state, where the env gives it: ``RolloutLoop``); inside a ``collect`` cut short, as of the end
        of the last whole one (see ``OnPolicyCollector``)."""
        return self.loop.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.env_steps = state["env_steps"]
        self.generator.set_state(state["generator"])
        self.loop.load_state_dict(state)

    def carried(self) -> dict[str, Any]:
        """Where the envs are (observations, state, masks, who is alive): a checkpoint's ``next``."""
        return {"obs": _copied(self._obs), "state": _copied(self._state), "avail": _copied(self._avail),
                "active": _copied(self._active)}

    def take_resume(self) -> dict[str, Any] | None:
        """The checkpoint's whole env state and where the envs were (``env_state``, ``next``), or None (and
        forget them): for a caller that restores the envs itself (a population, ``harl.population``)."""
        return self.loop.take_resume()

    def carry_in(self, buffer: ReplayBuffer, carried: dict[str, Any]) -> None:
        """Go on from a checkpoint's ``next`` (the envs restored by the caller)."""
        self.loop.resumed(self.actor(buffer), carried)

    def carry(self, carried: dict[str, Any]) -> None:
        """Where the envs are, from ``carried()``'s value."""
        self._obs, self._state, self._avail = carried["obs"], carried["state"], carried["avail"]
        self._active = carried["active"]

    def close(self) -> None:
        self.venv.close()


def _copied(value: Any) -> Any:
    """``value`` (arrays and tensors, in lists) copied: an env may write its next step into the same memory."""
    if isinstance(value, (list, tuple)):
        return [_copied(v) for v in value]
    if isinstance(value, torch.Tensor):
        return value.clone()
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


class OffPolicyActor:
    """An ``OffPolicyCollector`` acting into one replay buffer (``harl.collect.actor.Actor``): warm-up's or
    the policy's exploring actions, one transition per vector step."""

    def __init__(self, collector: OffPolicyCollector, buffer: ReplayBuffer) -> None:
        self.collector = collector
        self.buffer = buffer
        self.actions: list[Any] = []

    def observe_first(self, first: StartRecord) -> None:
        self.collector.observe_first(first)

    def roll_over(self) -> None:
        pass

    def select_action(self) -> list[Any]:
        actions = self.collector.explore()
        self.actions = actions if self.collector.native else [a.cpu().numpy() for a in actions]
        return self.actions

    def observe(self, step: VectorStep) -> None:
        self.collector.record(self.actions, step, self.buffer)

    def end_rollout(self) -> None:
        pass

    def abandon(self) -> None:
        pass

    def carried(self) -> dict[str, Any] | None:
        return self.collector.carried()

    def carry_in(self, carried: dict[str, Any]) -> None:
        self.collector.carry(carried)

    def compiled(self, eager_s: float) -> None:
        return None


class _Starting(OffPolicyActor):
    """A start without a buffer (a population's, or ``begin``): the envs' first observations only."""

    def __init__(self, collector: OffPolicyCollector) -> None:
        super().__init__(collector, None)  # type: ignore[arg-type]


register("collector", OffPolicyCollectorConfig, family="off_policy", check=backend_checks,
         factory=lambda config, parts: OffPolicyCollector(config, parts.venv, parts.policy, parts.device,
                                                           seed=parts.env_seed))
