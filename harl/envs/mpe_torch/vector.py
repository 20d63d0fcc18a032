"""``MPETorchVectorEnv``: ``n_envs`` MPE worlds stepped as one batch of torch tensors.

Tensor-native (like the VMAS adapter): observations, states, rewards and episode ends are
tensors on ``device`` and actions go in as tensors (numpy arrays work too).  Conventions
follow harl's mpe2 adapter (``harl.envs.mpe``): the state concatenates the agents'
observations, continuous actions are clipped to ``[0, 1]``, discrete envs report all-ones
action masks, ``team_reward`` gives every agent the sum of the agents' rewards, and the
time limit ``max_episode_steps`` ends an episode as truncated (these scenarios never terminate).

Randomness: one ``torch.Generator`` on the device draws every reset (MPE is deterministic
between resets).  For exact resume, ``episode_starts`` records each env's initial world
itself and the generator's state, so ``restart`` replays any env's episode alone and the
resets after it are those the checkpointed run would have drawn.  ``get_state`` /
``set_state`` capture and restore the whole batch mid-episode (worlds, initial worlds, episode
returns and lengths, the generator), so a resume continues the episodes under way exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from gymnasium import spaces

from harl.envs.mpe_legacy import self_collision_penalty
from harl.envs.mpe_torch.config import MPETorchConfig
from harl.envs.mpe_torch.reference import Reference
from harl.envs.mpe_torch.speaker_listener import SpeakerListener
from harl.envs.mpe_torch.spread import Spread
from harl.envs.mpe_torch.world import Physics, World, sample_worlds
from harl.envs.protocol import VectorStep
from harl.errors import ConfigError

if TYPE_CHECKING:
    from harl.envs.protocol import Array

Reset = tuple[list[torch.Tensor], torch.Tensor, list[torch.Tensor] | None]

_INITIAL = ("agent_pos", "landmark_pos", "goals")
"""The parts of a world that a reset draws (velocities and utterances start at zero)."""
_WORLD = ("agent_pos", "agent_vel", "landmark_pos", "comm", "goals")
"""Every part of a world (``World``): what ``get_state`` captures mid-episode."""


def _device(name: str) -> torch.device:
    device = torch.device(name)  # a valid name: MPETorchConfig checks it
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f'env.device: "{name}" was asked for, but this torch build ({torch.__version__}) '
            'sees no CUDA device; use device = "cpu"'
        )
    return device


def _scenario(config: MPETorchConfig, device: torch.device, dtype: torch.dtype
              ) -> Spread | Reference | SpeakerListener:
    if config.scenario == "simple_spread":
        return Spread(config.n_agents, config.local_ratio, device, dtype)
    if config.scenario == "simple_reference":
        return Reference(config.local_ratio, device, dtype)
    return SpeakerListener(device, dtype)


def _agent_names(scenario: str, n_agents: int) -> list[str]:
    """mpe2's agent names for the scenario (``harl.envs.mpe`` reads them from mpe2's world)."""
    if scenario == "simple_speaker_listener":
        return ["speaker_0", "listener_0"]
    return [f"agent_{i}" for i in range(n_agents)]


class MPETorchVectorEnv:
    """``n_envs`` MPE environments of one scenario, in torch (see the module docstring)."""

    tensor_native = True
    """Batches are torch tensors on ``device`` (see ``harl.envs.protocol.VectorEnv``)."""

    def __init__(self, config: MPETorchConfig, n_envs: int, seed: int = 0) -> None:
        self.config = config
        self.device = _device(config.device)
        self.n_envs = n_envs
        self._dtype = getattr(torch, config.precision)
        self._scenario = _scenario(config, self.device, self._dtype)
        layout = self._scenario.layout
        self._layout = layout
        legacy = config.variant == "pettingzoo_1.22"
        self._physics = Physics(layout, config.continuous_actions, self.device, self._dtype, legacy)
        self._self_collision = self_collision_penalty(config.scenario, config.local_ratio) if legacy else 0.0
        """pettingzoo 1.22's simple_spread counts each agent's collision with itself."""
        self._generator = torch.Generator(device=self.device)
        self._generator.manual_seed(seed)
        self._seed = seed
        self._reset_before = False
        self.n_agents = layout.n_agents
        self.agent_names = _agent_names(config.scenario, self.n_agents)
        self.agent_groups = {"agent": list(self.agent_names)}
        """mpe2's names; every scenario here is cooperative: one side (as ``kind = "mpe"``)."""
        self.action_spaces: list[spaces.Space] = [
            layout.action_space(i, config.continuous_actions) for i in range(self.n_agents)
        ]
        self._world = sample_worlds(layout, n_envs, self._generator, self.device, self._dtype)
        self._start = self._initial(self._world)
        self._obs_sizes = self._scenario.obs_sizes
        self.observation_spaces = [
            spaces.Box(-np.inf, np.inf, (size,), np.float32) for size in self._obs_sizes
        ]
        self.state_space = spaces.Box(-np.inf, np.inf, (sum(self._obs_sizes),), np.float32)
        self._avail: list[torch.Tensor] | None = None
        if not config.continuous_actions:
            self._avail = [torch.ones(n_envs, int(s.n), device=self.device)  # type: ignore[attr-defined]
                           for s in self.action_spaces]
        self._active = torch.ones(n_envs, self.n_agents, dtype=torch.bool, device=self.device)
        self._not_terminated = torch.zeros(n_envs, dtype=torch.bool, device=self.device)
        self._returns = torch.zeros(n_envs, dtype=torch.float64, device=self.device)
        self._lengths = torch.zeros(n_envs, dtype=torch.int64, device=self.device)
        self._all_envs = torch.arange(n_envs, device=self.device)
        self._no_envs = self._all_envs[:0]
        self._lockstep: int | None = None
        """Steps every env's episode has run, where all began together (MPE episodes end only
        by time limit, so they end together): which envs end is then known on the host, and a
        step that ends none reads nothing back from the device.  None: lengths differ."""
        self._host_lengths: np.ndarray | None = None
        """Outside lockstep, the episode lengths as ``plan_ends`` counts them on the host (None: not
        read yet, or out of date: ``step``, a reset or ``set_state`` ran since)."""

    # ----------------------------------------------------------------- episode starts

    @staticmethod
    def _initial(world: World) -> dict[str, torch.Tensor]:
        return {name: getattr(world, name).clone() for name in _INITIAL}

    def _observe(self) -> Reset:
        """The state (the agents' observations side by side, float32) and views of it per agent."""
        state = self._scenario.observe(self._world).float()
        return list(state.split(self._obs_sizes, dim=1)), state, self._avail

    def set_initial_worlds(self, envs: torch.Tensor, agent_pos: Any, landmark_pos: Any,
                           goals: Any) -> Reset:
        """Begin a new episode in each of ``envs`` from the given initial world (positions
        ``(k, n_agents, 2)`` and ``(k, n_landmarks, 2)``, goal landmark indices ``(k, n_goals)``),
        at rest and silent; returns the whole batch's observations, state and masks."""
        envs = torch.as_tensor(envs, device=self.device).long()
        given = {"agent_pos": agent_pos, "landmark_pos": landmark_pos, "goals": goals}
        for name, value in given.items():
            target = getattr(self._world, name)
            value = torch.as_tensor(value, device=self.device).to(target.dtype)
            target[envs] = value
            self._start[name][envs] = value
        self._world.agent_vel[envs] = 0.0
        self._world.comm[envs] = 0.0
        self._returns[envs] = 0.0
        self._lengths[envs] = 0
        self._lockstep = 0 if len(envs) == self.n_envs else None
        self._host_lengths = None
        return self._observe()

    def _reset_envs(self, envs: torch.Tensor) -> None:
        fresh = sample_worlds(self._layout, len(envs), self._generator, self.device, self._dtype)
        self.set_initial_worlds(envs, fresh.agent_pos, fresh.landmark_pos, fresh.goals)

    def reset(self, seed: int | None = None) -> Reset:
        """Reset every env; a seed re-seeds the generator (the constructor's on the first call)."""
        if seed is None and not self._reset_before:
            seed = self._seed
        if seed is not None:
            self._generator.manual_seed(seed)
        self._reset_before = True
        self._reset_envs(torch.arange(self.n_envs, device=self.device))
        return self._observe()

    def episode_starts(self) -> list[dict[str, Any]]:
        """Each env's initial world (numpy, picklable) and how far its episode has run; entry 0
        also holds the generator now (``generator``), so the resets after a restart are the
        ones that would have followed the checkpoint."""
        start = {name: value.cpu().numpy() for name, value in self._start.items()}
        starts = [
            {"seed": None, "rng": None, "steps": int(steps), **{name: start[name][k] for name in start}}
            for k, steps in enumerate(self._lengths.tolist())
        ]
        starts[0]["generator"] = self._generator.get_state()
        return starts

    def restart(self, starts: Sequence[dict[str, Any]]) -> Reset:
        """Begin each env's episode again from the initial world ``episode_starts`` recorded
        (an episode that had run some steps starts over), the generator as it was then."""
        if len(starts) != self.n_envs:
            raise ValueError(f"restart needs {self.n_envs} episode starts, got {len(starts)}")
        self._reset_before = True
        self._generator.set_state(starts[0]["generator"])
        stacked = {name: np.stack([start[name] for start in starts]) for name in _INITIAL}
        return self.set_initial_worlds(torch.arange(self.n_envs), **stacked)

    def get_state(self) -> list[dict[str, Any]]:
        """Every env's whole state now (``harl.envs.protocol.VectorEnv``), numpy, picklable: its
        world (positions, velocities, utterances, goals), its episode's initial world, return and
        length; entry 0 also holds the generator and how far the envs have run together."""
        world = {name: getattr(self._world, name).cpu().numpy() for name in _WORLD}
        start = {name: value.cpu().numpy() for name, value in self._start.items()}
        returns, lengths = self._returns.cpu().numpy(), self._lengths.cpu().numpy()
        states = [{"world": {name: world[name][k].copy() for name in _WORLD},
                   "start": {name: start[name][k].copy() for name in _INITIAL},
                   "return": float(returns[k]), "length": int(lengths[k])} for k in range(self.n_envs)]
        states[0]["generator"] = self._generator.get_state()
        states[0]["lockstep"] = self._lockstep
        return states

    def set_state(self, states: Sequence[dict[str, Any]]) -> None:
        """Restore ``get_state``'s list (or rows of several joined, entry 0 holding the generator):
        the next ``step`` continues the episodes it captured."""
        if len(states) != self.n_envs:
            raise ValueError(f"set_state needs {self.n_envs} env states, got {len(states)}")
        for name in _WORLD:
            target = getattr(self._world, name)
            target.copy_(torch.as_tensor(np.stack([s["world"][name] for s in states]), device=self.device))
        for name in _INITIAL:
            self._start[name].copy_(torch.as_tensor(np.stack([s["start"][name] for s in states]), device=self.device))
        self._returns.copy_(torch.tensor([s["return"] for s in states], dtype=torch.float64))
        self._lengths.copy_(torch.tensor([s["length"] for s in states], dtype=torch.int64))
        self._generator.set_state(states[0]["generator"])
        lengths = {s["length"] for s in states}
        # rows of several vector envs: in lockstep where every episode has run as long
        self._lockstep = states[0]["lockstep"] if len(lengths) == 1 and states[0]["lockstep"] is not None else None
        self._host_lengths = None
        self._reset_before = True

    def get_rng_state(self) -> list[Any]:
        """One generator draws every env's resets: its state is entry 0."""
        return [self._generator.get_state()] + [None] * (self.n_envs - 1)

    def set_rng_state(self, states: Sequence[Any]) -> None:
        if len(states) != self.n_envs:
            raise ValueError(f"set_rng_state needs {self.n_envs} states, got {len(states)}")
        if states[0] is not None:
            self._generator.set_state(states[0])
        self._reset_before = True

    # ----------------------------------------------------------------- stepping

    def advance(self, actions: Sequence[Any], check: bool = True
                ) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
        """Step every world with its row of ``actions``, without resetting the episodes that end:
        ``(obs, state, rewards, truncated)`` after the step (tensors only, no read-back: the part
        of ``step`` the compiled collection step runs in its graph; ``check``: as ``Physics.decode``)."""
        if len(actions) != self.n_agents:
            raise ValueError(f"step needs {self.n_agents} action batches, got {len(actions)}")
        u, comm = self._physics.decode(actions, self.n_envs, self.device, check)
        self._physics.step(self._world, u, comm)
        rewards = self._scenario.rewards(self._world)
        if self._self_collision:
            rewards = rewards + self._self_collision
        if self.config.team_reward:
            rewards = rewards.sum(1, keepdim=True).expand(-1, self.n_agents)
        rewards = rewards.float().contiguous()
        # The episode return is the team's summed reward either way: every agent holds the team's sum
        # (team_reward), or the agents' own rewards add up to it (what JaxMARL's MPE log wrapper reports).
        team = rewards.mean(1, dtype=torch.float64) if self.config.team_reward else rewards.sum(1, dtype=torch.float64)
        self._returns += team
        self._lengths += 1
        obs, state, _ = self._observe()
        return obs, state, rewards, self._lengths >= self.config.max_episode_steps

    def step(self, actions: Sequence[Any]) -> VectorStep:
        """Step every world with its row of ``actions``; ended episodes are reset."""
        obs, state, rewards, truncated = self.advance(actions)
        avail = self._avail
        final_obs, final_state = obs, state
        episode_infos: list[dict[str, Any]] = []
        self._host_lengths = None
        if self._lockstep is not None:
            self._lockstep += 1
            ended = self._all_envs if self._lockstep >= self.config.max_episode_steps else self._no_envs
        else:
            ended = truncated.nonzero().flatten()
        if len(ended):
            returns, lengths = self._returns[ended].tolist(), self._lengths[ended].tolist()
            episode_infos = [{"return": r, "length": int(n)} for r, n in zip(returns, lengths)]
            self._reset_envs(ended)
            obs, state, avail = self._observe()
        masks: list[Array] | None = None if avail is None else [*avail]
        return VectorStep(
            obs=[*obs], state=state, avail=masks, rewards=rewards, terminated=self._not_terminated.clone(),
            truncated=truncated, active=self._active, final_state=final_state,
            episode_infos=episode_infos, final_obs=[*final_obs], final_avail=masks,
        )

    # ----------------------------------------------------------------- the compiled step's parts

    @property
    def avail(self) -> list[torch.Tensor] | None:
        """The action masks every step reports (all ones; None: continuous actions)."""
        return self._avail

    @property
    def active(self) -> torch.Tensor:
        """``(n_envs, n_agents)`` bool: every agent is always active in MPE."""
        return self._active

    def plan_ends(self) -> np.ndarray:
        """The envs whose episode ends with the next step (indices, on the host), and the host's
        count of episode lengths moved on by that step: a caller that runs ``advance`` and
        ``begin_where`` itself (the compiled collection step) learns the ends without reading the
        device.  MPE episodes end only by the time limit, so the lengths say it; outside lockstep
        the lengths are read once and then counted on the host."""
        limit = self.config.max_episode_steps
        if self._lockstep is not None:
            self._lockstep += 1
            if self._lockstep < limit:
                return np.arange(0)
            self._lockstep = 0  # as set_initial_worlds: every env begins together
            return np.arange(self.n_envs)
        if self._host_lengths is None:
            self._host_lengths = self._lengths.cpu().numpy().copy()
        self._host_lengths += 1
        ended = np.flatnonzero(self._host_lengths >= limit)
        self._host_lengths[ended] = 0
        if len(ended) == self.n_envs:  # as set_initial_worlds: every env begins together
            self._lockstep, self._host_lengths = 0, None
        return ended

    def fresh_starts(self, ended: np.ndarray) -> tuple[torch.Tensor, ...]:
        """New initial worlds for ``ended`` (drawn from the env's generator as ``step`` draws them),
        spread over the whole batch for ``begin_where``: ``(mask (n_envs,) bool, agent_pos,
        landmark_pos, goals)``, rows outside ``ended`` zero."""
        fresh = sample_worlds(self._layout, len(ended), self._generator, self.device, self._dtype)
        drawn = (fresh.agent_pos, fresh.landmark_pos, fresh.goals)
        mask = torch.zeros(self.n_envs, dtype=torch.bool, device=self.device)
        if len(ended) == self.n_envs:
            return (mask.fill_(True), *drawn)
        rows = torch.as_tensor(ended, device=self.device)
        mask[rows] = True
        spread = []
        for value in drawn:
            full = value.new_zeros(self.n_envs, *value.shape[1:])
            full[rows] = value
            spread.append(full)
        return (mask, *spread)

    def begin_where(self, mask: torch.Tensor, agent_pos: torch.Tensor, landmark_pos: torch.Tensor,
                    goals: torch.Tensor) -> Reset:
        """``set_initial_worlds`` for the envs where ``mask`` is set, with whole-batch tensors
        (``torch.where``, in place, no indexing by a variable count): the compiled step's reset."""
        given = {"agent_pos": agent_pos, "landmark_pos": landmark_pos, "goals": goals}
        for name, value in given.items():
            target = getattr(self._world, name)
            where = mask.view(-1, *([1] * (target.dim() - 1)))
            target.copy_(torch.where(where, value.to(target.dtype), target))
            self._start[name].copy_(torch.where(where, value.to(target.dtype), self._start[name]))
        rows = mask.view(-1, 1, 1)
        self._world.agent_vel.masked_fill_(rows, 0.0)
        self._world.comm.masked_fill_(rows, 0.0)
        self._returns.masked_fill_(mask, 0.0)
        self._lengths.masked_fill_(mask, 0)
        return self._observe()

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor ``advance`` and ``begin_where`` change in place (CUDA graphs keep them at
        static addresses)."""
        return [*(getattr(self._world, name) for name in _WORLD), *self._start.values(), self._returns,
                self._lengths]

    def final_returns(self) -> torch.Tensor:
        """``(n_envs,)`` float64 each episode's return so far (read before ``begin_where``)."""
        return self._returns.clone()

    def close(self) -> None:
        """Nothing to release (tensors only)."""

