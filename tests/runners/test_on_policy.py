"""The on-policy facade: HARL's shapes (mixed team padded), HARL's loop = harl's collector, learning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from harl.compose import build_stages
from harl.config.loading import structure_pipeline
from harl.errors import HarlError
from harl.runners import RUNNER_REGISTRY
from tests.runners.dicts import harl_dicts, on_policy


def runner(tmp_path: Path, algo: str = "happo", **pipeline: Any) -> Any:
    return RUNNER_REGISTRY[algo](*harl_dicts(tmp_path, algo), pipeline=on_policy(**pipeline))


def harl_loop(r: Any, iterations: int) -> list[float]:
    """HARL's OnPolicyBaseRunner.run, by hand; the mean step reward of each iteration."""
    rewards = []
    r.warmup()
    for _ in range(iterations):
        r.prep_rollout()
        got = []
        for step in range(r.stages.buffer.length):
            values, actions, log_probs, rnn_states, rnn_states_critic = r.collect(step)
            obs, share_obs, rew, dones, infos, avail = r.envs.step(actions)
            r.insert((obs, share_obs, rew, dones, infos, avail, values, actions, log_probs, rnn_states,
                      rnn_states_critic))
            got.append(rew.mean())
        r.compute()
        r.prep_training()
        r.train()
        r.after_update()
        rewards.append(float(np.mean(got)))
    return rewards


class TestShapes:
    def test_mixed_team_arrays_are_padded_to_the_widest_agent(self, tmp_path: Path) -> None:
        """Counting env (obs 3/5/4; Box(2), Discrete(4), MultiDiscrete([2,3])): HARL's shapes, 2 threads."""
        r = runner(tmp_path)
        try:
            obs, share_obs, avail = r.envs.reset()
            assert obs.shape == (2, 3, 5) and share_obs.shape == (2, 3, 4) and avail.shape == (2, 3, 5)
            assert obs[0, 0, 3:].tolist() == [0, 0] and avail[0, 1].tolist() == [1, 1, 1, 0, 0]
            assert avail[0, 0].tolist() == [0] * 5  # a Box agent has no mask
            r.warmup()
            values, actions, log_probs, rnn, rnn_critic = r.collect(0)
            assert values.shape == (2, 1) and actions.shape == log_probs.shape == (2, 3, 2)
            assert rnn.shape == (2, 3, 1, 16) and rnn_critic.shape == (2, 1, 16)
            assert actions[:, 1, 1].tolist() == [0, 0]  # Discrete: one index, padded
            obs, share_obs, rewards, dones, infos, avail = r.envs.step(actions)
            assert rewards.shape == (2, 3, 1) and dones.shape == (2, 3) and dones.dtype == bool
            assert len(infos) == 2 and len(infos[0]) == 3 and infos[0][0] == {"bad_transition": False}
        finally:
            r.close()

    def test_episode_end_infos_say_truncation_and_keep_the_pre_reset_data(self, tmp_path: Path) -> None:
        """At the time limit (step 3): bad_transition, original_obs/state and harl's episode numbers."""
        r = runner(tmp_path)
        try:
            r.warmup()
            for step in range(3):
                chosen = r.collect(step)
                out = r.envs.step(chosen[1])
                r.insert(out + chosen)
            info = out[4][0][2]
            assert info["bad_transition"] is True and info["length"] == 3
            assert info["original_state"][2] == 3 and out[1][0, 0, 2] == 0  # step 3 before the reset
            assert out[3].all()
        finally:
            r.close()

    def test_insert_before_a_step_says_the_order(self, tmp_path: Path) -> None:
        """insert without collect + envs.step is a one-line HarlError naming HARL's order."""
        r = runner(tmp_path)
        try:
            with pytest.raises(HarlError, match=r"^insert\(data\) needs collect\(step\) and then"):
                r.insert((None,) * 11)
        finally:
            r.close()


def test_harls_loop_trains_exactly_as_harls_collector(tmp_path: Path) -> None:
    """Two iterations of HARL's loop on the facade leave the same networks as harl's own collect/update."""
    r = runner(tmp_path, steps=16)
    try:
        harl_loop(r, 2)
        facade = {k: v.clone() for k, v in r.stages.policy.state_dict().items()}
    finally:
        r.close()
    stages = build_stages(structure_pipeline(on_policy(steps=16), "reference"))
    try:
        for it in range(2):
            stages.collector.collect(stages.buffer)
            stages.returns.compute(stages.buffer)
            stages.updater.update(stages.buffer, progress=it * 8 / 16)
        reference = stages.policy.state_dict()
    finally:
        stages.close()
    assert facade.keys() == reference.keys()
    assert all(torch.equal(facade[k], reference[k]) for k in facade)


def test_harls_loop_learns_the_matrix_game(tmp_path: Path) -> None:
    """HAPPO through HARL's loop: the mean reward rises from about 4.4 (uniform) to 15 or more (optimum 20)."""
    r = runner(tmp_path, env="matrix", n_envs=64, length=4, steps=64 * 4 * 12,
               critic={"lr": 0.01, "value_norm": False}, policy={"input_norm": False},
               updater={"objective": {"kind": "ppo", "lr": 0.01, "epochs": 5}})
    try:
        rewards = harl_loop(r, 12)
    finally:
        r.close()
    assert rewards[0] < 10 and rewards[-1] >= 15, rewards
