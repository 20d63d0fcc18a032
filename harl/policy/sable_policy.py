"""harl's policy over Sable's network (``harl.nets.sable``): what the on-policy stages ask of a team.

``sample`` is one collection step of the whole team, as Mava's ``get_actions``: the encoder reads
every agent at once and gives each a value, the decoder acts agent by agent (env order, agent 0
first), and the retention states move on by one timestep.  The recurrent variant (``memory``,
Mava's rec_sable) carries those states from step to step and across rollouts as fields of the
step record (``record_fields``: the rollout buffer stores them, hands each step the one before it,
carries them over rollouts and checkpoints, and gives the update the states its rollout began
from); where a step begins an episode the network starts from zero (``starts``).  The
feed-forward variant (Mava's ff_sable) starts every step from zero and records nothing.

With ``positional_encoding`` (Mava's ``timestep_positional_encoding``, the recurrent variant's only)
the network adds a sinusoid of each env's step count in its episode to retention's inputs; the count
is one more step-record field (``STEP_FIELD``): 0 where a step begins an episode, else the previous
step's plus one, so the update reads each step's count as collection used it.

Observations are stacked ``(E, A, d)``, zero-padded to the widest, with each agent's one-hot id
appended where ``agent_id`` is on (Mava's ``add_agent_id``).  Box actions: the buffer keeps
per-dimension log-probabilities ``(E, k)``; Sable's Gaussian gives one per agent, stored in the
first column with zeros after it, so a sum over the dimensions is the agent's log-probability.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch
from gymnasium import spaces
from torch import nn

from harl.errors import ConfigError
from harl.nets.sable.network import SableHidden, SableNetwork
from harl.nets.sable.retention import network_hidden_shape

FIELDS = tuple(f"sable_{name}" for name in SableHidden._fields)
"""The step record's fields of a recurrent Sable: its three retention states after the step."""
STEP_FIELD = "sable_step_count"
"""The step record's field of a recurrent Sable with the timestep encoding: each env's step count in its
episode at the step (0 at an episode's first step; Mava's ``Observation.step_count``)."""


class SableCarry(NamedTuple):
    """What a recurrent Sable with the timestep encoding carries from step to step outside collection
    (``act``'s hidden): the network's states and each env's step count at the last step."""

    network: SableHidden
    steps: torch.Tensor
    """``(E,)`` int64, the step count of the step just taken."""


class SableSample(NamedTuple):
    """One step of the team as ``sample`` draws it (what the on-policy collector reads)."""

    actions: list[torch.Tensor]
    """Per agent ``(E, k)``."""
    log_probs: list[torch.Tensor]
    """Per agent ``(E, k)``: the log-probability in the first column (see the module docstring)."""
    hidden: None
    """No GRU state: the retention states travel in ``extras``."""
    values: torch.Tensor
    """``(E, A)`` the encoder's values (env units: Sable normalises no values)."""
    extras: dict[str, torch.Tensor]
    """The recurrent variant's states after this step (``FIELDS``); nothing for the feed-forward one."""


def record_fields(memory: bool, n_head: int, n_block: int, embed_dim: int, positional_encoding: bool
                  ) -> dict[str, tuple[tuple[int, ...], torch.dtype, float]]:
    """A Sable policy's step-record fields (its ``record_fields``; ``harl.sizes`` counts them from the
    config): the recurrent variant's three states, each ``(n_head, n_block, hs, hs)`` float32 per env, and
    with the timestep encoding one int64 step count; the feed-forward variant's: none."""
    if not memory:
        return {}
    shape = network_hidden_shape(1, n_head, n_block, embed_dim)[1:]
    fields: dict[str, tuple[tuple[int, ...], torch.dtype, float]] = {name: (shape, torch.float32, 0.0)
                                                                      for name in FIELDS}
    if positional_encoding:
        fields[STEP_FIELD] = ((), torch.int64, 0)
    return fields


def _team_spaces(observation_spaces: Sequence[spaces.Space], action_spaces: Sequence[spaces.Space]
                 ) -> tuple[int, int, bool]:
    """(widest observation, action width, discrete) of a team whose agents share one action space."""
    first = action_spaces[0]
    if any(a != first for a in action_spaces):
        raise ConfigError("Sable decodes every agent with one action head: the agents must share one action "
                          "space (one Discrete, or one flat Box)")
    if isinstance(first, spaces.Discrete):
        return max(int(spaces.flatdim(o)) for o in observation_spaces), int(first.n), True
    if isinstance(first, spaces.Box) and len(first.shape) == 1:
        return max(int(spaces.flatdim(o)) for o in observation_spaces), int(first.shape[0]), False
    raise ConfigError(f"Sable acts in a Discrete or a flat Box action space, not {first}")


class SablePolicy(SableNetwork):
    """Sable's network as the pipeline's policy; ``memory`` picks rec_sable (true) or ff_sable."""

    hidden_size = 0
    """No GRU state in the rollout buffer's ``hidden`` (the recurrent states are record fields)."""

    def __init__(self, observation_spaces: Sequence[spaces.Space], action_spaces: Sequence[spaces.Space],
                 memory: bool = True, agent_id: bool = True, n_block: int = 1, embed_dim: int = 64,
                 n_head: int = 1, decay_scaling_factor: float = 0.8, positional_encoding: bool = False,
                 chunk_timesteps: int | None = None, chunk_agents: int | None = None,
                 causal_chunks: bool = False) -> None:
        width, action_dim, discrete = _team_spaces(observation_spaces, action_spaces)
        n_agents = len(action_spaces)
        self.obs_width = width
        if positional_encoding and not memory:
            raise ConfigError("the timestep encoding encodes each step's place in its episode for the recurrent "
                              "Sable (memory = true); the feed-forward one has none (Mava encodes rec_sable only)")
        super().__init__(width + (n_agents if agent_id else 0), action_dim, n_agents, discrete, n_block,
                         embed_dim, n_head, decay_scaling_factor, positional_encoding, chunk_timesteps, chunk_agents,
                         causal_chunks)
        self.memory, self.agent_id = memory, agent_id
        self.positional_encoding = positional_encoding
        self.bootstrap_hidden: SableHidden | None = None
        """The states after the latest ``sample`` (before any reset): what V of the state it reached reads."""
        self.bootstrap_steps: torch.Tensor | None = None
        """``(E,)`` the step count of the state the latest ``sample`` reached (its step's plus one)."""

    @property
    def record_fields(self) -> dict[str, tuple[tuple[int, ...], torch.dtype, float]]:
        """The recurrent variant's three states, each ``(n_head, n_block, hs, hs)`` per env, zero at first."""
        return record_fields(self.memory, self.n_head, self.n_block, self.embed_dim, self.positional_encoding)

    @property
    def actors(self) -> list[nn.Module]:
        """The networks one learner trains: the whole of Sable (one learner, one optimiser)."""
        return [self]

    def initial_hidden(self, n_envs: int, device: Any = "cpu"  # type: ignore[override]
                       ) -> SableHidden | SableCarry | None:
        """Zero states for acting outside collection (evaluation, render); None: feed-forward; with the
        timestep encoding, the states and a step count (``SableCarry``)."""
        if not self.memory:
            return None
        if self.positional_encoding:
            return SableCarry(self.zero_hidden(n_envs), torch.zeros(n_envs, dtype=torch.long,
                                                                     device=self.enc_ln.weight.device))
        return self.zero_hidden(n_envs)

    def zero_hidden(self, batch: int) -> SableHidden:
        return SableNetwork.initial_hidden(self, batch)

    def export_actors(self) -> list[nn.Module]:
        raise ConfigError("Sable's agents act through one network, decoding one agent after another; its agents "
                          "have no modules of their own to export")

    def stack_obs(self, obs: Sequence[Any]) -> torch.Tensor:
        """Per-agent ``(..., d_i)`` -> ``(..., A, d)``: zero-padded to the widest, the agent's id appended."""
        device = self.enc_ln.weight.device
        rows = [torch.as_tensor(o, dtype=torch.float32, device=device) for o in obs]
        rows = [nn.functional.pad(o, (0, self.obs_width - o.shape[-1])) for o in rows]
        x = torch.stack(rows, -2)
        if self.agent_id:
            ids = torch.eye(self.n_agents, device=device).expand(*x.shape[:-1], self.n_agents)
            x = torch.cat([x, ids], -1)
        return x

    def stack_avail(self, avail: Sequence[Any] | None) -> torch.Tensor | None:
        """Per-agent ``(E, n)`` masks -> ``(E, A, n)`` (None: a Box, or an agent without a mask)."""
        if avail is None or not self.discrete or any(a is None for a in avail):
            return None
        device = self.enc_ln.weight.device
        return torch.stack([torch.as_tensor(a, dtype=torch.float32, device=device) for a in avail], -2)

    def _starts(self, starts: Any, n_envs: int, device: torch.device) -> torch.Tensor:
        """The step's episode starts ``(E,)``; the feed-forward variant begins afresh every step."""
        if not self.memory:
            return torch.ones(n_envs, dtype=torch.bool, device=device)
        if starts is None:
            raise ConfigError("a recurrent Sable (updater.objective.memory = true) resets its retention states "
                              "where an episode begins, so it needs the episode-start mask (starts) with every "
                              "step; this caller gave none. Pass it, or set updater.objective.memory = false "
                              "(ff_sable)")
        return torch.as_tensor(starts, device=device).reshape(n_envs).bool()

    def step_counts(self, previous: torch.Tensor | None, starts: torch.Tensor) -> torch.Tensor | None:
        """``(E,)`` each env's step count at this step: 0 where ``starts``, else ``previous`` + 1;
        None without the timestep encoding."""
        if not self.positional_encoding:
            return None
        before = torch.zeros_like(starts, dtype=torch.long) if previous is None else previous.to(starts.device).long()
        return torch.where(starts, torch.zeros_like(before), before + 1)

    def per_agent(self, steps: torch.Tensor | None) -> torch.Tensor | None:
        """``(E,)`` step counts -> ``(E, A)``: every agent of an env shares its step (Mava repeats it)."""
        return None if steps is None else steps[:, None].expand(-1, self.n_agents)

    def _hidden_in(self, carried: Mapping[str, torch.Tensor] | None, n_envs: int) -> SableHidden:
        if not self.memory or not carried or FIELDS[0] not in carried:
            return self.zero_hidden(n_envs)
        return SableHidden(*(carried[name].to(self.enc_ln.weight.device) for name in FIELDS))

    def per_dimension(self, actions: torch.Tensor, log_probs: torch.Tensor) -> tuple[list[torch.Tensor],
                                                                                     list[torch.Tensor]]:
        """``(E, A[, k])`` actions and ``(E, A)`` log-probs -> per agent ``(E, k)`` each, as the buffer stores them."""
        width = 1 if self.discrete else self.action_dim
        acts = actions.unsqueeze(-1) if self.discrete else actions
        logp = nn.functional.pad(log_probs.unsqueeze(-1), (0, width - 1))
        return list(acts.float().unbind(1)), list(logp.unbind(1))

    @torch.no_grad()
    def sample(self, obs: Sequence[Any], avail: Sequence[Any] | None, deterministic: bool = False,
               hidden: Any = None, starts: Any = None, carried: Mapping[str, torch.Tensor] | None = None
               ) -> SableSample:
        """One collection step of every agent in every env (the module docstring); ``carried`` the
        states the step before recorded (the rollout buffer's ``StepInputs.extras``)."""
        x = self.stack_obs(obs)
        n_envs = x.shape[0]
        begins = self._starts(starts, n_envs, x.device)
        steps = self.step_counts(None if carried is None else carried.get(STEP_FIELD), begins)
        out = SableNetwork.act(self, x, self._hidden_in(carried, n_envs), begins, self.stack_avail(avail),
                               deterministic, step_count=self.per_agent(steps))
        self.bootstrap_hidden = out.hidden if self.memory else None
        self.bootstrap_steps = None if steps is None else steps + 1
        extras = dict(zip(FIELDS, out.hidden, strict=True)) if self.memory else {}
        if steps is not None:
            extras[STEP_FIELD] = steps
        actions, log_probs = self.per_dimension(out.actions, out.log_probs)
        return SableSample(actions, log_probs, None, out.values, extras)

    @torch.no_grad()
    def act(self, obs: Sequence[Any], avail: Sequence[Any] | None, deterministic: bool = True,  # type: ignore[override]
            hidden: Any = None, starts: Any = None) -> tuple[list[torch.Tensor], SableHidden | SableCarry | None]:
        """``(actions, next hidden)`` as every family's policy acts (``harl.evaluator.ActingPolicy``)."""
        x = self.stack_obs(obs)
        n_envs = x.shape[0]
        previous = hidden.steps if isinstance(hidden, SableCarry) else None
        if isinstance(hidden, SableCarry):
            hidden = hidden.network
        state = hidden if self.memory and hidden is not None else self.zero_hidden(n_envs)
        begins = self._starts(starts, n_envs, x.device)
        steps = self.step_counts(previous, begins)
        out = SableNetwork.act(self, x, state, begins, self.stack_avail(avail), deterministic,
                               step_count=self.per_agent(steps))
        actions, _ = self.per_dimension(out.actions, out.log_probs)
        if not self.memory:
            return actions, None
        return actions, (out.hidden if steps is None else SableCarry(out.hidden, steps))

    @torch.no_grad()
    def bootstrap_values(self, x: torch.Tensor) -> torch.Tensor:
        """``(E, A)`` V of stacked observations ``x`` from the states the latest ``sample`` left (the
        state it reached, before any reset: the rollout's last, an ended episode's final)."""
        n_envs = x.shape[0]
        state = self.bootstrap_hidden
        if state is None or state.encoder.shape[0] != n_envs:
            state = self.zero_hidden(n_envs)
        starts = torch.full((n_envs,), not self.memory, dtype=torch.bool, device=x.device)
        steps = self.bootstrap_steps
        if self.positional_encoding and (steps is None or steps.shape[0] != n_envs):
            steps = torch.zeros(n_envs, dtype=torch.long, device=x.device)
        return self.encode_step(x, state.encoder, starts, self.per_agent(steps))[0]


def sable_policy(config: Any, parts: Any) -> SablePolicy:
    """The policy an ``updater.objective`` of kind ``sable`` trains."""
    chunk = config.chunk_timesteps or None
    agents = len(parts.act_spaces)
    if config.agents_chunk_size and agents % config.agents_chunk_size:
        near = max(d for d in range(1, min(config.agents_chunk_size, agents) + 1) if agents % d == 0)
        raise ConfigError(f"{parts.source}: updater.objective.agents_chunk_size: expected a divisor of the env's "
                          f"{agents} agents, got {config.agents_chunk_size}: every chunk holds as many agents (Mava "
                          f"asserts it too); for example agents_chunk_size = {near}, or 0 for no chunks")
    return SablePolicy(parts.obs_spaces, parts.act_spaces, memory=config.memory, agent_id=config.agent_id,
                       n_block=config.n_block, embed_dim=config.embed_dim, n_head=config.n_head,
                       decay_scaling_factor=config.decay_scaling_factor,
                       positional_encoding=config.timestep_positional_encoding,
                       chunk_timesteps=chunk, chunk_agents=config.agents_chunk_size or None,
                       causal_chunks=config.agents_chunk_encoder == "causal")
