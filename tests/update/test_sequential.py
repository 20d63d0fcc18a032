"""The sequential (HA) and simultaneous updaters with stub learners that record their factor."""

from __future__ import annotations

import torch

from harl.buffers.rollout import AgentBatch
from harl.update.sequential import sequential_update
from harl.update.simultaneous import simultaneous_update


class StubLearner:
    """Records the factor it is given; after its update its ratio is a fixed per-sample tensor."""

    def __init__(self, ratio: torch.Tensor, log: list[int], index: int) -> None:
        self._ratio = ratio
        self.received: torch.Tensor | None = None
        self.log, self.index = log, index

    def update(self, batch: AgentBatch, factor: torch.Tensor):  # noqa: ANN201
        self.received = factor.clone()
        self.log.append(self.index)

    def ratio(self, batch: AgentBatch) -> torch.Tensor:
        return self._ratio


def batch(n: int) -> AgentBatch:
    z = torch.zeros(n, 1)
    return AgentBatch(obs=z, actions=z, old_log_probs=z, avail=None, active=torch.ones(n, 1), advantages=z)


def make(n_agents: int = 3, n: int = 4) -> tuple[list[StubLearner], list[torch.Tensor], list[int]]:
    g = torch.Generator().manual_seed(0)
    ratios = [torch.rand(n, 1, generator=g) + 0.5 for _ in range(n_agents)]
    log: list[int] = []
    return [StubLearner(r, log, i) for i, r in enumerate(ratios)], ratios, log


def test_agent_k_sees_the_product_of_its_predecessors_ratios() -> None:
    """In order (2, 0, 1): agent 2 gets 1, agent 0 gets r2, agent 1 gets r2 * r0."""
    learners, ratios, log = make()
    sequential_update(learners, [batch(4)] * 3, order=[2, 0, 1])
    assert log == [2, 0, 1]
    torch.testing.assert_close(learners[2].received, torch.ones(4, 1))
    torch.testing.assert_close(learners[0].received, ratios[2])
    torch.testing.assert_close(learners[1].received, ratios[2] * ratios[0])


def test_simultaneous_agents_all_see_factor_one() -> None:
    """MA updates ignore the other agents' changes: every factor is exactly 1."""
    learners, _, _ = make()
    simultaneous_update(learners, [batch(4)] * 3)
    for learner in learners:
        torch.testing.assert_close(learner.received, torch.ones(4, 1))
