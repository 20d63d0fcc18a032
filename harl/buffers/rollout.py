"""Fixed-length on-policy storage: T steps of n_envs environments, per agent.

Layout (E = n_envs, A = agents, V = () for EP state or (A,) for FP state)::

    obs[i]        (T+1, E, obs_dim_i)      avail[i]   (T+1, E, n_actions_i) or None
    actions[i]    (T, E, k_i)              log_probs[i] (T, E, k_i)   per action dimension
    state         (T+1, E, state_dim)      active     (T+1, E, A)   agent alive
    rewards       (T, E, A)                terminated / truncated (T, E)
    values        (T+1, E, *V)             final_values (T, E, *V)  V(pre-reset state) at episode ends
    advantages / returns (T, E, *V)        float32, set by the returns stage through ``set_targets``
    starts        (T+1, E)                 1 where step t is an episode's first
    hidden[i]     (T+1, E, H)              recurrent actors only: GRU state before step t
    critic_hidden (T+1, E, *V, H)          recurrent critic only: its GRU state before step t
    extras[name]  (T+1, E, *shape)         a policy's own record fields (``record_fields``): slot t+1
                                           what step t's record gave, which step t+1's inputs hold

Slot T+1 holds the observation after the last step; ``roll_over`` moves it to slot 0 so
the next rollout continues the same episodes (and the GRU states and the policy's own fields carry
over with them).

Writers use the declared interface only (``harl.buffers.records``): a collector calls
``start(StartRecord)`` or ``roll_over()``, then ``insert(StepRecord)`` once per step, then
``finish(last_values)``; a returns stage (harl's ``gae`` or your own) reads ``critic_rewards()``,
``values``, ``next_values``, ``terminated``, ``truncated`` and hands back its results with
``set_targets(advantages, returns)``: two float32 tensors of shape ``(T, E)`` (EP state) or
``(T, E, A)`` (FP state), on the buffer's device.

For recurrent actors ``agent_batch`` cuts each env's T steps into sequences of
``sequence_length`` steps (T for naive recurrent training, ``chunk_length`` for chunked),
each with the GRU state stored before its first step; a sequence may run across an
episode boundary because ``starts`` resets the state there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch
from gymnasium import spaces

from harl.buffers.records import FieldSpec, StartRecord, StepInputs, StepRecord
from harl.nets.heads import action_width, avail_size
from harl.nets.image import storage_dtype
from harl.policy.on_policy import with_agent_id
from harl.registry import register
from harl.settings import kind_field, one_of, setting
from harl.sizes import check_rollout, record_field_bytes, rollout_bytes_per_step


@attrs.frozen
class RolloutConfig:
    """``[buffer] kind = "rollout"``: on-policy storage, sized by the collector's rollout."""

    kind: str = kind_field("rollout")
    fp_advantage_norm: str = setting(
        "joint", "FP state: standardise advantages over all agents' active samples together (joint, HARL) "
        "or over each agent's own (per_agent)", one_of(("joint", "per_agent")))


@attrs.frozen
class AgentBatch:
    """One agent's view of a rollout, flattened to N = T * E samples."""

    obs: torch.Tensor
    actions: torch.Tensor
    old_log_probs: torch.Tensor
    avail: torch.Tensor | None
    active: torch.Tensor
    """(N, 1) float: 1 where the agent was alive."""
    advantages: torch.Tensor
    """(N, 1), normalised over this agent's active samples."""
    hidden: torch.Tensor | None = None
    """Recurrent actors: (B, H) GRU state before each of the B sequences; rows are then
    sequence-major (row b * L + t, L = N / B).  None for feed-forward actors."""
    starts: torch.Tensor | None = None
    """Recurrent actors: (N,) 1 where a row is an episode's first step."""

    @property
    def size(self) -> int:
        return int(self.obs.shape[0])

    @property
    def sequence_length(self) -> int:
        """Steps per sequence (1 for feed-forward batches: every row stands alone)."""
        return 1 if self.hidden is None else self.size // int(self.hidden.shape[0])

    def select(self, rows: torch.Tensor) -> AgentBatch:
        """The sub-batch of ``rows`` (for recurrent batches: whole sequences, as ``minibatch_rows`` gives)."""
        hidden = None
        if self.hidden is not None:
            hidden = self.hidden[rows[:: self.sequence_length] // self.sequence_length]
        return AgentBatch(
            obs=self.obs[rows], actions=self.actions[rows], old_log_probs=self.old_log_probs[rows],
            avail=None if self.avail is None else self.avail[rows], active=self.active[rows],
            advantages=self.advantages[rows], hidden=hidden,
            starts=None if self.starts is None else self.starts[rows],
        )


def minibatch_rows(batch: AgentBatch, count: int, generator: torch.Generator) -> list[torch.Tensor]:
    """Row indices of ``count`` minibatches of one shuffled pass over ``batch``.

    Feed-forward: a permutation of the rows.  Recurrent: a permutation of the sequences,
    each minibatch holding whole sequences in time order.
    """
    length = batch.sequence_length
    units = batch.size // length
    perm = torch.randperm(units, generator=generator)
    size = max(1, units // count)
    chunks = [perm[k * size:(k + 1) * size] for k in range(count)]
    if length > 1:
        steps = torch.arange(length)
        chunks = [(c.unsqueeze(-1) * length + steps).reshape(-1) for c in chunks]
    return [c.to(batch.obs.device) for c in chunks]


class RolloutBuffer:
    def __init__(self, observation_spaces: Sequence[spaces.Box], action_spaces: Sequence[spaces.Space],
                 state_dim: int, n_envs: int, length: int, fp_state: bool,
                 device: torch.device | str = "cpu", hidden_size: int = 0,
                 sequence_length: int = 0, critic_hidden_size: int = 0, fp_advantage_norm: str = "joint",
                 state_space: spaces.Box | None = None, critic_reads: Any = None, agent_ids: int = 0,
                 record_fields: Mapping[str, FieldSpec] | None = None) -> None:
        """``hidden_size`` > 0 stores the actors' GRU states, ``critic_hidden_size`` > 0 the
        critic's; ``sequence_length`` (a divisor of ``length``) cuts them.  Observations keep
        their space's shape; uint8 images (and a uint8 image ``state_space``) stay uint8.
        ``critic_reads(obs, state)``: what the critic reads instead of the state (an independent
        critic's stacked observations, ``harl.update.independent_v``); ``critic_batch`` applies it.
        ``agent_ids`` > 0 (``[policy] agent_id``, the agent count): agent batches hold each observation
        flattened with the agent's one-hot id appended, as the shared actor reads it.
        ``record_fields``: the policy's own step-record fields (``StepRecord.extras``), stored by name."""
        self.fp_advantage_norm = fp_advantage_norm
        self.agent_ids = agent_ids
        self.critic_reads = critic_reads
        T, E, A = length, n_envs, len(action_spaces)
        if (hidden_size or critic_hidden_size) and (sequence_length <= 0 or T % sequence_length):
            raise ValueError(f"sequence_length must divide the rollout length {T}, got {sequence_length}")
        self.sequence_length = sequence_length
        self.length, self.n_envs, self.n_agents, self.fp_state = T, E, A, fp_state
        self.device = torch.device(device)
        f32: dict[str, Any] = dict(dtype=torch.float32, device=self.device)
        vshape = (E, A) if fp_state else (E,)
        self.obs = [torch.zeros(T + 1, E, *s.shape, dtype=storage_dtype(s), device=self.device)
                    for s in observation_spaces]
        self.avail = [torch.ones(T + 1, E, avail_size(s), **f32) if avail_size(s) else None
                      for s in action_spaces]
        self.actions = [torch.zeros(T, E, action_width(s), **f32) for s in action_spaces]
        self.log_probs = [torch.zeros(T, E, action_width(s), **f32) for s in action_spaces]
        self.state = (torch.zeros(T + 1, E, state_dim, **f32) if state_space is None else
                      torch.zeros(T + 1, E, *state_space.shape, dtype=storage_dtype(state_space), device=self.device))
        self.active = torch.ones(T + 1, E, A, **f32)
        self.rewards = torch.zeros(T, E, A, **f32)
        self.terminated = torch.zeros(T, E, dtype=torch.bool, device=self.device)
        self.truncated = torch.zeros(T, E, dtype=torch.bool, device=self.device)
        self.values = torch.zeros(T + 1, *vshape, **f32)
        self.final_values = torch.zeros(T, *vshape, **f32)
        self.advantages = torch.zeros(T, *vshape, **f32)
        self.returns = torch.zeros(T, *vshape, **f32)
        self.starts = torch.ones(T + 1, E, **f32)
        self.hidden = ([torch.zeros(T + 1, E, hidden_size, **f32) for _ in action_spaces]
                       if hidden_size else None)
        self.critic_hidden = (torch.zeros(T + 1, *vshape, critic_hidden_size, **f32)
                              if critic_hidden_size else None)
        self.fills = {name: fill for name, (_, _, fill) in (record_fields or {}).items()}
        self.extras = {name: torch.full((T + 1, E, *shape), fill, dtype=dtype, device=self.device)
                       for name, (shape, dtype, fill) in (record_fields or {}).items()}
        self.step = 0
        """The step the next ``insert`` writes (0 after ``start`` and ``roll_over``)."""

    def start(self, record: StartRecord) -> None:
        """Slot 0 from the envs' first observations: every episode begins, GRU states zero."""
        for i, o in enumerate(record.obs):
            self.obs[i][0].copy_(torch.as_tensor(o))
            if record.avail is not None and self.avail[i] is not None:
                self.avail[i][0].copy_(torch.as_tensor(record.avail[i]))  # type: ignore[index]
        self.state[0].copy_(torch.as_tensor(record.state))
        self.active[0].fill_(1.0)
        self.starts[0].fill_(1.0)
        for h in self.hidden or []:
            h[0].zero_()
        if self.critic_hidden is not None:
            self.critic_hidden[0].zero_()
        for name, x in self.extras.items():
            x[0].fill_(self.fills[name])
        self.step = 0

    def inputs(self, t: int) -> StepInputs:
        """What the team and critic act on at step ``t`` (views of the stored slots)."""
        return StepInputs(
            obs=[o[t] for o in self.obs], avail=[None if a is None else a[t] for a in self.avail],
            state=self.state[t], starts=self.starts[t],
            hidden=None if self.hidden is None else [h[t] for h in self.hidden],
            critic_hidden=None if self.critic_hidden is None else self.critic_hidden[t],
            extras={name: x[t] for name, x in self.extras.items()})

    def insert(self, record: StepRecord) -> None:
        """Store step ``self.step`` and the observation after it (slot ``t + 1``)."""
        t = self.step
        if t >= self.length:
            raise IndexError(f"the rollout holds {self.length} steps; call roll_over() before inserting more")
        self.write(t, record)
        self.step = t + 1

    def write(self, t: int | torch.Tensor, record: StepRecord) -> None:
        """Store ``record`` as step ``t``; ``step`` is left as it was (see ``write_fields``)."""
        self.write_fields(t, record.actions, record.log_probs, record.values, record.obs, record.avail,
                          record.state, record.rewards, record.terminated, record.truncated, record.active,
                          record.starts, record.hidden, record.critic_hidden, record.final_values, record.extras)

    def write_fields(self, t: int | torch.Tensor, actions: Sequence[Any], log_probs: Sequence[Any], values: Any,
                     obs: Sequence[Any], avail: Sequence[Any] | None, state: Any, rewards: Any, terminated: Any,
                     truncated: Any, active: Any, starts: Any, hidden: Sequence[Any] | None = None,
                     critic_hidden: Any = None, final_values: Any = None,
                     extras: Mapping[str, Any] | None = None) -> None:
        """A ``StepRecord``'s fields (as there) stored as step ``t``: an int, or a ``(1,)`` int64 tensor,
        the compiled collection step's index (a graph takes it without recompiling per step, and
        builds no record object)."""
        if isinstance(t, int):
            def put(x: torch.Tensor, offset: int, value: Any) -> None:
                x[t + offset].copy_(torch.as_tensor(value))
        else:
            def put(x: torch.Tensor, offset: int, value: Any) -> None:
                x.index_copy_(0, t + offset, torch.as_tensor(value).to(x.dtype).unsqueeze(0))
        put(self.values, 0, values)
        if self.critic_hidden is not None and critic_hidden is not None:
            put(self.critic_hidden, 1, critic_hidden)
        for i in range(self.n_agents):
            put(self.actions[i], 0, actions[i])
            put(self.log_probs[i], 0, log_probs[i])
            put(self.obs[i], 1, obs[i])
            mask = self.avail[i]
            if avail is not None and mask is not None:
                put(mask, 1, avail[i])
        put(self.state, 1, state)
        put(self.rewards, 0, rewards)
        put(self.terminated, 0, terminated)
        put(self.truncated, 0, truncated)
        put(self.starts, 1, starts)
        for h, new in zip(self.hidden or [], hidden or []):
            put(h, 1, new)
        put(self.active, 1, active)
        if final_values is not None:
            put(self.final_values, 0, final_values)
        for name, value in (extras or {}).items():
            if name not in self.extras:
                raise KeyError(f"the step record has a field {name!r} the buffer was not built to store "
                               f"(the policy's record_fields: {sorted(self.extras)})")
            put(self.extras[name], 1, value)

    def written(self, steps: int) -> None:
        """``steps`` steps were stored by ``write`` (the compiled collection step): the next
        ``insert`` writes step ``steps``."""
        if not 0 <= steps <= self.length:
            raise IndexError(f"the rollout holds {self.length} steps, not {steps}")
        self.step = steps

    def finish(self, last_values: torch.Tensor) -> None:
        """V of the state after the last step ``(E, *V)``: the bootstrap of the rollout's returns."""
        self.values[-1] = last_values

    def set_targets(self, advantages: torch.Tensor, returns: torch.Tensor) -> None:
        """A returns stage's results: advantages and value targets, each ``(T, E, *V)`` float32."""
        expected = tuple(self.advantages.shape)
        for name, x in (("advantages", advantages), ("returns", returns)):
            if tuple(x.shape) != expected:
                raise ValueError(f"set_targets: {name} has shape {tuple(x.shape)}, expected {expected}")
        self.advantages = advantages
        self.returns = returns

    @property
    def n_samples(self) -> int:
        return self.length * self.n_envs

    def critic_rewards(self) -> torch.Tensor:
        """The critic's reward: per agent for FP, the agents' mean (the team reward) for EP."""
        return self.rewards if self.fp_state else self.rewards.mean(-1)

    @property
    def next_values(self) -> torch.Tensor:
        """V of the state reached after each step: the pre-reset state where an episode ended."""
        ended = self.terminated | self.truncated
        if self.fp_state:
            ended = ended.unsqueeze(-1)
        return torch.where(ended, self.final_values, self.values[1:])

    def roll_over(self) -> None:
        """Carry the last observation into slot 0 for the next rollout."""
        for x in (*self.obs, *[a for a in self.avail if a is not None], self.state, self.active,
                  self.values, self.starts, *(self.hidden or []),
                  *([] if self.critic_hidden is None else [self.critic_hidden]), *self.extras.values()):
            x[0].copy_(x[-1])
        self.step = 0

    def _carried_slots(self) -> dict[str, torch.Tensor]:
        named = {f"obs{i}": o for i, o in enumerate(self.obs)}
        named.update({f"avail{i}": a for i, a in enumerate(self.avail) if a is not None})
        named.update({"state": self.state, "active": self.active, "values": self.values, "starts": self.starts})
        named.update({f"hidden{i}": h for i, h in enumerate(self.hidden or [])})
        if self.critic_hidden is not None:
            named["critic_hidden"] = self.critic_hidden
        named.update({f"extra_{name}": x for name, x in self.extras.items()})
        return named

    def carried(self) -> dict[str, torch.Tensor]:
        """What ``roll_over`` carries into the next rollout (the last slot: observations, state,
        masks, GRU states, ...), copied to the CPU: a checkpoint's record of where the next rollout
        starts, for ``carry_in``."""
        return {name: x[-1].detach().cpu().clone() for name, x in self._carried_slots().items()}

    def carry_in(self, carried: dict[str, torch.Tensor]) -> None:
        """Slot 0 from ``carried()`` of a buffer of the same layout, as ``roll_over`` would set it; a
        policy field it lacks (saved before the field was recorded) is set as no step had written it."""
        slots = self._carried_slots()
        missing = {f"extra_{name}" for name in self.extras} - carried.keys()
        if carried.keys() | missing != slots.keys():
            raise ValueError(f"carry_in: expected the slots {sorted(slots)}, got {sorted(carried)}")
        for name, x in slots.items():
            if name in missing:
                x[0].fill_(self.fills[name[len("extra_"):]])
            else:
                x[0].copy_(carried[name])
        self.step = 0

    def normalized_advantages(self, agent: int) -> torch.Tensor:
        """(T, E) advantages for one agent, standardised over its active samples (EP, FP per_agent),
        or, FP joint, over all agents' active samples with HARL's population std."""
        if self.fp_state and self.fp_advantage_norm == "joint":
            chosen = self.advantages[self.active[:-1] > 0]
            if chosen.numel() < 2:
                return self.advantages[..., agent] - self.advantages.mean()
            mean, std = chosen.mean(), chosen.std(correction=0)
            return (self.advantages[..., agent] - mean) / (std + 1e-5)
        adv = self.advantages[..., agent] if self.fp_state else self.advantages
        mask = self.active[:-1, :, agent] > 0
        chosen = adv[mask]
        if chosen.numel() < 2:
            return adv - adv.mean()
        return (adv - chosen.mean()) / (chosen.std() + 1e-5)

    def agent_batch(self, agent: int) -> AgentBatch:
        n = self.n_samples
        avail = self.avail[agent]
        if self.hidden is not None:
            return self._sequence_batch(agent)
        return AgentBatch(
            obs=self.actor_obs(agent).reshape(n, -1),
            actions=self.actions[agent].reshape(n, -1),
            old_log_probs=self.log_probs[agent].reshape(n, -1),
            avail=None if avail is None else avail[:-1].reshape(n, -1),
            active=self.active[:-1, :, agent].reshape(n, 1),
            advantages=self.normalized_advantages(agent).reshape(n, 1),
        )

    def actor_obs(self, agent: int) -> torch.Tensor:
        """(T, E, ...) what agent ``agent``'s actor read at each step: its observation, or with
        ``agent_ids`` the flat observation and the agent's one-hot id."""
        obs = self.obs[agent][:-1]
        if not self.agent_ids:
            return obs
        return with_agent_id(obs.reshape(*obs.shape[:2], -1), agent, self.agent_ids)

    def recorded(self, name: str) -> torch.Tensor:
        """``(T * E, *shape)`` what each step's record gave for the policy's field ``name``
        (``StepRecord.extras``), in the row order of ``agent_batch``."""
        return self.agent_rows(self.extras[name][1:])

    def agent_rows(self, x: torch.Tensor) -> torch.Tensor:
        """``(T, E, ...)`` -> ``(T * E, ...)`` in the row order of ``agent_batch`` (sequence-major for
        recurrent actors): for a value computed per step that an agent batch should carry."""
        T, E = self.length, self.n_envs
        if self.hidden is None:
            return x.reshape(T * E, *x.shape[2:])
        L = self.sequence_length
        return x.reshape(T // L, L, E, *x.shape[2:]).transpose(1, 2).reshape(T * E, *x.shape[2:])

    def _sequence_batch(self, agent: int) -> AgentBatch:
        """One agent's samples as (T / L) * E sequences of L steps, sequence-major."""
        T, E, L = self.length, self.n_envs, self.sequence_length

        def seq(x: torch.Tensor) -> torch.Tensor:
            """(T, E, ...) -> (T/L * E * L, ...): chunk c of env e is sequence c * E + e."""
            tail = x.shape[2:]
            return x.reshape(T // L, L, E, *tail).transpose(1, 2).reshape(T * E, *tail)

        avail = self.avail[agent]
        assert self.hidden is not None
        return AgentBatch(
            obs=seq(self.actor_obs(agent)),
            actions=seq(self.actions[agent]),
            old_log_probs=seq(self.log_probs[agent]),
            avail=None if avail is None else seq(avail[:-1]),
            active=seq(self.active[:-1, :, agent]).unsqueeze(-1),
            advantages=seq(self.normalized_advantages(agent)).unsqueeze(-1),
            hidden=self.hidden[agent][:-1:L].reshape(T // L * E, -1),
            starts=seq(self.starts[:-1]),
        )

    def critic_batch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                    torch.Tensor | None, torch.Tensor | None]:
        """(states, old values, returns, GRU states, starts) flattened over T * E.

        Feed-forward critic: the last two are None.  Recurrent critic: rows are the
        ``sequence_length`` sequences of ``agent_batch`` (sequence-major), with the critic's
        (B, [A,] H) GRU state before each sequence and the (N,) episode starts.
        """
        n = self.n_samples
        tail = (self.n_agents,) if self.fp_state else ()
        seen = (self.state[:-1] if self.critic_reads is None else
                self.critic_reads([o[:-1] for o in self.obs], self.state[:-1]))
        if self.critic_hidden is not None:
            T, E, L = self.length, self.n_envs, self.sequence_length

            def seq(x: torch.Tensor) -> torch.Tensor:
                rest = x.shape[2:]
                return x.reshape(T // L, L, E, *rest).transpose(1, 2).reshape(T * E, *rest)

            hidden = self.critic_hidden[:-1:L].reshape(T // L * E, *self.critic_hidden.shape[2:])
            return (seq(seen), seq(self.values[:-1]), seq(self.returns), hidden, seq(self.starts[:-1]))
        rows = seen.reshape(n, -1) if self.critic_reads is None else seen.reshape(n, *seen.shape[2:])
        return (rows, self.values[:-1].reshape(n, *tail),
                self.returns.reshape(n, *tail), None, None)


def _rollout_buffer(config: RolloutConfig, parts: Any) -> RolloutBuffer:
    w = parts.wiring
    per_agent = w.fp_state or getattr(parts.critic, "per_agent_values", False)  # FP state, independent critics
    check_rollout(rollout_bytes_per_step(parts.obs_spaces, parts.act_spaces, parts.state_dim, per_agent,
                                         parts.policy.hidden_size, parts.critic.hidden_size, parts.state_space,
                                         record_field_bytes(getattr(parts.policy, "record_fields", None))),
                  w.rollout_length, w.n_envs, parts.source, parts.device)
    return RolloutBuffer(parts.obs_spaces, parts.act_spaces, parts.state_dim, w.n_envs, w.rollout_length,
                         fp_state=per_agent, device=parts.device, critic_reads=getattr(parts.critic, "reads", None),
                         fp_advantage_norm=config.fp_advantage_norm, hidden_size=parts.policy.hidden_size,
                         critic_hidden_size=parts.critic.hidden_size, sequence_length=w.sequence_length,
                         state_space=parts.state_space,
                         agent_ids=parts.n_agents if getattr(parts.policy, "agent_ids", False) else 0,
                         record_fields=getattr(parts.policy, "record_fields", None))


register("buffer", RolloutConfig, _rollout_buffer, family="on_policy", default=True)
