"""PQN's collector: the shared Q network acts epsilon-greedy in every env, one rollout per iteration.

::

    collector = PQNCollector(config, venv, policy, device, seed, updates)
    for iteration in range(n):
        stats = collector.collect(buffer)   # T vector steps of E envs into the PQN buffer, max Qs recorded
        returns.compute(buffer)             # lambda-returns (feed-forward)
        updater.update(buffer, progress)    # epochs of minibatch regression on this rollout

It is the one rollout loop (``harl.collect.rollout``) with ``PQNActor``.  Epsilon is JaxMARL's
``optax.linear_schedule(EPS_START, EPS_FINISH, EPS_DECAY * NUM_UPDATES)`` read at the update count
(``pqn_vdn_ff.py:99-103, 220``): one value for a whole rollout, falling linearly over the first
``epsilon_decay`` of the run's updates (``NUM_UPDATES = total_env_steps // (T x E)``).  Each agent in
each env draws its own coin and, where it explores, a uniformly random available action
(``eps_greedy_exploration``, ``pqn_vdn_ff.py:111-136``), from the collector's own generator (saved
in checkpoints).  The network acts in eval mode (BatchNorm's running statistics, JaxMARL's
``train=False``) and its per-agent max available Q at each step is recorded (the feed-forward
targets' bootstrap, ``pqn_vdn_ff.py:305-314``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import torch

from harl.buffers.pqn import PQNBuffer, PQNStart, PQNStep
from harl.buffers.records import StartRecord
from harl.collect.rollout import RolloutLoop
from harl.collect.workers import EnvWorkers, backend_checks
from harl.envs.protocol import VectorEnv, VectorStep, is_tensor_native
from harl.policy.agent_q import epsilon_greedy
from harl.policy.pqn import PQNPolicy, masked
from harl.registry import register
from harl.settings import in_range, kind_field, own_first, positive, setting


@attrs.frozen(field_transformer=own_first)
class PQNCollectorConfig(EnvWorkers):
    """``[collector] kind = "pqn"``: epsilon-greedy rollouts of many envs for PQN (its envs: ``EnvWorkers``)."""

    kind: str = kind_field("pqn")
    n_envs: int = setting(256, "environments stepped together (JaxMARL's NUM_ENVS: MPE 256, SMAX 128)", positive())
    rollout_length: int = setting(16, "vector steps per iteration (JaxMARL's NUM_STEPS: MPE 16, SMAX 128)", positive())
    epsilon_start: float = setting(1.0, "exploration probability at the first update (EPS_START)", in_range(0, 1))
    epsilon_finish: float = setting(0.1, "exploration probability after the decay (EPS_FINISH: MPE 0.1, SMAX 0.01)",
                                    in_range(0, 1))
    epsilon_decay: float = setting(
        0.1, "the fraction of the run's updates over which epsilon falls linearly (EPS_DECAY); 0: epsilon_start "
        "throughout, as optax's schedule with no transition steps", in_range(0, 1))
    zero_reset_inputs: bool = setting(
        False, "zero every agent's input (observation and one-hot id) at the first step of each episode after the "
        "run's first, as JaxMARL's CTRolloutManager.wrapped_step does (it zeroes a done agent's input after the env "
        "has reset; docs/fidelity.md); false: the new episode's real first observation")


def epsilon_at(update: int, start: float, finish: float, decay_updates: float) -> float:
    """``optax.linear_schedule(start, finish, decay_updates)(update)``: linear, then ``finish``; a
    schedule of no steps is ``start`` throughout (optax's)."""
    if decay_updates <= 0:
        return start
    frac = min(max(update, 0), decay_updates) / decay_updates
    return start + frac * (finish - start)


class PQNCollector:
    """Steps the envs with the shared network's epsilon-greedy actions; see the module docstring."""

    def __init__(self, config: PQNCollectorConfig, venv: VectorEnv, policy: PQNPolicy, device: torch.device,
                 seed: int, total_updates: int) -> None:
        self.config = config
        self.venv = venv
        self.policy = policy
        self.device = device
        self.native = is_tensor_native(venv)
        self.total_updates = total_updates
        """NUM_UPDATES: ``run.total_env_steps // (rollout_length x n_envs)``."""
        self.updates = 0
        """Rollouts collected so far (JaxMARL's ``n_updates`` when the rollout is taken)."""
        self.generator = torch.Generator().manual_seed(seed)
        self.loop = RolloutLoop(venv, seed, config.rollout_length, self._own_state)
        self._actor: PQNActor | None = None

    @property
    def steps_per_iteration(self) -> int:
        return self.config.rollout_length * self.config.n_envs

    @property
    def epsilon(self) -> float:
        c = self.config
        return epsilon_at(self.updates, c.epsilon_start, c.epsilon_finish, c.epsilon_decay * self.total_updates)

    def actor(self, buffer: PQNBuffer) -> PQNActor:
        if self._actor is None or self._actor.buffer is not buffer:
            self._actor = PQNActor(self, buffer)
        return self._actor

    @torch.no_grad()
    def collect(self, buffer: PQNBuffer) -> PQNCollected:
        stats = self.loop.collect(self.actor(buffer))
        eps = self.epsilon
        self.updates += 1
        return PQNCollected(stats.env_steps, stats.episodes, eps)

    def start_record(self, first: StartRecord) -> PQNStart:
        n = self.config.n_envs
        return PQNStart(self.policy.inputs(first.obs), self.policy.masks(first.avail, n),
                        self.policy.initial_hidden(n, self.device), torch.zeros(n, device=self.device))

    def env_actions(self, actions: torch.Tensor) -> list[Any]:
        per_agent = [actions[:, i:i + 1].float() for i in range(actions.shape[1])]  # as harl hands Discrete actions
        return per_agent if self.native else [a.cpu().numpy() for a in per_agent]

    def _own_state(self) -> dict[str, Any]:
        return {"updates": self.updates, "generator": self.generator.get_state()}

    def state_dict(self) -> dict[str, Any]:
        """The update count (epsilon), the generator and the envs' episodes (their whole state where
        the env gives it, so a resumed run goes on exactly: ``RolloutLoop``)."""
        return self.loop.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.updates = int(state["updates"])
        self.generator.set_state(state["generator"])
        self.loop.load_state_dict(state)

    def close(self) -> None:
        self.venv.close()


@attrs.frozen
class PQNCollected:
    """One rollout: its env steps, the episodes that ended, and the epsilon it explored with."""

    env_steps: int
    episodes: list[dict[str, Any]]
    epsilon: float

    def row(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon}


class PQNActor:
    """A ``PQNCollector`` acting into one PQN buffer (``harl.collect.actor.Actor``)."""

    def __init__(self, collector: PQNCollector, buffer: PQNBuffer) -> None:
        self.collector = collector
        self.buffer = buffer
        self.actions: torch.Tensor | None = None
        self.q_max: torch.Tensor | None = None
        self.hidden: torch.Tensor | None = None

    def _q(self, inp: PQNStart) -> tuple[torch.Tensor, torch.Tensor | None]:
        net = self.collector.policy.net
        was = net.training
        net.eval()
        q, hidden = net.step(inp.x, inp.hidden, inp.starts)
        net.train(was)
        return masked(q, inp.masks), hidden

    def observe_first(self, first: StartRecord) -> None:
        self.buffer.start(self.collector.start_record(first))

    def roll_over(self) -> None:
        self.buffer.roll_over()

    def select_action(self) -> list[Any]:
        inp = self.buffer.inputs()
        q, self.hidden = self._q(inp)
        self.q_max = q.max(-1).values
        self.actions = epsilon_greedy(q, inp.masks, self.collector.epsilon, self.collector.generator)
        return self.collector.env_actions(self.actions)

    def observe(self, step: VectorStep) -> None:
        assert self.actions is not None and self.q_max is not None, "select_action() first"
        policy, device = self.collector.policy, self.collector.device
        ended = (torch.as_tensor(step.terminated) | torch.as_tensor(step.truncated)).to(device).float()
        x = policy.inputs(step.obs)
        if self.collector.config.zero_reset_inputs:  # jnp.where(done, 0.0, obs), baselines.py:432-436
            x = torch.where(ended.view(-1, 1, 1) > 0, 0.0, x)
        nxt = PQNStart(x, policy.masks(step.avail, ended.shape[0]), self.hidden, ended)
        rewards = torch.as_tensor(step.rewards, dtype=torch.float32).to(device)
        self.buffer.insert(PQNStep(self.actions, self.q_max, rewards, ended, nxt))

    def end_rollout(self) -> None:
        q, _ = self._q(self.buffer.inputs())
        self.buffer.finish(q.max(-1).values)

    def abandon(self) -> None:
        pass

    def carried(self) -> dict[str, Any] | None:
        return self.buffer.carried()

    def carry_in(self, carried: dict[str, Any]) -> None:
        self.buffer.carry_in(carried)

    def compiled(self, eager_s: float) -> Callable[[], list[dict[str, Any]]] | None:
        return None


def collector_checks(config: PQNCollectorConfig, built: Mapping[str, Any]) -> Iterator[tuple[list[str], str]]:
    yield from backend_checks(config, built)
    if config.epsilon_finish > config.epsilon_start:
        yield (["collector", "epsilon_finish"],
               f"epsilon_finish = {config.epsilon_finish} is above epsilon_start = {config.epsilon_start}: the "
               "schedule falls from epsilon_start to epsilon_finish; swap the two values (JaxMARL's MPE PQN: start "
               "1.0, finish 0.1)")


register("collector", PQNCollectorConfig, family="pqn", check=collector_checks,
         factory=lambda config, parts: PQNCollector(config, parts.venv, parts.policy, parts.device, parts.env_seed,
                                                    parts.wiring.total_updates))
