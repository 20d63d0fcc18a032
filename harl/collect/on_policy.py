"""The on-policy Collector: runs the current policy for T steps in every env.

::

    collector = OnPolicyCollector(config, venv, policy, critic, device, seed)
    for iteration in range(n):
        stats = collector.collect(buffer)     # fills T steps, continues open episodes
        ...                                   # returns, update

The collector hands the buffer one ``StepRecord`` per vector step and never writes its
arrays (``harl.buffers.records``).  A tensor-native vector env (VMAS) gets the policy's
action tensors as they are, and its tensors go into the record as they are; a numpy env
gets numpy arrays (one device-to-host copy of the actions per step).  Both paths store
the same numbers.

A policy may give more than actions (``harl.policy.mat_policy.TeamSample``): ``values``, V(s_t) from
its own forward pass (the critic is a head of the policy: MAT's encoder), which the collector stores
instead of asking the critic again; and ``extras``, fields of its own for the step record (declared
by its ``record_fields``), which it gets back at the next step (``StepInputs.extras``, passed to its
``sample`` as ``carried``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import attrs
import torch

from harl.buffers.records import StartRecord, StepRecord
from harl.buffers.rollout import RolloutBuffer
from harl.collect import compiled
from harl.collect.critic_input import critic_input, policy_values
from harl.collect.rollout import RolloutLoop
from harl.collect.stats import CollectStats
from harl.collect.workers import EnvWorkers, backend_checks
from harl.envs.protocol import VectorEnv, VectorStep, is_tensor_native
from harl.errors import ConfigError
from harl.policy.on_policy import OnPolicyActors
from harl.registry import register
from harl.settings import kind_field, one_of, own_first, positive, setting


class ValueFunction(Protocol):
    """What the collector asks of the critic (``harl.update.v_critic.VCritic``): V of states as it goes
    (and, where the policy's step gives values of its own, ``denormalize(values)``: them in env units)."""

    def value(self, *inputs: Any) -> torch.Tensor: ...

    def step(self, *inputs: Any) -> tuple[torch.Tensor, torch.Tensor]: ...


@attrs.frozen(field_transformer=own_first)
class OnPolicyCollectorConfig(EnvWorkers):
    """``[collector] kind = "on_policy"`` (and how its envs run: ``EnvWorkers``)."""

    kind: str = kind_field("on_policy")
    rollout_length: int = setting(200, "env steps per env per iteration (T)", positive())
    n_envs: int = setting(20, "environments stepped together", positive())
    compile: str = setting(
        "off", "run each vector step (env step, acting, buffer write) as one compiled graph (torch MPE, "
        "feed-forward networks): on, off, or auto (compile once eager collection has taken as long as the "
        "compile; docs/performance.md)", one_of(compiled.MODES))


@attrs.frozen
class Acting:
    """What the policy and critic chose at one step, before the envs answered."""

    actions: list[torch.Tensor]
    """Per agent ``(E, k_i)``."""
    log_probs: list[torch.Tensor]
    """Per agent ``(E, k_i)`` per-dimension log-probabilities."""
    values: torch.Tensor
    """``(E, *V)`` V(s_t)."""
    hidden: list[torch.Tensor] | None
    """Per agent ``(E, H)`` the actors' GRU states after this step (None: feed-forward)."""
    critic_hidden: torch.Tensor | None
    """The critic's GRU state after this step (None: feed-forward)."""
    extras: dict[str, torch.Tensor] = attrs.field(factory=dict)
    """The policy's own fields of the step record (``StepRecord.extras``)."""


class OnPolicyCollector:
    """Steps the policy in the envs: one ``collect`` is a rollout of the one rollout loop
    (``harl.collect.rollout``) with this collector's actor (``actor(buffer)``: ``OnPolicyActor``); or
    drive it a step at a time, as HARL's runner facades do::

        collector.start(buffer)                         # or buffer.roll_over() for the next rollout
        for t in range(buffer.length):
            acting = collector.act(buffer, t)           # actions, log-probs, values, GRU states
            step = venv.step(collector.env_actions(acting))
            buffer.insert(collector.observe(acting, step))
        collector.finish(buffer)                        # V of the last state
    """

    def __init__(self, config: OnPolicyCollectorConfig, venv: VectorEnv, policy: OnPolicyActors,
                 critic: ValueFunction, device: torch.device, seed: int) -> None:
        self.config = config
        self.venv = venv
        self.policy = policy
        self.critic = critic
        self.device = device
        self.seed = seed
        self.native = is_tensor_native(venv)
        """The env takes and returns torch tensors: no numpy round trip."""
        self.loop = RolloutLoop(venv, seed, config.rollout_length)
        """The one rollout loop (``harl.collect.rollout``): resets, restarts, resumes and steps the envs."""
        self._actor: OnPolicyActor | None = None
        self.compiled: compiled.CompiledCollection | None = None
        """``compile = "on"`` / ``"auto"``: the compiled step, once made (at the first compiled rollout)."""
        self._expected_compile_s: float | None = None

    @property
    def started(self) -> bool:
        return self.loop.started

    @property
    def _eager_s(self) -> float:
        return self.loop.eager_s

    def actor(self, buffer: RolloutBuffer) -> OnPolicyActor:
        """This collector acting into ``buffer``, as the rollout loop drives it (one per buffer)."""
        if self._actor is None or self._actor.buffer is not buffer:
            self._actor = OnPolicyActor(self, buffer)
        return self._actor

    @property
    def steps_per_iteration(self) -> int:
        """Env steps one ``collect`` call takes (T x n_envs)."""
        return self.config.rollout_length * self.config.n_envs

    def state_dict(self) -> dict[str, Any]:
        """How the envs' current episodes began, so a resumed run can begin them again; and, where
        the env gives its whole state (``harl.envs.protocol.VectorEnv.get_state``) and the buffer
        what its next rollout starts from (``RolloutBuffer.carried``), both (``env_state``,
        ``next``), so that a resumed run continues the episodes under way exactly.

        Asked while a ``collect`` was cut short (an env crashed, a second Ctrl-C), or after the
        envs failed to answer it, it does not talk to them (closed, or with a step in flight):
        it returns the state as of the end of the last whole ``collect``, which matches the
        counters saved with it (``RolloutLoop.state_dict``).
        """
        return self.loop.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The first ``collect`` after this continues the saved episodes, or restarts them.

        A checkpoint with the envs' whole state (``env_state``, ``next``; see ``state_dict``)
        restores it where the env takes it (``set_state``): exact at any rollout length.
        Otherwise the saved episodes begin again from their starts: exact when every env was at an
        episode's first step at the checkpoint (as when the rollout length is a multiple of the
        episode length); otherwise those episodes start over.
        """
        self.loop.load_state_dict(state)

    def take_restart(self) -> list[dict[str, Any]] | None:
        """The checkpoint's episode starts the next ``start`` would restart (and forget them):
        for a caller that resets the envs itself (a population, ``harl.population``)."""
        return self.loop.take_restart()

    def take_resume(self) -> dict[str, Any] | None:
        """The checkpoint's whole env state and next rollout start (``env_state``: for the envs'
        ``set_state``, ``next``: for ``carry_in``), or None (and forget them): for a caller that
        restores the envs itself (a population, ``harl.population``)."""
        return self.loop.take_resume()

    def carry_in(self, buffer: RolloutBuffer, carried: dict[str, Any]) -> None:
        """Start the next rollout from a checkpoint's ``next`` (the envs restored by the caller)."""
        self.loop.resumed(self.actor(buffer), carried)

    def start(self, buffer: RolloutBuffer, first: StartRecord | None = None) -> None:
        """Reset the envs (or restart a checkpoint's episodes) and give the buffer their first
        observations; ``first``: the envs were reset by the caller (HARL's runner ``warmup``)."""
        self.loop.start(self.actor(buffer), first)

    @torch.no_grad()
    def act(self, buffer: RolloutBuffer, t: int) -> Acting:
        """The policy's actions and the critic's values at step ``t`` of the rollout in ``buffer``."""
        inputs = buffer.inputs(t)
        carried: dict[str, Any] = {"carried": inputs.extras} if inputs.extras else {}  # the policy's own fields
        sampled = self.policy.sample(inputs.obs, inputs.avail, hidden=inputs.hidden, starts=inputs.starts, **carried)
        extras = getattr(sampled, "extras", None) or {}
        critic_hidden = None
        values = policy_values(self.critic, sampled)  # V(s_t) from the policy's own pass, where it gives one
        if values is None:
            seen = critic_input(self.critic, inputs.obs, inputs.state)
            if inputs.critic_hidden is None:
                values = self.critic.value(seen)
            else:  # the state after step t, before any reset (applied where the next step starts an episode)
                values, critic_hidden = self.critic.step(seen, inputs.critic_hidden, inputs.starts)
        return Acting(sampled.actions, sampled.log_probs, values, sampled.hidden, critic_hidden, extras)

    def env_actions(self, acting: Acting) -> list[Any]:
        """``acting``'s actions as the envs take them: tensors for a tensor-native env, else numpy arrays."""
        return list(acting.actions) if self.native else [a.cpu().numpy() for a in acting.actions]

    @torch.no_grad()
    def observe(self, acting: Acting, step: VectorStep) -> StepRecord:
        """The buffer's record of one step: ``acting`` and what the envs returned for it."""
        terminated = torch.as_tensor(step.terminated)
        truncated = torch.as_tensor(step.truncated)
        ended = terminated | truncated
        starts = ended.float()
        active = torch.as_tensor(step.active, dtype=torch.float32)
        active = torch.where(ended.unsqueeze(-1), torch.ones_like(active), active)
        final_values = None
        if step.episode_infos:  # one per ended episode (VectorStep): no read-back from the device
            final = torch.as_tensor(step.final_state, dtype=torch.float32, device=self.device)
            if hasattr(self.critic, "reads"):  # an independent critic: the agents' pre-reset observations
                if step.final_obs is None:
                    raise ValueError("this vector env gives no final_obs, which an independent critic needs "
                                     "to bootstrap ended episodes; use critic.kind = \"v\"")
                final = critic_input(self.critic, step.final_obs, final)
            if acting.critic_hidden is None:
                final_values = self.critic.value(final)
            else:  # the pre-reset state continues the ended episode: its GRU state, no reset
                final_values = self.critic.value(final, acting.critic_hidden,
                                                 torch.zeros_like(starts, device=acting.critic_hidden.device))
        return StepRecord(
            actions=acting.actions, log_probs=acting.log_probs, values=acting.values, obs=step.obs,
            avail=step.avail, state=step.state, rewards=step.rewards, terminated=terminated,
            truncated=truncated, active=active, starts=starts, hidden=acting.hidden,
            critic_hidden=acting.critic_hidden, final_values=final_values, extras=acting.extras)

    @torch.no_grad()
    def finish(self, buffer: RolloutBuffer) -> None:
        """V of the state after the rollout's last step, for the returns stage to bootstrap from."""
        inputs = buffer.inputs(buffer.length)
        seen = critic_input(self.critic, inputs.obs, inputs.state)
        if inputs.critic_hidden is None:
            buffer.finish(self.critic.value(seen))
        else:
            buffer.finish(self.critic.value(seen, inputs.critic_hidden, inputs.starts))

    @torch.no_grad()
    def collect(self, buffer: RolloutBuffer) -> CollectStats:
        """``rollout_length`` steps of every env into ``buffer``; the episodes that ended."""
        return self.loop.collect(self.actor(buffer))

    def compiled_rollout(self, buffer: RolloutBuffer, eager_s: float) -> Callable[[], list[dict[str, Any]]] | None:
        """This rollout through the compiled step (``[collector] compile``), making it first; None: eager."""
        mode = self.config.compile
        if mode == "off":
            return None
        if self.compiled is not None and self.compiled.buffer is buffer:
            return self.compiled.rollout
        hidden = getattr(self.policy, "hidden_size", 0) or getattr(self.critic, "hidden_size", 0)
        if not compiled.compilable(self.venv) or hidden or not isinstance(buffer, RolloutBuffer):
            if mode == "on":  # config checks refuse these first; a user's own stages can still get here
                raise ConfigError(compiled.compile_problem(getattr(getattr(self.venv, "config", None), "kind", "?"),
                                                           bool(hidden), False, "inline")
                                  or "collector.compile: this collector's buffer is not a rollout buffer")
            return None
        if mode == "auto":
            if self._expected_compile_s is None:
                sig = compiled.signature(self.venv, self.policy, self.critic, buffer.length)
                recorded = compiled.recorded_compile_s(sig)
                self._expected_compile_s = compiled.COLD_COMPILE_S if recorded is None else recorded
            if not compiled.should_compile(mode, eager_s, self._expected_compile_s):
                return None
        self.compiled = compiled.CompiledCollection(self.venv, self.policy, self.critic, buffer)
        return self.compiled.rollout

    def close(self) -> None:
        self.venv.close()


class OnPolicyActor:
    """An ``OnPolicyCollector`` acting into one rollout buffer (``harl.collect.actor.Actor``): the policy's
    actions and the critic's values at each step, the step's record into the buffer, V of the last state."""

    def __init__(self, collector: OnPolicyCollector, buffer: RolloutBuffer) -> None:
        self.collector = collector
        self.buffer = buffer
        self.t = 0
        self.acting: Acting | None = None

    def observe_first(self, first: StartRecord) -> None:
        self.buffer.start(first)
        self.t = 0

    def roll_over(self) -> None:
        self.buffer.roll_over()
        self.t = 0

    def select_action(self) -> list[Any]:
        self.acting = self.collector.act(self.buffer, self.t)
        return self.collector.env_actions(self.acting)

    def observe(self, step: VectorStep) -> None:
        assert self.acting is not None, "select_action() first"
        self.buffer.insert(self.collector.observe(self.acting, step))
        self.t += 1

    def end_rollout(self) -> None:
        self.collector.finish(self.buffer)

    def abandon(self) -> None:
        pass

    def carried(self) -> dict[str, Any] | None:
        carried = getattr(self.buffer, "carried", None)
        return None if carried is None else carried()

    def carry_in(self, carried: dict[str, Any]) -> None:
        self.buffer.carry_in(carried)
        self.t = 0

    def compiled(self, eager_s: float) -> Callable[[], list[dict[str, Any]]] | None:
        return self.collector.compiled_rollout(self.buffer, eager_s)


def collector_checks(config: OnPolicyCollectorConfig, built: Any) -> Iterator[tuple[list[str], str]]:
    """``backend_checks``, and what ``compile`` needs of the pipeline."""
    yield from backend_checks(config, built)
    if config.compile == "on":
        env, policy = built.get("env"), built.get("policy")
        problem = compiled.compile_problem(getattr(env, "kind", "?"), getattr(policy, "recurrent", "none") != "none",
                                           False, config.backend)
        if problem is not None:
            yield (["collector", "compile"], problem)


register("collector", OnPolicyCollectorConfig, family="on_policy", default=True, check=collector_checks,
         factory=lambda config, parts: OnPolicyCollector(config, parts.venv, parts.policy, parts.critic,
                                                          parts.device, seed=parts.env_seed))
