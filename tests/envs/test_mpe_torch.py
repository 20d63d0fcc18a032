"""MPETorchVectorEnv: mpe2's game in batched torch, pinned to mpe2 itself through harl's adapter."""

from __future__ import annotations

import functools
import pickle

import numpy as np
import pytest
import torch

from harl.envs.mpe import MPEConfig, make_mpe_env
from harl.envs.mpe_torch import MPETorchConfig
from harl.envs.mpe_torch.config import SCENARIOS
from harl.envs.mpe_torch.vector import MPETorchVectorEnv
from harl.envs.protocol import is_tensor_native
from harl.envs.vector import make_vector_env
from harl.errors import ConfigError
from harl.settings import InvalidSetting

pytest.importorskip("mpe2")

CASES = [(scenario, continuous) for scenario in SCENARIOS for continuous in (True, False)]
ATOL = 1e-5


def _mpe2_world(env) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """An mpe2 env's initial world: agent and landmark positions, goal landmark indices."""
    world = env._world
    agent_pos = np.stack([agent.state.p_pos for agent in world.agents])
    landmark_pos = np.stack([landmark.state.p_pos for landmark in world.landmarks])
    # Only agents with a goal landmark (not simple_spread's, not the listener) count.
    goals = [world.landmarks.index(agent._goal_b) for agent in world.agents
             if getattr(agent, "_goal_b", None) is not None]
    return agent_pos, landmark_pos, goals


def _copy_worlds(venv: MPETorchVectorEnv, envs: list, index: list[int]):
    worlds = [_mpe2_world(envs[k]) for k in index]
    return venv.set_initial_worlds(
        torch.tensor(index), np.stack([w[0] for w in worlds]), np.stack([w[1] for w in worlds]),
        np.array([w[2] for w in worlds], dtype=np.int64).reshape(len(index), -1),
    )


def _close(ours: torch.Tensor, theirs: np.ndarray, what: str, atol: float = ATOL) -> None:
    np.testing.assert_allclose(ours.numpy(), theirs, rtol=0, atol=atol, err_msg=what)


def _random_actions(venv: MPETorchVectorEnv, rng: np.random.Generator) -> list[np.ndarray]:
    """Continuous actions reach past [0, 1] (they must be clipped); discrete ones cover every index."""
    out = []
    for space in venv.action_spaces:
        if hasattr(space, "n"):
            out.append(rng.integers(space.n, size=(venv.n_envs, 1)))
        else:
            out.append(rng.uniform(-0.25, 1.25, (venv.n_envs, *space.shape)).astype(np.float32))
    return out


def run_parity(scenario: str, continuous: bool, n_envs: int, steps: int, seed: int = 0,
               precision: str = "float64", atol: float = ATOL) -> int:
    """Step mpe2 (harl's adapter) and the torch batch side by side from the same initial worlds
    (copied at every reset) with the same actions; return how many episodes ended."""
    kwargs = {"scenario": scenario, "continuous_actions": continuous, "local_ratio": 0.3}
    envs = [make_mpe_env(MPEConfig(**kwargs)) for _ in range(n_envs)]
    venv = MPETorchVectorEnv(MPETorchConfig(**kwargs, precision=precision), n_envs, seed)
    close = functools.partial(_close, atol=atol)
    refs = [env.reset(seed=seed + k) for k, env in enumerate(envs)]
    obs, state, _ = _copy_worlds(venv, envs, list(range(n_envs)))
    rng = np.random.default_rng(seed)
    episodes = 0
    for t in range(steps):
        for i in range(venv.n_agents):
            close(obs[i], np.stack([ref[0][i] for ref in refs]), f"step {t}: obs of agent {i}")
        close(state, np.stack([ref[1] for ref in refs]), f"step {t}: state")
        actions = _random_actions(venv, rng)
        step = venv.step([torch.as_tensor(a) for a in actions])
        ref_steps = [env.step([a[k] for a in actions]) for k, env in enumerate(envs)]
        for i in range(venv.n_agents):
            close(step.final_obs[i], np.stack([s.obs[i] for s in ref_steps]), f"step {t}: obs {i}")
        close(step.final_state, np.stack([s.state for s in ref_steps]), f"step {t}: final state")
        close(step.rewards, np.stack([s.rewards for s in ref_steps]), f"step {t}: rewards")
        assert step.truncated.tolist() == [s.truncated for s in ref_steps], f"step {t}"
        assert step.terminated.tolist() == [s.terminated for s in ref_steps], f"step {t}"
        ended = [k for k, s in enumerate(ref_steps) if s.truncated or s.terminated]
        episodes += len(ended)
        assert len(step.episode_infos) == len(ended)
        refs = [(s.obs, s.state) for s in ref_steps]
        obs, state = step.obs, step.state
        if ended:
            for k in ended:
                refs[k] = envs[k].reset()[:2]
            obs, state, _ = _copy_worlds(venv, envs, ended)
    return episodes


@pytest.mark.parametrize(("scenario", "continuous"), CASES)
def test_parity_with_mpe2(scenario: str, continuous: bool) -> None:
    """16 envs x 60 steps (two episode ends): observations, states and rewards within 1e-5 of mpe2."""
    assert run_parity(scenario, continuous, n_envs=16, steps=60) == 32


def test_parity_with_mpe2_float32_world() -> None:
    """precision = "float32" plays the same game, to within float32's drift under contact forces."""
    assert run_parity("simple_spread", True, n_envs=16, steps=30, precision="float32", atol=1e-3) == 16


@pytest.mark.slow
@pytest.mark.parametrize(("scenario", "continuous"), CASES)
def test_parity_with_mpe2_long(scenario: str, continuous: bool) -> None:
    """64 envs x 1,000 steps (40 episodes each), as issue 14 asks."""
    assert run_parity(scenario, continuous, n_envs=64, steps=1000, seed=7) == 64 * 40


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_contact_force_by_hand(precision: str) -> None:
    """Two spread agents 0.2 apart (radii 0.15 each), no-op actions, one step.  mpe2's force:
    penetration = logaddexp(0, -(0.2 - 0.3) / 0.001) * 0.001 = (100 + log1p(e^-100)) * 0.001 = 0.1,
    force on agent 0 = 100 * (-0.2, 0) / 0.2 * 0.1 = (-10, 0); velocity = 0 * 0.75 + (-10) * 0.1
    = -1; the position moves with the old velocity (0), so it stays.  Agent 2, far away, feels 0."""
    venv = MPETorchVectorEnv(MPETorchConfig(precision=precision), 1, seed=0)
    venv.set_initial_worlds(torch.tensor([0]), [[[0.0, 0.0], [0.2, 0.0], [0.9, 0.9]]],
                            [[[0.5, 0.5]] * 3], np.zeros((1, 0), dtype=np.int64))
    step = venv.step([torch.zeros(1, 5)] * 3)
    torch.testing.assert_close(venv._world.agent_vel[0].float(),
                               torch.tensor([[-1.0, 0.0], [1.0, 0.0], [0.0, 0.0]]))
    torch.testing.assert_close(step.final_obs[0][0, 2:4], torch.tensor([0.0, 0.0]))
    # local_ratio 0.5: each agent of the pair is penalised 1 for the overlap, agent 2 is not.
    own = MPETorchVectorEnv(MPETorchConfig(team_reward=False), 1, seed=0)
    own.set_initial_worlds(torch.tensor([0]), [[[0.0, 0.0], [0.2, 0.0], [0.9, 0.9]]],
                           [[[0.0, 0.0], [0.2, 0.0], [0.9, 0.9]]], np.zeros((1, 0), dtype=np.int64))
    rewards = own.step([torch.zeros(1, 5)] * 3).rewards[0]
    # Landmarks sit on the agents (before they move 0 this step): global reward 0.
    torch.testing.assert_close(rewards, torch.tensor([-0.5, -0.5, 0.0]))


@pytest.mark.parametrize(("scenario", "continuous"), CASES)
def test_spaces_match_mpe2(scenario: str, continuous: bool) -> None:
    """Observation, action and state spaces equal harl's mpe2 adapter's."""
    kwargs = {"scenario": scenario, "continuous_actions": continuous}
    ref = make_mpe_env(MPEConfig(**kwargs))
    venv = make_vector_env(MPETorchConfig(**kwargs), n_envs=3)
    assert venv.n_agents == ref.n_agents
    assert venv.observation_spaces == ref.observation_spaces
    assert venv.action_spaces == ref.action_spaces
    assert venv.state_space == ref.state_space
    obs, state, avail = venv.reset()
    if continuous:
        assert avail is None
    else:
        assert [a.tolist() for a in avail] == [[m.tolist()] * 3 for m in ref.reset(seed=0)[2]]


def test_initial_states_follow_mpe2_distribution() -> None:
    """Positions are U[-1, 1)^2 and goals uniform, like mpe2's reset_world: two-sample KS tests
    against mpe2's own resets and a chi-square test on goals, all at a fixed seed."""
    stats = pytest.importorskip("scipy.stats")
    venv = MPETorchVectorEnv(MPETorchConfig(scenario="simple_reference"), 4000, seed=3)
    venv.reset()
    ours = venv.episode_starts()
    env = make_mpe_env(MPEConfig(scenario="simple_reference"))
    env.reset(seed=3)
    theirs = []
    for _ in range(1000):
        env.reset()
        theirs.append(_mpe2_world(env))
    for name, part in (("agent_pos", 0), ("landmark_pos", 1)):
        a = np.stack([s[name] for s in ours]).reshape(-1, 2)
        b = np.stack([w[part] for w in theirs]).reshape(-1, 2)
        for axis in range(2):
            assert stats.ks_2samp(a[:, axis], b[:, axis]).pvalue > 0.01, (name, axis)
            assert stats.kstest(a[:, axis], stats.uniform(-1, 2).cdf).pvalue > 0.01, (name, axis)
        assert a.min() >= -1 and a.max() < 1
        # Coordinates are drawn independently: their correlation is near 0 (n = 8000).
        assert abs(np.corrcoef(a[:, 0], a[:, 1])[0, 1]) < 4 / np.sqrt(len(a))
    goals = np.stack([s["goals"] for s in ours]).reshape(-1)
    counts = np.bincount(goals, minlength=3)
    assert stats.chisquare(counts).pvalue > 0.01
    velocity = venv._world.agent_vel
    assert torch.all(velocity == 0)


def test_team_reward_off_gives_each_agent_its_own() -> None:
    """team_reward = false: per-agent mpe2 rewards, whose sum is the team reward."""
    team = MPETorchVectorEnv(MPETorchConfig(), 8, seed=1)
    own = MPETorchVectorEnv(MPETorchConfig(team_reward=False), 8, seed=1)
    team.reset()
    own.reset()
    actions = [torch.full((8, 5), 0.7)] * 3
    a, b = team.step(actions), own.step(actions)
    torch.testing.assert_close(a.rewards, b.rewards.sum(1, keepdim=True).expand(-1, 3))
    assert not torch.equal(b.rewards[:, 0], b.rewards[:, 1])


def test_episode_return_is_the_team_sum_with_or_without_team_reward() -> None:
    """The ended episode's ``return`` is the sum over steps of the agents' own rewards summed (JaxMARL's
    MPE log wrapper's number) whether each agent learns from the team's sum or from its own reward."""
    returns = {}
    for team_reward in (True, False):
        venv = MPETorchVectorEnv(MPETorchConfig(team_reward=team_reward, max_episode_steps=4), 3, seed=2)
        venv.reset()
        total = torch.zeros(3, dtype=torch.float64)
        for t in range(4):
            step = venv.step([torch.full((3, 5), 0.3 * (t + i)) for i in range(3)])
            own = step.rewards[:, 0] if team_reward else step.rewards.sum(1)
            total += own.double()
        returns[team_reward] = [info["return"] for info in step.episode_infos]
        assert returns[team_reward] == pytest.approx(total.tolist(), rel=1e-6)
    assert returns[True] == pytest.approx(returns[False], rel=1e-6)


def test_tensor_native_on_the_configured_device() -> None:
    """The device key is honoured: batches live on env.device (CPU here); CUDA without a GPU is a
    clear ConfigError naming the key, a malformed name is refused with the valid ones, and
    actions are not modified."""
    venv = make_vector_env(MPETorchConfig(device="cpu"), n_envs=5)
    assert is_tensor_native(venv) and venv.device == torch.device("cpu")
    obs, state, _ = venv.reset()
    actions = [torch.full((5, 5), 2.0) for _ in range(3)]
    step = venv.step(actions)
    for tensor in [*obs, state, *step.obs, step.rewards, step.truncated, step.final_state]:
        assert tensor.device == torch.device("cpu")
    assert all(torch.all(a == 2.0) for a in actions)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="env.device"):
            make_vector_env(MPETorchConfig(device="cuda"), n_envs=2)
    with pytest.raises(InvalidSetting, match='device: expected one of: cpu, cuda, cuda:N; got "gpu0"'):
        MPETorchConfig(device="gpu0")


def test_episodes_truncate_and_report_returns() -> None:
    """Episodes end as truncated after max_episode_steps; the return is the sum of mean agent rewards."""
    venv = MPETorchVectorEnv(MPETorchConfig(max_episode_steps=4), 2, seed=0)
    venv.reset()
    total = np.zeros(2)
    for t in range(4):
        step = venv.step([torch.full((2, 5), 0.5)] * 3)
        total += step.rewards.double().mean(1).numpy()
        assert step.truncated.tolist() == [t == 3] * 2 and not step.terminated.any()
    assert [info["length"] for info in step.episode_infos] == [4, 4]
    np.testing.assert_allclose([info["return"] for info in step.episode_infos], total)
    assert not torch.equal(step.obs[0], step.final_obs[0])


def test_seeded_reset_and_restart_replay_episodes() -> None:
    """The same seed gives the same episodes; restart (through a pickle, into an env built with
    another seed) replays each env's episode from its start, even mid-episode, and then draws
    the resets the original env draws from there."""
    def rollout(venv: MPETorchVectorEnv, steps: int) -> list[torch.Tensor]:
        return [venv.step([torch.full((3, 5), 0.9)] * 3).state for _ in range(steps)]

    a, b = MPETorchVectorEnv(MPETorchConfig(), 3, seed=5), MPETorchVectorEnv(MPETorchConfig(), 3, seed=5)
    a.reset()
    b.reset()
    assert all(torch.equal(x, y) for x, y in zip(rollout(a, 30), rollout(b, 30)))
    starts = pickle.loads(pickle.dumps(a.episode_starts()))
    assert [s["steps"] for s in starts] == [5, 5, 5]
    c = MPETorchVectorEnv(MPETorchConfig(), 3, seed=99)
    c.restart(starts)
    b.restart(starts)
    assert all(torch.equal(x, y) for x, y in zip(rollout(c, 60), rollout(b, 60)))
    # At an episode's first step (as at a checkpoint after whole episodes) restart is exact.
    rollout(a, 20)
    starts = pickle.loads(pickle.dumps(a.episode_starts()))
    assert [s["steps"] for s in starts] == [0, 0, 0]
    c.restart(starts)
    assert all(torch.equal(x, y) for x, y in zip(rollout(c, 60), rollout(a, 60)))


def test_bad_discrete_action_is_refused() -> None:
    """An index outside the Discrete space raises a ValueError naming the agent."""
    venv = MPETorchVectorEnv(MPETorchConfig(continuous_actions=False), 2, seed=0)
    venv.reset()
    with pytest.raises(ValueError, match="agent 1"):
        venv.step([torch.tensor([0, 1]), torch.tensor([5, 0]), torch.tensor([0, 0])])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_variant_pettingzoo_1_22_replays_harls_mpe(scenario: str) -> None:
    """variant = "pettingzoo_1.22" replays the episodes recorded from pettingzoo 1.22 (HARL's MPE;
    tests/envs/data/mpe_pettingzoo_1_22.json, as the mpe kind's variant): the recorded seed's
    initial world (from the mpe kind, which seeds as pettingzoo did), the recorded actions, the
    recorded rewards and observations to 1e-5; mpe2's dynamics on the same inputs differ."""
    import json
    from pathlib import Path

    reference = json.loads((Path(__file__).parent / "data" / "mpe_pettingzoo_1_22.json").read_text())
    recorded = reference["scenarios"][scenario]
    start = make_mpe_env(MPEConfig(scenario=scenario, team_reward=False, variant="pettingzoo_1.22"))
    start.reset(seed=recorded["seed"])
    steps = recorded["steps"][: min(len(recorded["steps"]), 24)]  # within the first 25-step episode
    for variant, agree in (("pettingzoo_1.22", True), ("mpe2", False)):
        venv = MPETorchVectorEnv(MPETorchConfig(scenario=scenario, team_reward=False, variant=variant), 1)
        _copy_worlds(venv, [start], [0])
        rewards, obs = [], []
        for step in steps:
            out = venv.step([torch.tensor(np.asarray(a, dtype=np.float32)).reshape(1, -1) for a in step["actions"]])
            rewards.append(out.rewards[0].numpy())
            obs.append(torch.cat([o[0] for o in out.obs]).numpy())
        ref_rewards = np.array([s["rewards"] for s in steps])
        ref_obs = np.array([np.concatenate(s["obs"]) for s in steps])
        if agree:
            np.testing.assert_allclose(np.array(rewards), ref_rewards, atol=1e-5)
            np.testing.assert_allclose(np.array(obs), ref_obs, atol=1e-5)
        else:
            assert np.abs(np.array(rewards) - ref_rewards).max() > 0.05
