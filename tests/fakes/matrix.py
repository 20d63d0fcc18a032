"""A one-step cooperative matrix game for two agents, where coordination matters.

Payoff (row: agent 0, column: agent 1)::

             b0    b1    b2
        a0  -10    20    20
        a1   20   -10   -10
        a2   20   -10   -10

From uniform policies action 0 is each agent's best single choice (expected payoff 10
against 0), but the joint action (a0, b0) is punished: the optimum is one agent on
action 0 and the other elsewhere.  Updated simultaneously, both agents move to action
0 together and then both away from it (miscoordination).  Updated sequentially (HA),
the second agent sees, through the ratio factor, that the first already moved to 0
and moves elsewhere.
"""

from __future__ import annotations

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.protocol import EnvStep
from harl.registry import register
from harl.settings import kind_field

PAYOFF = np.array([[-10.0, 20.0, 20.0], [20.0, -10.0, -10.0], [20.0, -10.0, -10.0]], dtype=np.float32)


@attrs.frozen
class MatrixGameConfig:
    kind: str = kind_field("matrix")


class MatrixGame:
    n_agents = 2

    def __init__(self, payoff: np.ndarray = PAYOFF) -> None:
        self.payoff = payoff
        self.observation_spaces = [spaces.Box(-1, 1, (1,), np.float32)] * 2
        self.action_spaces = [spaces.Discrete(payoff.shape[0]), spaces.Discrete(payoff.shape[1])]
        self.state_space = spaces.Box(-1, 1, (1,), np.float32)
        self._obs = [np.zeros(1, np.float32), np.zeros(1, np.float32)]

    def reset(self, seed: int | None = None):  # noqa: ANN201
        return list(self._obs), np.zeros(1, np.float32), None

    def step(self, actions) -> EnvStep:  # noqa: ANN001
        a, b = int(np.asarray(actions[0]).ravel()[0]), int(np.asarray(actions[1]).ravel()[0])
        r = self.payoff[a, b]
        return EnvStep(list(self._obs), np.zeros(1, np.float32), None,
                       np.array([r, r], np.float32), terminated=True, truncated=False)

    def close(self) -> None:
        pass


register("env", MatrixGameConfig, lambda config: MatrixGame())
