"""The "gymma" env kind: gymnasium-registered multi-agent envs (LBF, RWARE) as a MultiAgentEnv."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from harl.envs.gymma import GymmaConfig, make_gymma_env
from harl.errors import ConfigError, MissingExtraError

LBF = "lbforaging:Foraging-8x8-2p-2f-coop-v3"
RWARE = "rware:rware-tiny-2ag-v2"


def test_lbf_matches_gymnasium_with_a_team_reward() -> None:
    """Same seed and actions as the raw env: same observations; every agent gets the summed reward."""
    pytest.importorskip("lbforaging")
    env = make_gymma_env(GymmaConfig(id=LBF))
    reference = gymnasium.make(LBF)
    assert env.n_agents == 2 and env.action_spaces == [gymnasium.spaces.Discrete(6)] * 2
    assert [s.shape for s in env.observation_spaces] == [(12,), (12,)] and env.state_space.shape == (24,)
    obs, state, avail = env.reset(seed=4)
    ref_obs, _ = reference.reset(seed=4)
    np.testing.assert_array_equal(obs[1], ref_obs[1])
    np.testing.assert_array_equal(state, np.concatenate(ref_obs))
    assert avail is None
    rng = np.random.default_rng(0)
    for _ in range(50):
        actions = rng.integers(6, size=2)
        step = env.step([np.array([a]) for a in actions])
        ref_obs, ref_rewards, ref_term, ref_trunc, _ = reference.step(tuple(int(a) for a in actions))
        np.testing.assert_array_equal(step.obs[0], ref_obs[0])
        assert step.rewards.tolist() == [np.float32(sum(ref_rewards))] * 2
        assert (step.terminated, step.truncated) == (ref_term, False)
        if step.terminated:
            break
    assert step.terminated  # LBF ends its 50-step episodes itself


def test_rware_truncates_at_the_time_limit_and_individual_rewards() -> None:
    """max_episode_steps truncates (bootstrap); team_reward = false keeps each agent's own reward."""
    pytest.importorskip("rware")
    env = make_gymma_env(GymmaConfig(id=RWARE, max_episode_steps=5, team_reward=False))
    assert env.n_agents == 2 and env.observation_spaces[0].shape == (71,)
    env.reset(seed=0)
    steps = [env.step([np.array([1]), np.array([2])]) for _ in range(5)]
    assert [(s.terminated, s.truncated) for s in steps] == [(False, False)] * 4 + [(False, True)]
    assert steps[0].rewards.shape == (2,)


def test_missing_suite_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """LBF or RWARE not installed: the message names harl's extra."""
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *args: None)
    with pytest.raises(MissingExtraError) as caught:
        make_gymma_env(GymmaConfig(id=RWARE))
    assert str(caught.value) == ('env kind "gymma" (id "rware:rware-tiny-2ag-v2") needs: pip install '
                                 '"harl[pettingzoo]" (the optional package "rware" is not installed)')


@pytest.mark.extra("pettingzoo")  # lbforaging must be importable for its ids to be looked up
def test_bad_ids() -> None:
    """An unknown id and a single-agent id each name env.id and what is wrong."""
    with pytest.raises(ConfigError, match="^env.id: "):
        make_gymma_env(GymmaConfig(id="lbforaging:Foraging-99x99-v3"))
    with pytest.raises(ConfigError) as caught:
        make_gymma_env(GymmaConfig(id="CartPole-v1"))
    message = str(caught.value)
    assert message.startswith('env.id: "CartPole-v1" has observation space Box(') and message.endswith(
        ', not a Tuple with one entry per agent, so it is not a multi-agent env; for a single-agent env use '
        'kind = "gym"')
