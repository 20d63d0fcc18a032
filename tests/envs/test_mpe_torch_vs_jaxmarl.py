"""harl's torch MPE simple_spread beside JaxMARL's ``MPE_simple_spread_v3``, step by step.

JaxMARL's side-by-side baselines (``benchmarks/jaxmarl_side_by_side.py``) play JaxMARL's own MPE, harl's
pipelines the torch MPE; these tests pin that the two are the same game (physics, observations,
per-agent rewards, discrete action mapping, initial-world distribution) and pin the one place they
are not: JaxMARL's episode runs ``max_steps + 1`` steps (``simple.py``: ``done = state.step >=
max_steps`` with ``step`` read before it is incremented), one more than harl's ``max_episode_steps``.
``benchmarks/mpe_cross_check.py`` measures the same on more worlds and what it does to returns.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from harl.envs.mpe_torch import MPETorchConfig
from harl.envs.mpe_torch.vector import MPETorchVectorEnv

pytest.importorskip("jaxmarl", reason="comparing with JaxMARL's MPE needs harl[smax] (jax and jaxmarl)")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
simple_spread = pytest.importorskip("jaxmarl.environments.mpe.simple_spread")

N = 3
WORLDS = 32


class JaxSpread:
    """JaxMARL's simple_spread (what ``jaxmarl.make("MPE_simple_spread_v3")`` builds), vmapped, no
    auto-reset (``step_env``): observations and rewards stacked ``(worlds, agents, ...)``."""

    def __init__(self) -> None:
        self.env = simple_spread.SimpleSpreadMPE(num_agents=N, num_landmarks=N, local_ratio=0.5)
        self._reset = jax.jit(jax.vmap(self.env.reset))
        self._step = jax.jit(jax.vmap(self.env.step_env))

    def reset(self, key, worlds: int):
        obs, state = self._reset(jax.random.split(key, worlds))
        return self._stack(obs), state

    def step(self, key, state, actions: np.ndarray):
        acts = {a: jnp.asarray(actions[:, i]) for i, a in enumerate(self.env.agents)}
        obs, state, rewards, dones, _ = self._step(jax.random.split(key, len(actions)), state, acts)
        return self._stack(obs), state, self._stack(rewards), np.asarray(dones["__all__"])

    def _stack(self, values: dict) -> np.ndarray:
        return np.stack([np.asarray(values[a], dtype=np.float64) for a in self.env.agents], axis=1)


@functools.cache
def _jax_spread(x64: bool) -> JaxSpread:
    """One JaxMARL env per float width (its constants take the width it is built under), so that each
    compiles its batched step once for the whole module."""
    return JaxSpread()


def _torch_env(precision: str, team_reward: bool = False, max_episode_steps: int = 25) -> MPETorchVectorEnv:
    config = MPETorchConfig(scenario="simple_spread", continuous_actions=False, n_agents=N, local_ratio=0.5,
                            team_reward=team_reward, precision=precision, max_episode_steps=max_episode_steps)
    return MPETorchVectorEnv(config, WORLDS, seed=0)


def _toward_nearest(obs: np.ndarray) -> np.ndarray:
    """Each agent steps toward its nearest landmark along the larger offset (agents meet: contacts)."""
    rel = obs[..., 4:4 + 2 * N].reshape(*obs.shape[:2], N, 2)
    d = np.take_along_axis(rel, np.linalg.norm(rel, axis=-1).argmin(-1)[..., None, None], axis=2)[..., 0, :]
    x_axis = np.abs(d[..., 0]) >= np.abs(d[..., 1])
    return np.where(x_axis, np.where(d[..., 0] > 0, 2, 1), np.where(d[..., 1] > 0, 4, 3))


def _side_by_side(precision: str, policy: str, steps: int, team_reward: bool = False,
                  max_episode_steps: int = 25, seed: int = 0):
    """Yield (t, harl's obs, JaxMARL's obs, harl's rewards, JaxMARL's rewards, harl truncated, JaxMARL
    done) for ``steps`` steps from the same initial worlds with the same actions, no reset on either side."""
    jx = _jax_spread(bool(jax.config.jax_enable_x64))
    key = jax.random.PRNGKey(seed)
    key, k = jax.random.split(key)
    jobs, state = jx.reset(k, WORLDS)
    venv = _torch_env(precision, team_reward, max_episode_steps)
    pos = np.array(state.p_pos, dtype=np.float64)
    obs, _, _ = venv.set_initial_worlds(torch.arange(WORLDS), pos[:, :N], pos[:, N:],
                                        np.zeros((WORLDS, 0), dtype=np.int64))
    yield 0, torch.stack(obs, 1).double().numpy(), jobs, None, None, None, None
    rng = np.random.default_rng(seed)
    for t in range(1, steps + 1):
        actions = rng.integers(0, 5, (WORLDS, N)) if policy == "random" else _toward_nearest(jobs)
        key, k = jax.random.split(key)
        jobs, state, jrew, jdone = jx.step(k, state, actions)
        obs, _, rewards, truncated = venv.advance([actions[:, i] for i in range(N)])
        yield (t, torch.stack(obs, 1).double().numpy(), jobs, rewards.double().numpy(), jrew,
               truncated.numpy(), jdone)


@pytest.mark.parametrize("policy", ["random", "nearest"])
def test_same_game_in_float64(policy: str) -> None:
    """JaxMARL with 64-bit floats beside harl's float64 world: observations and per-agent rewards agree to
    float32 rounding (harl hands them out as float32) for a whole episode, contacts included."""
    with jax.enable_x64(True):
        for t, obs, jobs, rew, jrew, *_ in _side_by_side("float64", policy, steps=26):
            np.testing.assert_allclose(obs, jobs, rtol=0, atol=1e-6, err_msg=f"step {t}: observations")
            if rew is not None:
                np.testing.assert_allclose(rew, jrew, rtol=0, atol=1e-6, err_msg=f"step {t}: rewards")


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_same_game_as_jaxmarl_runs_it(precision: str) -> None:
    """JaxMARL in float32 (as its baselines run it) beside harl's worlds in either precision: within
    float32's drift under the stiff contact forces (benchmarks/mpe_cross_check.py measured up to 1.3e-3
    over 256 worlds where agents crowd one landmark; a wrong constant or formula is off by 1e-2 or more)."""
    for t, obs, jobs, rew, jrew, *_ in _side_by_side(precision, "nearest", steps=26):
        np.testing.assert_allclose(obs, jobs, rtol=0, atol=5e-3, err_msg=f"step {t}: observations")
        if rew is not None:
            np.testing.assert_allclose(rew, jrew, rtol=0, atol=5e-3, err_msg=f"step {t}: rewards")


def test_team_reward_is_the_sum_of_jaxmarls_rewards() -> None:
    """``team_reward = true`` gives every agent the sum of JaxMARL's per-agent rewards: JaxMARL's
    ``reward["__all__"]`` (CTRolloutManager) and its MPELogWrapper's logged return (``num_agents`` x each
    agent's own, averaged over agents)."""
    with jax.enable_x64(True):
        for t, _, _, rew, jrew, *_ in _side_by_side("float64", "random", steps=5, team_reward=True):
            if rew is not None:
                np.testing.assert_allclose(rew, np.repeat(jrew.sum(1, keepdims=True), N, 1), rtol=0, atol=1e-5,
                                           err_msg=f"step {t}")


def test_jaxmarl_episode_is_one_step_longer() -> None:
    """JaxMARL's ``done`` comes on step ``max_steps + 1`` = 26; harl's ``max_episode_steps = 25`` (mpe2's
    ``max_cycles``) truncates on step 25, so a JaxMARL episode sums one reward more.  harl matches
    JaxMARL's episode with ``max_episode_steps = 26``."""
    jax_max_steps = simple_spread.SimpleSpreadMPE().max_steps
    assert jax_max_steps == 25
    ends = {"jax": None, "harl_25": None}
    for t, *_, truncated, jdone in _side_by_side("float32", "random", steps=26):
        if t == 0:
            continue
        assert jdone.all() == jdone.any() and truncated.all() == truncated.any()
        if jdone.all() and ends["jax"] is None:
            ends["jax"] = t
        if truncated.all() and ends["harl_25"] is None:
            ends["harl_25"] = t
    assert ends == {"jax": jax_max_steps + 1, "harl_25": 25}
    harl_26 = next(t for t, *_, truncated, _ in _side_by_side("float32", "random", steps=26, max_episode_steps=26)
                   if t > 0 and truncated.all())
    assert harl_26 == ends["jax"]


def test_same_initial_world_distribution() -> None:
    """Both draw every agent and landmark uniform in [-1, 1)^2: the mean of the global reward at the
    reset (minus the sum over landmarks of the nearest agent's distance) agrees over 20,000 worlds."""
    from harl.envs.mpe_torch.spread import Spread
    from harl.envs.mpe_torch.world import sample_worlds

    worlds = 20_000
    _, state = _jax_spread(False).reset(jax.random.PRNGKey(3), worlds)
    pos = np.asarray(state.p_pos, dtype=np.float64)
    generator = torch.Generator()
    generator.manual_seed(3)
    drawn = sample_worlds(Spread(N, 0.5, torch.device("cpu"), torch.float64).layout, worlds, generator,
                          torch.device("cpu"), torch.float64)

    def nearest_sum(agents: np.ndarray, landmarks: np.ndarray) -> np.ndarray:
        return np.linalg.norm(landmarks[:, :, None] - agents[:, None], axis=-1).min(2).sum(1)

    ours = nearest_sum(drawn.agent_pos.numpy(), drawn.landmark_pos.numpy())
    theirs = nearest_sum(pos[:, :N], pos[:, N:])
    assert pos.min() >= -1.0 and pos.max() <= 1.0
    standard_error = np.hypot(ours.std(), theirs.std()) / np.sqrt(worlds)
    assert abs(ours.mean() - theirs.mean()) < 4 * standard_error
