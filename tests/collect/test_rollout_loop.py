"""The one rollout loop (harl/collect/rollout.py) drives any actor (harl/collect/actor.py) the same way:
the first collect begins the envs' episodes, each later one rolls over, a failure abandons, and a
checkpoint's env state or episode starts are where the next start begins."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harl.buffers.records import StartRecord
from harl.collect.rollout import RolloutLoop
from harl.envs.protocol import VectorStep


class Envs:
    """Two envs of one agent whose episodes last 3 steps; the observation is the step count."""

    n_envs, n_agents = 2, 1

    def __init__(self) -> None:
        self.t = 0
        self.calls: list[str] = []

    def _obs(self) -> list[np.ndarray]:
        return [np.full((2, 1), self.t % 3, np.float32)]

    def reset(self, seed: int | None = None) -> Any:
        self.calls.append(f"reset {seed}")
        self.t = 0
        return self._obs(), np.zeros((2, 1), np.float32), None

    def restart(self, starts: list[dict[str, Any]]) -> Any:
        self.calls.append(f"restart {starts}")
        self.t = 0
        return self._obs(), np.zeros((2, 1), np.float32), None

    def step(self, actions: list[Any]) -> VectorStep:
        self.t += 1
        ended = np.full(2, self.t % 3 == 0)
        return VectorStep(obs=self._obs(), state=np.zeros((2, 1), np.float32), avail=None,
                          rewards=np.ones((2, 1), np.float32), terminated=ended, truncated=np.zeros(2, bool),
                          active=np.ones((2, 1)), final_state=np.zeros((2, 1)),
                          episode_infos=[{"return": 3.0}] * int(ended.sum()))

    def episode_starts(self) -> list[dict[str, Any]]:
        return [{"steps": self.t % 3}] * 2

    def get_state(self) -> Any:
        return {"t": self.t}

    def set_state(self, state: Any) -> None:
        self.calls.append(f"set_state {state}")
        self.t = state["t"]


class Recorder:
    """An actor that writes down what the loop asked of it."""

    def __init__(self, fail_at: int = -1) -> None:
        self.calls: list[str] = []
        self.fail_at = fail_at
        self.steps = 0

    def observe_first(self, first: StartRecord) -> None:
        self.calls.append("first")

    def roll_over(self) -> None:
        self.calls.append("roll_over")

    def select_action(self) -> list[Any]:
        if self.steps == self.fail_at:
            raise KeyboardInterrupt
        return [np.zeros((2, 1))]

    def observe(self, step: VectorStep) -> None:
        self.steps += 1
        self.calls.append("observe")

    def end_rollout(self) -> None:
        self.calls.append("end")

    def abandon(self) -> None:
        self.calls.append("abandon")

    def carried(self) -> dict[str, Any] | None:
        return {"steps": self.steps}

    def carry_in(self, carried: dict[str, Any]) -> None:
        self.calls.append(f"carry_in {carried}")

    def compiled(self, eager_s: float) -> None:
        return None


def test_the_loop_begins_rolls_over_and_ends_each_rollout() -> None:
    envs, actor = Envs(), Recorder()
    loop = RolloutLoop(envs, seed=7, steps=2, own_state=lambda: {"mine": 1})  # type: ignore[arg-type]
    first = loop.collect(actor)
    second = loop.collect(actor)
    assert envs.calls == ["reset 7"]
    assert actor.calls == ["first", "observe", "observe", "end", "roll_over", "observe", "observe", "end"]
    assert (first.env_steps, len(first.episodes), len(second.episodes)) == (4, 0, 2)
    state = loop.state_dict()
    assert state == {"started": True, "episode_starts": [{"steps": 1}] * 2, "env_state": {"t": 4},
                     "next": {"steps": 4}, "mine": 1}


def test_a_failed_rollout_is_abandoned_and_the_checkpoint_keeps_the_last_whole_one() -> None:
    envs, actor = Envs(), Recorder(fail_at=3)
    loop = RolloutLoop(envs, seed=7, steps=2)  # type: ignore[arg-type]
    loop.collect(actor)
    whole = loop.state_dict()
    with pytest.raises(KeyboardInterrupt):
        loop.collect(actor)
    assert actor.calls[-1] == "abandon"
    assert loop.state_dict() == whole


def test_a_checkpoint_resumes_the_env_state_or_restarts_the_episodes() -> None:
    envs, actor = Envs(), Recorder()
    loop = RolloutLoop(envs, seed=7, steps=2)  # type: ignore[arg-type]
    loop.load_state_dict({"started": True, "episode_starts": [{"steps": 2}] * 2, "env_state": {"t": 5},
                          "next": {"steps": 5}})
    loop.collect(actor)
    assert envs.calls == ["set_state {'t': 5}"] and actor.calls[0] == "carry_in {'steps': 5}"
    envs, actor = Envs(), Recorder()
    loop = RolloutLoop(envs, seed=7, steps=2)  # type: ignore[arg-type]
    loop.load_state_dict({"episode_starts": [{"steps": 0}] * 2, "env_steps": 10})  # an off-policy checkpoint of old
    loop.collect(actor)
    assert envs.calls == ["restart [{'steps': 0}, {'steps': 0}]"] and actor.calls[0] == "first"
