"""The off-policy facade: HARL's shapes, warm-up, and HARL's loop learning the matrix game."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from harl.runners import RUNNER_REGISTRY
from tests.runners.dicts import harl_dicts, off_policy


def runner(tmp_path: Path, algo: str = "hasac", **pipeline: Any) -> Any:
    return RUNNER_REGISTRY[algo](*harl_dicts(tmp_path, algo), pipeline=off_policy(**pipeline))


def step_and_insert(r: Any, obs: Any, share_obs: Any, actions: Any) -> tuple[Any, ...]:
    new_obs, new_share, rewards, dones, infos, avail = r.envs.step(actions)
    r.insert((share_obs, obs.transpose(1, 0, 2), actions.transpose(1, 0, 2), None, rewards, dones, infos,
              new_share, new_obs, None))
    return new_obs, new_share, avail, rewards


def test_warmup_fills_the_replay_and_returns_harls_arrays(tmp_path: Path) -> None:
    """warmup_steps // n_threads random steps go into the replay; it returns obs, share_obs, avail."""
    r = runner(tmp_path)
    try:
        obs, share_obs, avail = r.warmup()
        assert obs.shape == (2, 3, 5) and share_obs.shape == (2, 3, 4) and avail.shape == (2, 3, 5)
        assert r.stages.buffer.size == 10
    finally:
        r.close()


def test_actions_have_harls_shape_and_respect_masks(tmp_path: Path) -> None:
    """sample_actions and get_actions give (n_threads, n_agents, widest action); agent 1 never takes action 3."""
    r = runner(tmp_path)
    try:
        obs, _, avail = r.envs.reset()
        for _ in range(20):
            for actions in (r.sample_actions(avail), r.get_actions(obs, avail, add_random=True),
                            r.get_actions(obs, avail, add_random=False)):
                assert actions.shape == (2, 3, 2)
                assert not (actions[:, 1, 0] == 3).any() and (actions[:, 1, 1] == 0).all()
                assert (np.abs(actions[:, 0]) <= 1).all()
        assert r.get_actions(obs, avail, add_random=False).tolist() == r.get_actions(obs, avail, False).tolist()
    finally:
        r.close()


def test_harls_loop_learns_the_matrix_game(tmp_path: Path) -> None:
    """HAD3QN through HARL's off-policy loop: greedy joint payoff reaches 20 (uniform play: about 4.4)."""
    r = runner(tmp_path, algo="had3qn", env="matrix", objective="d3qn", steps=1600,
               collector={"n_envs": 16, "rollout_length": 4, "updates_per_round": 8, "warmup_steps": 256},
               buffer={"batch_size": 64, "capacity": 4000}, returns={"n_step": 1}, critic={"kind": "joint_q"})
    try:
        obs, share_obs, avail = r.warmup()
        for step in range(1, 1600 // 16 + 1):
            actions = r.get_actions(obs, avail, add_random=True)
            obs, share_obs, avail, _ = step_and_insert(r, obs, share_obs, actions)
            if step % 4 == 0:
                for _ in range(8):
                    r.train()
        stats = r.eval(1600)
    finally:
        r.close()
    assert stats.mean_return == 20.0
