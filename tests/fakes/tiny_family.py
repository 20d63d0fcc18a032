"""A user's family from their own module, touching nothing of harl: independent REINFORCE on
per-agent action logits (a stateless team) with a running-mean baseline, for one-step games.

Everything a family is, in one file: its stage kinds (registered with ``family=NAME``, named
``"tests.fakes.tiny_family:Name"`` in a pipeline), its ``Family`` (what it builds, in which
order; the kind each of its tables gets by default) and a game it learns, a 3 x 3 team bandit
whose best joint action (2, 2) pays 10 while uniform play earns about 1.9.  A pipeline needs
only ``[collector] kind = "tests.fakes.tiny_family:BanditCollectorConfig"``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import attrs
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from harl import registry
from harl.envs.protocol import EnvStep
from harl.families import Built, Family, Need
from harl.parts import Parts
from harl.settings import in_range, kind_field, positive, setting

NAME = "tests.fakes.tiny_family:bandit"
KIND = "tests.fakes.tiny_family:{}"
PAYOFF = np.array([[5.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 10.0]], np.float32)


# ------------------------------------------------------------------ the game


@attrs.frozen
class TeamBanditConfig:
    """A one-step team game: both agents get ``PAYOFF[a0, a1]``."""

    kind: str = kind_field("team_bandit")


class TeamBandit:
    n_agents = 2

    def __init__(self) -> None:
        self.observation_spaces = [spaces.Box(-1, 1, (1,), np.float32)] * 2
        self.action_spaces = [spaces.Discrete(3), spaces.Discrete(3)]
        self.state_space = spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, None]:
        return [np.zeros(1, np.float32)] * 2, np.zeros(1, np.float32), None

    def step(self, actions: Sequence[Any]) -> EnvStep:
        a, b = (int(np.asarray(x).ravel()[0]) for x in actions)
        r = PAYOFF[a, b]
        return EnvStep([np.zeros(1, np.float32)] * 2, np.zeros(1, np.float32), None,
                       np.array([r, r], np.float32), terminated=True, truncated=False)

    def close(self) -> None:
        pass


registry.register("env", TeamBanditConfig, lambda config: TeamBandit())


# ------------------------------------------------------------------ the stages


class LogitTeam(nn.Module):
    """One row of action logits per agent; acts without looking at the observation."""

    def __init__(self, action_spaces: Sequence[spaces.Discrete]) -> None:
        super().__init__()
        self.logits = nn.ParameterList([nn.Parameter(torch.zeros(int(s.n))) for s in action_spaces])

    def initial_hidden(self, n_envs: int, device: Any) -> None:
        return None

    def act(self, obs: Sequence[torch.Tensor], avail: Any, deterministic: bool = True, hidden: Any = None,
            starts: Any = None, generator: torch.Generator | None = None) -> tuple[list[torch.Tensor], None]:
        n = obs[0].shape[0]
        if deterministic:
            return [lg.argmax().expand(n, 1) for lg in self.logits], None
        return [torch.multinomial(lg.softmax(-1), n, replacement=True, generator=generator)[:, None]
                for lg in self.logits], None


@attrs.frozen
class BanditCollectorConfig:
    """Sampled actions, ``steps`` vector steps of ``n_envs`` envs per iteration."""

    n_envs: int = setting(8, "envs stepped together", positive())
    steps: int = setting(4, "vector steps per iteration", positive())


@attrs.frozen
class Stats:
    env_steps: int
    episodes: list[dict[str, Any]]

    def row(self) -> dict[str, Any]:
        return {}


class BanditCollector:
    def __init__(self, config: BanditCollectorConfig, parts: Parts) -> None:
        self.config, self.venv, self.policy, self.seed = config, parts.venv, parts.policy, parts.env_seed
        self.generator = torch.Generator().manual_seed(parts.env_seed)
        self.obs: Any = None

    @property
    def steps_per_iteration(self) -> int:
        return self.config.n_envs * self.config.steps

    @torch.no_grad()
    def collect(self, buffer: BanditBuffer) -> Stats:
        if self.obs is None:
            self.obs, _, _ = self.venv.reset(seed=self.seed)
        episodes: list[dict[str, Any]] = []
        for _ in range(self.config.steps):
            obs = [torch.as_tensor(o) for o in self.obs]
            actions, _ = self.policy.act(obs, None, deterministic=False, generator=self.generator)
            step = self.venv.step([a.numpy() for a in actions])
            buffer.insert((actions, torch.as_tensor(step.rewards)))
            self.obs = step.obs
            episodes.extend(step.episode_infos)
        return Stats(self.steps_per_iteration, episodes)

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state(), "env": self.venv.get_rng_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        self.venv.set_rng_state(state["env"])


@attrs.frozen
class BanditBufferConfig:
    """What one iteration collected; emptied by each update."""


class BanditBuffer:
    def __init__(self) -> None:
        self.steps: list[tuple[list[torch.Tensor], torch.Tensor]] = []

    def insert(self, record: tuple[list[torch.Tensor], torch.Tensor]) -> None:
        self.steps.append(record)

    def take(self) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Per agent ``(N,)`` actions and ``(N, A)`` rewards; the buffer is empty afterwards."""
        actions = [torch.cat([a[i] for a, _ in self.steps]).flatten() for i in range(len(self.steps[0][0]))]
        rewards = torch.cat([r for _, r in self.steps])
        self.steps = []
        return actions, rewards


@attrs.frozen
class NoReturnsConfig:
    """One-step games: the reward is the return."""


class NoReturns:
    def compute(self, buffer: Any) -> None:
        return None


@attrs.frozen
class BaselineConfig:
    """A running mean of the reward, subtracted from it."""

    rate: float = setting(0.1, "weight of each new batch's mean", in_range(0, 1, low_open=True))


class Baseline(nn.Module):
    def __init__(self, rate: float) -> None:
        super().__init__()
        self.rate = rate
        self.register_buffer("mean", torch.zeros(()))

    def track(self, rewards: torch.Tensor) -> None:
        self.mean += self.rate * (rewards.mean() - self.mean)


@attrs.frozen
class ReinforceConfig:
    """``[updater.objective]``: the step size."""

    lr: float = setting(0.1, "Adam's learning rate", in_range(0, None, low_open=True))


@attrs.frozen
class ReinforceUpdaterConfig:
    """Each agent's REINFORCE step on its own logits."""

    objective: Any = setting(factory=ReinforceConfig, doc="the step ([updater.objective])")


@attrs.frozen
class UpdateStats:
    loss: float
    baseline: float

    def row(self) -> dict[str, Any]:
        return {"loss": self.loss, "baseline": self.baseline}


class ReinforceUpdater:
    def __init__(self, team: LogitTeam, baseline: Baseline, lr: float) -> None:
        self.policy, self.baseline = team, baseline
        self.optimizer = torch.optim.Adam(team.parameters(), lr=lr)

    def update(self, buffer: BanditBuffer, progress: float) -> UpdateStats:
        actions, rewards = buffer.take()
        advantage = rewards - self.baseline.mean
        loss = -sum((lg.log_softmax(-1)[a] * advantage[:, i]).mean()
                    for i, (lg, a) in enumerate(zip(self.policy.logits, actions)))
        self.optimizer.zero_grad()
        loss.backward()  # type: ignore[union-attr]
        self.optimizer.step()
        self.baseline.track(rewards)
        return UpdateStats(float(loss.detach()), float(self.baseline.mean))

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])


for slot, config in (("collector", BanditCollectorConfig), ("buffer", BanditBufferConfig),
                     ("returns", NoReturnsConfig), ("critic", BaselineConfig),
                     ("updater", ReinforceUpdaterConfig), ("updater.objective", ReinforceConfig)):
    registry.register(slot, config, None, family=NAME)


# ------------------------------------------------------------------ the family


def build(spec: Any, parts: Parts) -> Built:
    """The team first, then the baseline, the buffer, the collector (which acts with the team)."""
    parts = attrs.evolve(parts, policy=LogitTeam(parts.act_spaces))  # Parts is a frozen record
    baseline = Baseline(spec.critic.rate)
    updater = ReinforceUpdater(parts.policy, baseline, spec.updater.objective.lr)
    return Built(parts.policy, baseline, NoReturns(), BanditBuffer(), BanditCollector(spec.collector, parts), updater)


def checks(tables: Mapping[str, Any]) -> Iterable[tuple[list[str], str]]:
    if tables["policy"].share_parameters:
        yield (["policy", "share_parameters"], "the bandit family keeps one row of logits per agent; "
               "set policy.share_parameters = false")


def memory(spec: Any, spaces: Any) -> list[Need]:
    return [Need(f"collector.n_envs x collector.steps = {spec.collector.n_envs * spec.collector.steps} steps",
                 64 * spec.collector.n_envs * spec.collector.steps, "collector.n_envs or collector.steps")]


FAMILY = registry.register_family(Family(
    NAME, "independent REINFORCE on action logits (a test's family)", build,
    lambda spec: SimpleNamespace(n_envs=spec.collector.n_envs), checks, memory,
    defaults={slot: KIND.format(config.__name__) for slot, config in (
        ("buffer", BanditBufferConfig), ("returns", NoReturnsConfig), ("critic", BaselineConfig),
        ("updater", ReinforceUpdaterConfig), ("updater.objective", ReinforceConfig))}))
