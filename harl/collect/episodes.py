"""The value family's collector: epsilon-greedy agent Qs, whole episodes into the episode replay.

::

    collector = EpisodeCollector(config, venv, policy, device, seed, max_length)
    for iteration in range(n):
        stats = collector.collect(buffer)   # rollout_length vector steps; each episode that ends goes in whole
        updater.update(buffer, progress)    # gradient steps on batches of whole episodes

Every iteration takes the same number of vector steps (``rollout_length``); an episode that
has not ended carries over to the next call with its GRU states and previous actions, and
is handed to the buffer once it ends, from its first step to the observation its last step
reached (the pre-reset one, so a truncated episode can bootstrap).

Epsilon falls linearly from ``epsilon_start`` to ``epsilon_finish`` over the first
``epsilon_anneal_steps`` env steps and stays there (EPyMARL's ``DecayThenFlatSchedule``,
linear).  With ``epsilon_timing = "per_episode"`` (the default, as EPyMARL's runners: its
action selector reads ``t_env``, which only moves when an episode batch ends) each env holds
the schedule's value at the env step its episode began for the whole episode;
``"per_step"`` reads the schedule at every vector step, ``"per_iteration"`` once per
``collect`` (JaxMARL's QLearning baselines, once per rollout).  Each agent in each env draws its
own coin and, where it explores, a uniformly random available action, from the collector's
own generator (saved in checkpoints).

Updates inside collection: ``hook`` (set by the value family when ``[updater] timing =
"per_episode"``) is told after every vector step at which episodes ended and went into the
buffer (``hook.after_episodes(buffer, ended)``), so the gradient steps they earn are taken
there, before the next action; if ``collect`` fails or is interrupted, ``hook.abandon()`` puts
the learning state back as the iteration began, so that an exit checkpoint is a whole
iteration's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import attrs
import numpy as np
import torch

from harl.buffers.episodes import Episode, EpisodeBuffer
from harl.buffers.records import StartRecord
from harl.collect.rollout import RolloutLoop
from harl.collect.stats import CollectStats
from harl.collect.workers import EnvWorkers, backend_checks
from harl.envs.protocol import VectorEnv, VectorStep, is_tensor_native
from harl.errors import ConfigError
from harl.nets.heads import avail_size
from harl.nets.image import storage_dtype
from harl.policy.agent_q import AgentQNetworks, epsilon_greedy
from harl.registry import register
from harl.settings import in_range, kind_field, one_of, own_first, positive, setting

EPSILON_TIMINGS = ("per_episode", "per_step", "per_iteration")


@attrs.frozen(field_transformer=own_first)
class EpisodeCollectorConfig(EnvWorkers):
    """``[collector] kind = "episodes"``: epsilon-greedy agent Qs, whole episodes into an episode replay (its
    envs: ``EnvWorkers``)."""

    kind: str = kind_field("episodes")
    n_envs: int = setting(1, "environments stepped together (EPyMARL's episode runner: 1)", positive())
    rollout_length: int = setting(
        50, "vector steps per iteration; an episode still running carries over to the next", positive())
    epsilon_start: float = setting(1.0, "exploration probability at the first env step", in_range(0, 1))
    epsilon_finish: float = setting(0.05, "exploration probability after the anneal", in_range(0, 1))
    epsilon_anneal_steps: int = setting(
        50_000, "env steps over which epsilon falls linearly from epsilon_start to epsilon_finish "
        "(EPyMARL's epsilon_anneal_time; 0: epsilon_finish from the start)", in_range(0, None))
    epsilon_timing: str = setting(
        "per_episode", "per_episode: each env keeps the schedule's value at the env step its episode began "
        "for the whole episode (EPyMARL's runners); per_step: the schedule at every vector step (harl before "
        "issue 47); per_iteration: the schedule at the iteration's first step for all of it (JaxMARL's "
        "QLearning: once per rollout)", one_of(EPSILON_TIMINGS))


def epsilon_at(env_steps: int, start: float, finish: float, anneal_steps: int) -> float:
    """Linear from ``start`` to ``finish`` over ``anneal_steps`` env steps, then ``finish``."""
    if anneal_steps <= 0 or env_steps >= anneal_steps:
        return finish
    return start + (finish - start) * env_steps / anneal_steps


def collector_checks(config: EpisodeCollectorConfig, built: Mapping[str, Any]) -> Iterator[tuple[list[str], str]]:
    """The worker settings (as the other collectors), and a schedule that does not rise."""
    yield from backend_checks(config, built)
    if config.epsilon_finish > config.epsilon_start:
        yield (["collector", "epsilon_finish"],
               f"epsilon_finish = {config.epsilon_finish} is above epsilon_start = {config.epsilon_start}: the "
               "schedule falls from epsilon_start to epsilon_finish; swap the two values (EPyMARL: start 1.0, "
               "finish 0.05)")


class EpisodeHook(Protocol):
    """What the collector tells as episodes end inside ``collect`` (the ``q_learning`` updater with
    ``timing = "per_episode"``)."""

    def after_episodes(self, buffer: EpisodeBuffer, ended: int) -> None:
        """``ended`` episodes went into ``buffer`` at the vector step just taken."""

    def abandon(self) -> None:
        """``collect`` failed or was interrupted: undo what this iteration's calls changed."""


class EpisodeCollector:
    """Steps the envs with the policy's epsilon-greedy actions; see the module docstring."""

    def __init__(self, config: EpisodeCollectorConfig, venv: VectorEnv, policy: AgentQNetworks, device: torch.device,
                 seed: int, max_length: int) -> None:
        self.config = config
        self.venv = venv
        self.policy = policy
        self.device = device
        self.seed = seed
        self.max_length = max_length
        self.native = is_tensor_native(venv)
        self.env_steps = 0
        """Env steps taken since the run began (drives the epsilon schedule)."""
        self.generator = torch.Generator().manual_seed(seed)
        E, T = config.n_envs, max_length
        spaces_ = venv.observation_spaces
        self._obs = [torch.zeros(E, T + 1, int(np.prod(s.shape)), dtype=storage_dtype(s)) for s in spaces_]
        self._state = torch.zeros(E, T + 1, int(np.prod(venv.state_space.shape)),
                                  dtype=storage_dtype(venv.state_space))
        self._avail = [torch.ones(E, T + 1, avail_size(s)) if avail_size(s) else None for s in venv.action_spaces]
        self._actions = torch.zeros(E, T, venv.n_agents, dtype=torch.long)
        self._rewards = torch.zeros(E, T)
        self._terminated = torch.zeros(E, T, dtype=torch.bool)
        self._pos = torch.zeros(E, dtype=torch.long)
        """Each env's step within its current episode."""
        self._rows = torch.arange(E)
        self._current: tuple[list[Any], Any, list[Any] | None] | None = None
        """(obs, state, avail) the envs are at now, as the env returned them."""
        self._hidden: tuple[torch.Tensor, torch.Tensor] | None = None
        self._starts = torch.ones(E, device=device)
        self.loop = RolloutLoop(venv, seed, config.rollout_length, self._own_state)
        """The one rollout loop (``harl.collect.rollout``): resets, restarts and steps the envs."""
        self._actor: EpisodeActor | None = None
        self._iteration_start = 0
        """Env steps when the current ``collect`` began (its epsilon with ``per_iteration``)."""
        self._episode_start = torch.zeros(E, dtype=torch.long)
        """The env step each env's current episode began at (its epsilon with ``per_episode``)."""
        self.hook: EpisodeHook | None = None

    def updates_with(self, hook: EpisodeHook) -> None:
        """Take the gradient steps ``hook`` gives inside collection, as episodes end (``[updater] timing``)."""
        self.hook = hook
        """Told of the episodes each vector step ends (see the module docstring)."""

    @property
    def steps_per_iteration(self) -> int:
        """Env steps one ``collect`` call takes (rollout_length x n_envs)."""
        return self.config.rollout_length * self.config.n_envs

    @property
    def epsilon(self) -> float:
        c = self.config
        return epsilon_at(self.env_steps, c.epsilon_start, c.epsilon_finish, c.epsilon_anneal_steps)

    def epsilons(self) -> float | torch.Tensor:
        """What this vector step explores with: ``epsilon`` (``per_step``), or per env ``(E, 1)`` the
        schedule's value where its episode began (``per_episode``)."""
        c = self.config
        if c.epsilon_timing == "per_step":
            return self.epsilon
        if c.epsilon_timing == "per_iteration":
            return epsilon_at(self._iteration_start, c.epsilon_start, c.epsilon_finish, c.epsilon_anneal_steps)
        return torch.tensor([[epsilon_at(int(t), c.epsilon_start, c.epsilon_finish, c.epsilon_anneal_steps)]
                             for t in self._episode_start], dtype=torch.float64)

    # ------------------------------------------------------------------ episodes in progress

    def _write(self, rows: torch.Tensor, at: torch.Tensor, obs: list[Any], state: Any,
               avail: list[Any] | None) -> None:
        """Observation, state and masks into row ``at[k]`` of env ``rows[k]``'s episode in progress."""
        if rows.numel() == 0:
            return
        pick = rows.tolist()
        for i, o in enumerate(obs):
            self._obs[i][rows, at] = torch.as_tensor(o).reshape(len(obs[i]), -1)[pick].cpu().to(self._obs[i].dtype)
        self._state[rows, at] = torch.as_tensor(state).reshape(self.config.n_envs, -1)[pick].cpu().to(
            self._state.dtype)
        for i, mask in enumerate(self._avail):
            if mask is not None:
                mask[rows, at] = (1.0 if avail is None or avail[i] is None
                                  else torch.as_tensor(avail[i]).reshape(self.config.n_envs, -1)[pick].cpu().float())

    def _begin_episodes(self, obs: list[Any], state: Any, avail: list[Any] | None) -> None:
        E = self.config.n_envs
        self._pos.zero_()
        self._write(self._rows, self._pos, obs, state, avail)
        self._current = (list(obs), state, None if avail is None else list(avail))
        self._hidden = self.policy.initial_hidden(E, self.device)
        self._starts = torch.ones(E, device=self.device)
        self._episode_start.fill_(self.env_steps)

    def observe_first(self, first: StartRecord) -> None:
        """Every env begins an episode (a reset or a checkpoint's restart), and with it an iteration."""
        self._begin_episodes(list(first.obs), first.state, None if first.avail is None else list(first.avail))
        self._iteration_start = self.env_steps

    def roll_over(self) -> None:
        """An iteration begins with the episodes under way (its epsilon with ``per_iteration``)."""
        self._iteration_start = self.env_steps

    def actor(self, buffer: EpisodeBuffer) -> EpisodeActor:
        """This collector acting into ``buffer``, as the rollout loop drives it (one per buffer)."""
        if self._actor is None or self._actor.buffer is not buffer:
            self._actor = EpisodeActor(self, buffer)
        return self._actor

    def _episode(self, e: int) -> Episode:
        L = int(self._pos[e]) + 1
        return Episode(obs=[o[e, : L + 1].clone() for o in self._obs], state=self._state[e, : L + 1].clone(),
                       avail=[None if m is None else m[e, : L + 1].clone() for m in self._avail],
                       actions=self._actions[e, :L].clone(), rewards=self._rewards[e, :L].clone(),
                       terminated=self._terminated[e, :L].clone())

    # ------------------------------------------------------------------ collecting

    @torch.no_grad()
    def collect(self, buffer: EpisodeBuffer) -> CollectStats:
        return self.loop.collect(self.actor(buffer))

    def select_action(self) -> tuple[list[Any], torch.Tensor, torch.Tensor]:
        """The epsilon-greedy actions for the current observations: per agent as the envs take them, the
        ``(E, A)`` indices and the agent Qs' next GRU state."""
        assert self._current is not None and self._hidden is not None, "start() first"
        obs, _, avail = self._current
        device = self.device
        obs_t = [torch.as_tensor(o, device=device) for o in obs]
        avail_t = None if avail is None else [None if a is None else torch.as_tensor(a, device=device) for a in avail]
        epsilon = self.epsilons()
        q, masks, h = self.policy.q_step(obs_t, avail_t, self._hidden, self._starts)
        actions = epsilon_greedy(q, masks, epsilon, self.generator)
        self.policy.explore_with(epsilon if isinstance(epsilon, float) else float(epsilon.min()))
        per_agent = self.policy.per_agent(actions)
        return per_agent if self.native else [a.cpu().numpy() for a in per_agent], actions, h

    def observe(self, actions: torch.Tensor, h: torch.Tensor, step: VectorStep, buffer: EpisodeBuffer) -> None:
        """Store the step the envs took on ``actions`` (``h``: the GRU state after it); each episode that
        ended goes into ``buffer``, and the hook takes the gradient steps they earn."""
        self.env_steps += self.config.n_envs
        rows, pos = self._rows, self._pos
        self._actions[rows, pos] = actions.cpu()
        self._rewards[rows, pos] = torch.as_tensor(step.rewards, dtype=torch.float32).cpu().mean(-1)
        self._terminated[rows, pos] = torch.as_tensor(step.terminated, dtype=torch.bool).cpu()
        ended = torch.as_tensor(step.terminated | step.truncated, dtype=torch.bool).cpu()
        going = (~ended).nonzero().flatten()
        if going.numel() and int(pos[going].max()) + 1 >= self.max_length:
            raise ConfigError(
                f"buffer.max_length = {self.max_length}: an episode ran {self.max_length} steps without ending, so "
                "it does not fit the episode replay; set buffer.max_length to the env's episode limit (or set "
                "the env's time limit, [env] max_episode_steps)")
        done = ended.nonzero().flatten()
        if done.numel():
            final_obs = step.final_obs if step.final_obs is not None else step.obs
            final_avail = step.final_avail if step.final_obs is not None else step.avail
            self._write(done, pos[done] + 1, list(final_obs), step.final_state,
                        None if final_avail is None else list(final_avail))
            for e in done.tolist():
                buffer.insert(self._episode(e))
            self._episode_start[done] = self.env_steps
        pos[going] += 1
        pos[done] = 0
        self._write(self._rows, pos, list(step.obs), step.state, None if step.avail is None else list(step.avail))
        self._current = (list(step.obs), step.state, None if step.avail is None else list(step.avail))
        self._hidden = (h, actions.to(h.device))
        self._starts = ended.to(device=self.device, dtype=torch.float32)
        if done.numel() and self.hook is not None:
            self.hook.after_episodes(buffer, int(done.numel()))

    # ------------------------------------------------------------------ checkpoints

    def _own_state(self) -> dict[str, Any]:
        return {"env_steps": self.env_steps, "generator": self.generator.get_state()}

    def state_dict(self) -> dict[str, Any]:
        """Env steps (epsilon), the generator and how the envs' current episodes began.

        A resumed run begins those episodes again from their first step (their steps so far
        are dropped), so it continues exactly where every env was at an episode's start, as
        when ``rollout_length`` is a multiple of a fixed episode length.
        """
        return self.loop.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.env_steps = int(state["env_steps"])
        self.generator.set_state(state["generator"])
        self.loop.load_state_dict(state)
        self.loop.started = False  # the saved episodes begin again (their steps so far are not saved)
        self._current = None

    def close(self) -> None:
        self.venv.close()


class EpisodeActor:
    """An ``EpisodeCollector`` acting into one episode replay (``harl.collect.actor.Actor``): epsilon-greedy
    actions, each finished episode into the replay whole (and the hook's gradient steps after it)."""

    def __init__(self, collector: EpisodeCollector, buffer: EpisodeBuffer) -> None:
        self.collector = collector
        self.buffer = buffer
        self.chose: tuple[torch.Tensor, torch.Tensor] | None = None

    def observe_first(self, first: StartRecord) -> None:
        self.collector.observe_first(first)

    def roll_over(self) -> None:
        self.collector.roll_over()

    def select_action(self) -> list[Any]:
        env_actions, actions, h = self.collector.select_action()
        self.chose = (actions, h)
        return env_actions

    def observe(self, step: VectorStep) -> None:
        assert self.chose is not None, "select_action() first"
        self.collector.observe(*self.chose, step, self.buffer)

    def end_rollout(self) -> None:
        pass

    def abandon(self) -> None:
        if self.collector.hook is not None:
            self.collector.hook.abandon()

    def carried(self) -> None:
        return None  # the episodes under way live in the collector's arrays: a resume begins them again

    def carry_in(self, carried: dict[str, Any]) -> None:
        raise ValueError("an episode collector does not carry episodes under way over a checkpoint")

    def compiled(self, eager_s: float) -> None:
        return None


register("collector", EpisodeCollectorConfig, family="value", check=collector_checks,
         factory=lambda config, parts: EpisodeCollector(config, parts.venv, parts.policy, parts.device,
                                                         seed=parts.env_seed, max_length=parts.wiring.max_length))
