"""The off-policy updater: what each agent sees of the others, warm-up, delayed updates."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.buffers.replay import ReplayBatch, ReplayBuffer
from harl.returns.n_step import NStepConfig, NStepReturns
from harl.update.off_policy_updater import OffPolicyUpdater, actor_round
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


def small_buffer(transitions_rows: int) -> ReplayBuffer:
    spaces_obs = [spaces.Box(-1, 1, (2,), np.float32)] * 2
    spaces_act = [spaces.Box(-1, 1, (1,), np.float32)] * 2
    buffer = ReplayBuffer(spaces_obs, spaces_act, 3, n_envs=2, capacity=100)
    for _ in range(transitions_rows):
        buffer.add([np.zeros((2, 2))] * 2, None, np.zeros((2, 3)), [np.zeros((2, 1))] * 2, np.ones((2, 2)),
                   np.zeros(2, bool), np.zeros(2, bool), np.ones((2, 2)), [np.zeros((2, 2))] * 2, None,
                   np.zeros((2, 3)))
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
