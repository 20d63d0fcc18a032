"""Evaluation and rendering carry a value-family team's state: its GRU states and previous actions.

The Evaluator and ``harl render``'s acting loop pass ``hidden`` back as ``act`` returned it
(``harl.evaluator.ActingPolicy``); ``AgentQNetworks.act`` changes nothing in place, so a loop
that relied on in-place updates fed every step a zero GRU state and no previous action.  Here a
recurrent team that takes its previous action is driven by the real loops, and the state each
step sees is checked against a manual unroll of the team's episodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from harl.envs.protocol import VectorStep
from harl.evaluator import Evaluator, EvaluatorConfig
from harl.policy.agent_q import AgentQNetworks, greedy
from harl.render import play_episode

OBS_DIM, N_ACTIONS, N_AGENTS = 3, 4, 2


def memory_team() -> AgentQNetworks:
    torch.manual_seed(0)
    obs = [spaces.Box(-1, 1, (OBS_DIM,), np.float32)] * N_AGENTS
    return AgentQNetworks(obs, [spaces.Discrete(N_ACTIONS)] * N_AGENTS, hidden_dim=8, recurrent=True,
                          last_action=True)


class Spy:
    """The team, recording what each ``act`` is given; it acts exactly as the team does."""

    def __init__(self, team: AgentQNetworks) -> None:
        self.team = team
        self.seen: list[tuple[list[torch.Tensor], Any, torch.Tensor]] = []

    def initial_hidden(self, n_envs: int, device: Any) -> Any:
        return self.team.initial_hidden(n_envs, device)

    def act(self, obs: Any, avail: Any, deterministic: bool = True, hidden: Any = None,
            starts: Any = None) -> tuple[list[torch.Tensor], Any]:
        self.seen.append(([o.clone() for o in obs], hidden, starts.clone()))
        return self.team.act(obs, avail, deterministic, hidden=hidden, starts=starts)


class RandomObsVectorEnv:
    """Env ``k``'s episodes last ``lengths[k]`` steps; fresh random observations every step."""

    tensor_native = False

    def __init__(self, lengths: list[int]) -> None:
        self.lengths = np.array(lengths)
        self.n_envs = len(lengths)
        self.t = np.zeros(self.n_envs, dtype=np.int64)
        self.rng = np.random.default_rng(0)

    def close(self) -> None:
        pass

    def _obs(self) -> list[np.ndarray]:
        return [self.rng.uniform(-1, 1, (self.n_envs, OBS_DIM)).astype(np.float32) for _ in range(N_AGENTS)]

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, None]:
        self.t[:] = 0
        return self._obs(), np.zeros((self.n_envs, 1), np.float32), None

    def step(self, actions: list[np.ndarray]) -> VectorStep:
        self.t += 1
        ended = self.t >= self.lengths
        infos = [{"return": 0.0, "length": int(self.t[k])} for k in np.flatnonzero(ended)]
        self.t[ended] = 0
        n, obs = self.n_envs, self._obs()
        return VectorStep(obs=obs, state=np.zeros((n, 1), np.float32), avail=None,
                          rewards=np.zeros((n, N_AGENTS), np.float32), terminated=ended,
                          truncated=np.zeros(n, bool), active=np.ones((n, N_AGENTS), bool),
                          final_state=np.zeros((n, 1), np.float32), episode_infos=infos, final_obs=obs)


class RandomObsEnv:
    """One env (what ``harl render`` steps): ``length``-step episodes of random observations."""

    def __init__(self, length: int) -> None:
        self.length, self.t = length, 0
        self.rng = np.random.default_rng(1)

    def _obs(self) -> list[np.ndarray]:
        return [self.rng.uniform(-1, 1, OBS_DIM).astype(np.float32) for _ in range(N_AGENTS)]

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray, None]:
        self.t = 0
        return self._obs(), np.zeros(1, np.float32), None

    def step(self, actions: list[np.ndarray]) -> Any:
        self.t += 1
        done = self.t >= self.length
        return VectorStep(obs=self._obs(), state=np.zeros(1, np.float32), avail=None,
                          rewards=np.zeros(N_AGENTS, np.float32), terminated=np.array(done),
                          truncated=np.array(False), active=np.ones(N_AGENTS, bool),
                          final_state=np.zeros(1, np.float32), episode_infos=[], final_obs=[])


def state_seen(hidden: tuple[torch.Tensor, torch.Tensor], starts: torch.Tensor, row: int
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """The (GRU state, previous actions) row ``row`` acts from: ``hidden``, restarted where ``starts``."""
    h, last = hidden
    if starts[row] != 0:
        return torch.zeros_like(h[row]), torch.full_like(last[row], -1)
    return h[row], last[row]


def check_against_unroll(team: AgentQNetworks, seen: list[tuple[list[torch.Tensor], Any, torch.Tensor]],
                         n_rows: int) -> None:
    """Each row's state at each step equals a step-by-step unroll of its episodes from zeros; at
    least one step sees a non-zero GRU state and a previous action."""
    remembered = 0
    for row in range(n_rows):
        h = torch.zeros(N_AGENTS, team.hidden_dim)
        last = torch.full((N_AGENTS,), -1, dtype=torch.long)
        for obs, hidden, starts in seen:
            if starts[row] != 0:
                h, last = torch.zeros_like(h), torch.full_like(last, -1)
            got_h, got_last = state_seen(hidden, starts, row)
            torch.testing.assert_close(got_h, h)
            assert torch.equal(got_last, last)
            remembered += int(bool(h.abs().sum() > 0) and bool((last >= 0).all()))
            with torch.no_grad():
                x = team.inputs(team.stack_obs([o[row : row + 1] for o in obs]), last.unsqueeze(0))
                q, h1 = team(x, h.unsqueeze(0))
            last, h = greedy(q, torch.ones_like(q))[0], h1[0]
    assert remembered > 0


def test_the_evaluator_carries_the_gru_state_and_the_previous_actions() -> None:
    """Two envs whose episodes end at different steps (3 and 4): every step sees the state the
    team's own unroll gives, restarted where an episode begins."""
    team = memory_team()
    spy = Spy(team)
    config = EvaluatorConfig(episodes=4, n_envs=2)
    stats = Evaluator(config, RandomObsVectorEnv([3, 4]), spy, torch.device("cpu"), seed=0).evaluate()
    assert stats.episodes == 4 and len(spy.seen) == 8
    check_against_unroll(team, spy.seen, 2)


def test_render_carries_the_gru_state_and_the_previous_actions() -> None:
    """``harl render``'s acting loop (``play_episode``): the same, one env, two episodes."""
    team = memory_team()
    spy = Spy(team)
    env = RandomObsEnv(5)
    frames: list[int] = []
    for episode in range(2):
        total, steps = play_episode(env, spy, seed=episode, after=lambda: frames.append(env.t))
        assert steps == 5
    assert len(frames) == 12 and len(spy.seen) == 10
    check_against_unroll(team, spy.seen, 1)
