"""benchmarks/coop_pong_images.py: the fast path draws the same pixels PettingZoo's rgb_array observations hold."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("pettingzoo.butterfly.cooperative_pong_v6")
pytest.importorskip("pygame")
pytestmark = pytest.mark.filterwarnings("ignore:.*render method:UserWarning")

from benchmarks.coop_pong_images import CoopPongImages, max_pool  # noqa: E402


def test_max_pool_keeps_a_single_lit_pixel():
    image = np.zeros((20, 30, 1), np.uint8)
    image[13, 27] = 255
    pooled = max_pool(image, 10)
    assert pooled.shape == (2, 3, 1)
    assert pooled[1, 2, 0] == 255 and pooled.sum() == 255


def test_default_render_mode_draws_nothing_so_the_factory_draws_itself():
    """Why the factory exists: PettingZoo 1.27's cooperative_pong gives black observations without a render mode."""
    from pettingzoo.butterfly import cooperative_pong_v6

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = cooperative_pong_v6.parallel_env()
        obs, _ = env.reset(seed=0)
        obs, *_ = env.step({a: 0 for a in env.agents})
    assert all(o.max() == 0 for o in obs.values())
    ours = CoopPongImages(pool=10)
    images, state, _ = ours.reset(seed=0)
    assert images[0].max() == 255 and state.shape == (28, 48, 1)


@pytest.mark.parametrize("grayscale", [True, False])
def test_frames_rewards_and_ends_match_pettingzoo_rgb_array(grayscale):
    from pettingzoo.butterfly import cooperative_pong_v6

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = cooperative_pong_v6.parallel_env(render_mode="rgb_array", max_cycles=60)
    ours = CoopPongImages(pool=10, grayscale=grayscale, max_cycles=60)

    def expected(o):
        pooled = max_pool(o, 10)
        return pooled.max(axis=2, keepdims=True) if grayscale else pooled

    rng = np.random.default_rng(3)
    episodes = ends = 0
    for seed in (0, 1, 2):
        obs, _ = ref.reset(seed=seed)
        images, state, _ = ours.reset(seed=seed)
        np.testing.assert_array_equal(images[0], expected(obs["paddle_0"]))
        while True:
            actions = [int(rng.integers(3)), int(rng.integers(3))]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                obs, rew, term, trunc, _ = ref.step(dict(zip(ref.possible_agents, actions)))
            step = ours.step([np.array(a) for a in actions])
            np.testing.assert_array_equal(step.rewards, np.float32([rew["paddle_0"], rew["paddle_1"]]))
            assert step.terminated == term["paddle_0"]
            assert step.truncated == (trunc["paddle_0"] and not term["paddle_0"])
            if step.terminated or step.truncated:
                ends += int(step.terminated)
                episodes += 1
                break
            for img in (*step.obs, step.state):
                np.testing.assert_array_equal(img, expected(obs["paddle_0"]))
    assert episodes == 3 and ends >= 1  # at least one miss among random paddles


def test_harl_render_builds_it_and_gets_the_full_screen():
    from harl.envs.python_env import PythonEnvConfig
    from harl.render import make_render_env

    env = make_render_env(PythonEnvConfig(factory="benchmarks.coop_pong_images:make_env", kwargs={"pool": 20}))
    images, _, _ = env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (280, 480, 3) and frame.dtype == np.uint8
    np.testing.assert_array_equal(max_pool(frame, 20).max(axis=2, keepdims=True), images[0])


def test_rng_state_restores_the_next_serve():
    """The serve angle comes from the game's RNG: restored, the next unseeded episode replays."""

    def rally(env: CoopPongImages) -> np.ndarray:
        env.reset()  # the ball starts in the centre: its direction shows after a few steps
        return np.stack([env.step([np.array(0), np.array(0)]).obs[0] for _ in range(12)])

    env = CoopPongImages(pool=20)
    env.reset(seed=5)
    state = env.get_rng_state()
    first, second = rally(env), rally(env)
    assert not np.array_equal(first, second)  # two serves differ, so equality below means something
    other = CoopPongImages(pool=20)
    other.reset(seed=99)
    other.set_rng_state(state)
    np.testing.assert_array_equal(rally(other), first)
    np.testing.assert_array_equal(rally(other), second)
