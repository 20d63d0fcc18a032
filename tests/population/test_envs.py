"""One vector env split into the members' slices (harl.envs.population)."""

from __future__ import annotations

import numpy as np
import pytest

from harl.envs.population import MemberView, split_start, split_step
from harl.envs.protocol import VectorStep


def test_split_step_hands_each_member_its_worlds_and_its_episodes() -> None:
    terminated = np.array([False, True, False, True, True, False])
    infos = [{"return": 1.0}, {"return": 2.0}, {"return": 3.0}]  # env order: worlds 1, 3, 4
    obs = [np.arange(6.0).reshape(6, 1), np.arange(6.0, 12.0).reshape(6, 1)]
    step = VectorStep(obs=obs, state=np.arange(6.0).reshape(6, 1), avail=None, rewards=np.zeros((6, 2)),
                      terminated=terminated, truncated=np.zeros(6, bool), active=np.ones((6, 2), bool),
                      final_state=np.zeros((6, 1)), episode_infos=infos, final_obs=obs)
    first, second = split_step(step, members=2, n_envs=3)
    assert first.episode_infos == [{"return": 1.0}] and second.episode_infos == infos[1:]
    assert first.obs[1].ravel().tolist() == [6.0, 7.0, 8.0] and second.state.ravel().tolist() == [3.0, 4.0, 5.0]
    assert second.terminated.tolist() == [True, True, False]
    assert first.avail is None and second.final_obs is not None


def test_split_start_and_the_member_view() -> None:
    class Venv:
        n_agents, observation_spaces, action_spaces, state_space = 1, [None], [None], None
        summary = "a fake"

        def episode_starts(self) -> list[dict]:
            return [{"world": k} for k in range(4)]

    view = MemberView(Venv(), index=1, n_envs=2)  # type: ignore[arg-type]
    assert view.episode_starts() == [{"world": 2}, {"world": 3}]
    assert view.summary == "a fake"  # an env's own words pass through
    with pytest.raises(RuntimeError, match="stepped by its population"):
        view.step([])
    (o0, s0, a0), (o1, s1, a1) = split_start([np.arange(4)], np.arange(4) * 10, None, 2, 2)
    assert o1[0].tolist() == [2, 3] and s0.tolist() == [0, 10] and a1 is None
