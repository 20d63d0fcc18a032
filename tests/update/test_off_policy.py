"""The off-policy updater: what each agent sees of the others, warm-up, delayed updates."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from harl.buffers.records import Transition
from harl.buffers.replay import ReplayBatch, ReplayBuffer
from harl.policy.off_policy import DeterministicActor, KeptForward, OffPolicyActors, SquashedGaussianActor
from harl.returns.n_step import NStepConfig, NStepReturns
from harl.update.objectives.ddpg import DeterministicLearner
from harl.update.objectives.sac import SACConfig, SACLearner
from harl.update.objectives.td3 import TD3Config
from harl.update.off_policy import OffPolicyUpdater, actor_round
from harl.update.q_critic import QCritic, QCriticConfig, QCriticLearner
from harl.update.sequential import SequentialConfig
from harl.update.simultaneous import SimultaneousConfig


class StubAgent:
    """Its action is ``10 * index + version``; ``update`` records the actions it was handed."""

    stat_names = ("actor_loss",)
    base_lr = 1.0

    def __init__(self, index: int) -> None:
        self.index = index
        self.version = 0
        self.seen: list[float] | None = None
        self.optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
        self.updates = self.soft_updates = 0

    def _action(self) -> torch.Tensor:
        return torch.full((2, 1), float(10 * self.index + self.version))

    def next_action(self, batch: ReplayBatch) -> tuple[torch.Tensor, None]:
        return torch.zeros(batch.size, 1), None

    def initial_action(self, batch: Any) -> torch.Tensor:
        return self._action()

    def update(self, batch: Any, actions: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        self.seen = [float(a[0, 0]) for a in actions]
        self.version += 1
        self.updates += 1
        return {"actor_loss": torch.tensor(float(self.index))}

    def updated_action(self, batch: Any, actions: list[torch.Tensor]) -> torch.Tensor:
        return self._action()

    def soft_update(self) -> None:
        self.soft_updates += 1

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


@pytest.mark.parametrize("order", [[0, 1, 2, 3], [2, 0, 3, 1]])
def test_sequential_agents_see_their_predecessors_updated_actions(order: list[int]) -> None:
    """Agent k sees version 1 (updated) of every agent before it in the order, version 0 of the rest."""
    agents = [StubAgent(i) for i in range(4)]
    actor_round(agents, None, order, sequential=True)  # type: ignore[arg-type]
    for position, i in enumerate(order):
        before = set(order[:position])
        expected = [10 * j + (1 if j in before else 0) for j in range(4)]
        assert agents[i].seen == expected


def test_simultaneous_agents_see_only_pre_update_actions() -> None:
    """MADDPG / MATD3: every agent sees everyone's pre-update actions, whatever the order."""
    agents = [StubAgent(i) for i in range(3)]
    actor_round(agents, None, [2, 1, 0], sequential=False)  # type: ignore[arg-type]
    for agent in agents:
        assert agent.seen == [0.0, 10.0, 20.0]


def test_simultaneous_agents_can_see_the_replayed_actions() -> None:
    """HARL's MA runner: each agent's Q holds the batch's replayed actions for the others (its own slot fresh)."""
    agents = [StubAgent(i) for i in range(3)]
    replayed = [torch.full((2, 1), -1.0 - j) for j in range(3)]
    actor_round(agents, None, [2, 1, 0], sequential=False, replayed=replayed)  # type: ignore[arg-type]
    for agent in agents:
        assert agent.seen == [-1.0, -2.0, -3.0]


@pytest.mark.parametrize(("mode", "expected"), [("replayed", 0.0), ("current", 15.0)])
def test_updater_hands_the_replayed_actions_by_default(mode: str, expected: float) -> None:
    """``others_actions``: "replayed" (default, HARL) gives agent 0 agent 1's stored action (0 in the
    buffer); "current" gives agent 1's policy action (10 + version 5 in the 6th of 6 gradient steps)."""
    agents = [StubAgent(i) for i in range(2)]
    updater = updater_with(agents, SimultaneousConfig(others_actions=mode), warmup=0, policy_freq=1)
    updater.update(small_buffer(3), progress=0.0)
    assert agents[0].seen is not None and agents[0].seen[1] == expected


def small_buffer(transitions_rows: int) -> ReplayBuffer:
    spaces_obs = [spaces.Box(-1, 1, (2,), np.float32)] * 2
    spaces_act = [spaces.Box(-1, 1, (1,), np.float32)] * 2
    buffer = ReplayBuffer(spaces_obs, spaces_act, 3, n_envs=2, capacity=100)
    for _ in range(transitions_rows):
        buffer.insert(Transition(obs=[np.zeros((2, 2))] * 2, avail=None, state=np.zeros((2, 3)),
                                 actions=[np.zeros((2, 1))] * 2, rewards=np.ones((2, 2)), terminated=np.zeros(2, bool),
                                 truncated=np.zeros(2, bool), active=np.ones((2, 2)), next_obs=[np.zeros((2, 2))] * 2,
                                 next_avail=None, next_state=np.zeros((2, 3))))
    return buffer


def updater_with(agents: list[StubAgent], config: Any, warmup: int, policy_freq: int) -> OffPolicyUpdater:
    cfg = QCriticConfig(hidden_sizes=(4,))
    critic = QCritic(3, [spaces.Box(-1, 1, (1,), np.float32)] * 2, cfg)
    return OffPolicyUpdater(config, agents, QCriticLearner(critic, cfg), NStepReturns(NStepConfig()), 4, 6,
                            warmup, policy_freq, torch.Generator().manual_seed(0))


def test_no_gradient_step_until_the_buffer_holds_more_than_the_warm_up() -> None:
    """While the buffer holds only warm-up transitions the stats row is empty; then updates run."""
    agents = [StubAgent(0), StubAgent(1)]
    updater = updater_with(agents, SequentialConfig(), warmup=4, policy_freq=1)
    buffer = small_buffer(2)  # 4 transitions: all warm-up
    stats = updater.update(buffer, 0.0)
    assert stats.updates == 0 and stats.row()["critic_loss"] is None and agents[0].updates == 0
    assert set(stats.row()) >= {"agent0_actor_loss", "agent1_actor_loss", "q_mean"}
    buffer = small_buffer(3)
    stats = updater.update(buffer, 0.0)
    assert stats.updates == 6 and agents[0].updates == 6 and stats.row()["agent1_actor_loss"] == 1.0


def test_delayed_updates_run_actors_and_targets_every_policy_freq_critic_steps() -> None:
    """TD3's policy_freq = 3: 6 critic steps give 2 actor rounds and 2 target updates."""
    agents = [StubAgent(0), StubAgent(1)]
    updater = updater_with(agents, SimultaneousConfig(), warmup=0, policy_freq=3)
    stats = updater.update(small_buffer(3), 0.0)
    assert stats.updates == 6 and agents[1].updates == 2 and agents[1].soft_updates == 2


BOX2 = spaces.Box(-1, 1, (2,), np.float32)


def team_round(kind: str, seed: int = 0) -> tuple[list[nn.Module], list[Any], QCritic, ReplayBatch]:
    """Three agents (DDPG or SAC), a twin critic and a batch, all from ``seed``."""
    torch.manual_seed(seed)
    if kind == "ddpg":
        actors: list[nn.Module] = [DeterministicActor(3, BOX2, (8,), "relu", False, 0.1) for _ in range(3)]
    else:
        actors = [SquashedGaussianActor(3, BOX2, (8,), "relu", False) for _ in range(3)]
    team = OffPolicyActors(actors, with_targets=kind == "ddpg")
    critic = QCritic(4, [BOX2] * 3, QCriticConfig(twin=True, hidden_sizes=(16,)))
    if kind == "ddpg":
        agents: list[Any] = [DeterministicLearner(i, team, critic, TD3Config()) for i in range(3)]
    else:
        agents = [SACLearner(i, team, critic, SACConfig(), -2.0) for i in range(3)]
    n = 16
    batch = ReplayBatch(state=torch.randn(n, 4), obs=[torch.randn(n, 3) for _ in range(3)],
                        actions=[torch.zeros(n, 2)] * 3, avail=[None] * 3, active=torch.ones(n, 3),
                        returns=torch.zeros(n, 3), discount=torch.zeros(n), steps=torch.ones(n, dtype=torch.long),
                        next_state=torch.randn(n, 4), next_obs=[torch.randn(n, 3) for _ in range(3)],
                        next_avail=[None] * 3)
    critic.nets.requires_grad_(False)
    return actors, agents, critic, batch


class TestKeptForward:
    """An agent's round-start forward pass serves its own loss and leaves every number as it was."""

    @pytest.mark.parametrize("kind", ["ddpg", "sac"])
    @pytest.mark.parametrize("sequential", [True, False])
    def test_weights_after_a_round_match_the_plain_computation(self, kind: str, sequential: bool) -> None:
        """Same actor weights as a round where each loss re-runs its actor."""
        actors, agents, critic, batch = team_round(kind)
        torch.manual_seed(9)
        actor_round(agents, batch, [2, 0, 1], sequential)
        fast = [p.detach().clone() for a in actors for p in a.parameters()]
        actors, agents, critic, batch = team_round(kind)
        torch.manual_seed(9)
        actions = [agent.initial_action(batch) for agent in agents]
        for position, i in enumerate([2, 0, 1]):
            agents[i].round_start.kept = None  # forget the round-start pass: recompute
            agents[i].update(batch, list(actions))
            if sequential and position < 2:
                actions[i] = agents[i].updated_action(batch, actions)
        plain = [p.detach() for a in actors for p in a.parameters()]
        for f, p in zip(fast, plain):
            torch.testing.assert_close(f, p)

    @pytest.mark.parametrize(("sequential", "expected"), [(True, [2, 1, 2]), (False, [1, 1, 1])])
    def test_one_forward_pass_per_agent_plus_updated_actions(self, sequential: bool, expected: list[int]) -> None:
        """The round-start pass + one per updated action with a reader (order 2, 0, 1: agent 1 is last), not 2 + 1."""
        actors, agents, critic, batch = team_round("ddpg")
        calls = [0, 0, 0]
        for i, actor in enumerate(actors):
            actor.register_forward_hook(lambda *_, i=i: calls.__setitem__(i, calls[i] + 1))
        actor_round(agents, batch, [2, 0, 1], sequential)
        assert calls == expected

    def test_a_stale_forward_is_recomputed(self) -> None:
        """After the module's weights change, or for other observations, take() computes afresh."""
        actor = nn.Linear(2, 1)
        kept = KeptForward(actor)
        obs = torch.randn(4, 2)
        kept.keep(obs, "round start")
        assert kept.take(obs, lambda: "fresh") == "round start"
        assert kept.take(obs, lambda: "fresh") == "fresh"  # taken once
        kept.keep(obs, "round start")
        with torch.no_grad():
            actor.weight.add_(1.0)
        assert kept.take(obs, lambda: "fresh") == "fresh"
        kept.keep(obs, "round start")
        assert kept.take(obs.clone(), lambda: "fresh") == "fresh"
