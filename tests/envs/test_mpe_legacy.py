"""``[env] variant = "pettingzoo_1.22"`` replays pettingzoo 1.22's MPE exactly.

The reference values in ``data/mpe_pettingzoo_1_22.json`` were recorded from pettingzoo
1.22.3 (``simple_spread_v2``, ``simple_reference_v2``, ``simple_speaker_listener_v3``) by
``data/record_mpe_pettingzoo_1_22.py`` (its docstring has the command); pettingzoo 1.22
cannot be installed beside mpe2, hence the fixture.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harl.envs.mpe import MPEConfig, make_mpe_env
from harl.envs.mpe_legacy import self_collision_penalty, to_mpe2_signs
from harl.settings import InvalidSetting

pytest.importorskip("mpe2")

REFERENCE = json.loads((Path(__file__).parent / "data" / "mpe_pettingzoo_1_22.json").read_text())
SCENARIOS = sorted(REFERENCE["scenarios"])


def _replay(scenario: str, variant: str) -> tuple[np.ndarray, np.ndarray]:
    """(rewards (steps, agents), observations (steps, agents*obs)) of the recorded episode."""
    recorded = REFERENCE["scenarios"][scenario]
    env = make_mpe_env(MPEConfig(scenario=scenario, team_reward=False, variant=variant))
    env.reset(seed=recorded["seed"])
    rewards, obs = [], []
    for step in recorded["steps"]:
        out = env.step([np.asarray(a, dtype=np.float32) for a in step["actions"]])
        rewards.append(out.rewards)
        obs.append(np.concatenate(out.obs))
    return np.array(rewards), np.array(obs)


def _recorded(scenario: str) -> tuple[np.ndarray, np.ndarray]:
    steps = REFERENCE["scenarios"][scenario]["steps"]
    return (np.array([s["rewards"] for s in steps]),
            np.array([np.concatenate(s["obs"]) for s in steps]))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rewards_and_observations_equal_pettingzoo_1_22(scenario: str) -> None:
    rewards, obs = _replay(scenario, "pettingzoo_1.22")
    ref_rewards, ref_obs = _recorded(scenario)
    np.testing.assert_allclose(rewards, ref_rewards, atol=2e-6)
    np.testing.assert_allclose(obs, ref_obs, atol=2e-6)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_mpe2_differs_from_pettingzoo_1_22(scenario: str) -> None:
    """Without the variant the same actions give other rewards (so the fixture can fail)."""
    rewards, _ = _replay(scenario, "mpe2")
    assert np.abs(rewards - _recorded(scenario)[0]).max() > 0.05


def test_spread_self_collision_term_is_minus_local_ratio() -> None:
    # pettingzoo 1.22: reward_i = local_ratio * local_i + (1 - local_ratio) * global, and
    # local_i counts agent i's collision with itself: -1 * 0.5 = -0.5 per agent and step;
    # over a 25-step episode the 3-agent team sum is 3 * 25 * -0.5 = -37.5.
    assert self_collision_penalty("simple_spread", 0.5) == -0.5
    assert 3 * 25 * self_collision_penalty("simple_spread", 0.5) == -37.5
    assert self_collision_penalty("simple_reference", 0.5) == 0.0


def test_first_action_moves_the_agent_in_the_same_step() -> None:
    """pettingzoo 1.22 integrates semi-implicitly: the step's action moves the agent.

    Agent 0 starts at rest; action u_x = 5 * (a[1] - a[2]) = 5 (mass 1, dt 0.1, damping 0.25):
    v = 0 * 0.75 + 5 * 0.1 = 0.5, x moves by v * dt = 0.05 in the same step (obs[2:4] is
    the position, obs[0:2] the velocity).  mpe2 moves with the old velocity (0) first.
    """
    push = np.array([0.0, 1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    still = np.zeros(5, dtype=np.float32)
    moved = {}
    for variant in ("pettingzoo_1.22", "mpe2"):
        env = make_mpe_env(MPEConfig(variant=variant))
        obs, _, _ = env.reset(seed=0)
        action = push if variant == "pettingzoo_1.22" else to_mpe2_signs(push)
        after = env.step([action, still, still]).obs
        moved[variant] = (after[0][2] - obs[0][2], after[0][0])
    assert moved["pettingzoo_1.22"] == pytest.approx((0.05, 0.5), abs=1e-6)
    assert moved["mpe2"] == pytest.approx((0.0, 0.5), abs=1e-6)


def test_sign_convention_swaps_movement_pairs_only() -> None:
    action = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(to_mpe2_signs(action), [0, 2, 1, 4, 3, 5, 6, 7])


def test_unknown_variant_is_refused() -> None:
    with pytest.raises(InvalidSetting, match="variant"):
        MPEConfig(variant="v2")
