"""Vector envs' checkpointable state: episode starts replayed by restart, RNG states restored."""

from __future__ import annotations

import numpy as np
import pytest

from harl.envs.mpe import MPEConfig
from harl.envs.vector import make_vector_env
from tests.fakes.counting import CountingConfig

pytest.importorskip("mpe2", reason="the MPE tests need mpe2 (pip install harl[mpe])")

BACKENDS = ("inline", "subprocess")
CONFIG = MPEConfig(max_episode_steps=5)


def _actions(rng: np.random.Generator, n_envs: int) -> list[np.ndarray]:
    return [rng.random((n_envs, 5), dtype=np.float32) for _ in range(3)]


def _run(venv, steps: int, seed: int = 7) -> list[np.ndarray]:  # noqa: ANN001
    """Step with seeded random actions; the observations after each step, flattened."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        out.append(np.concatenate([o.ravel() for o in venv.step(_actions(rng, venv.n_envs)).obs]))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_restart_at_an_episode_boundary_continues_exactly(backend: str) -> None:
    """After whole episodes, a fresh venv restarted from episode_starts steps exactly like the
    original; and set_rng_state makes the next unseeded reset equal the original's."""
    venv = make_vector_env(CONFIG, 3, backend, workers=2, seed=11)
    fresh = make_vector_env(CONFIG, 3, backend, workers=2, seed=99)
    try:
        venv.reset()
        _run(venv, 10, seed=1)  # two whole episodes: every env has just auto-reset
        starts = venv.episode_starts()
        assert [s["steps"] for s in starts] == [0, 0, 0]
        assert all(s["seed"] is None and s["rng"] is not None for s in starts)
        expected = _run(venv, 12)
        fresh.restart(starts)
        assert all(np.array_equal(a, b) for a, b in zip(_run(fresh, 12), expected))

        _run(venv, 1)
        fresh.set_rng_state(venv.get_rng_state())
        expected_reset, _, _ = venv.reset()
        got, _, _ = fresh.reset()
        assert all(np.array_equal(a, b) for a, b in zip(expected_reset, got))
    finally:
        venv.close()
        fresh.close()


def test_restart_replays_a_seeded_first_episode() -> None:
    """Before any auto-reset the starts are the reset's seeds, and restart seeds the same way."""
    venv = make_vector_env(CONFIG, 2, "inline", seed=3)
    obs, _, _ = venv.reset(seed=40)
    _run(venv, 2)
    starts = venv.episode_starts()
    assert [(s["seed"], s["steps"]) for s in starts] == [(40, 2), (41, 2)]
    again, _, _ = make_vector_env(CONFIG, 2, "inline", seed=3).restart(starts)
    assert all(np.array_equal(a, b) for a, b in zip(obs, again))


def test_env_without_rng_state_restarts_from_its_first_seed() -> None:
    """An env with no get_rng_state (the counting fake) restarts from the venv's seed + k."""
    venv = make_vector_env(CountingConfig(episode_length=2), 2, "inline", seed=3)
    venv.reset()
    venv.step([np.zeros((2, 2), np.float32), np.zeros((2, 1), np.int64), np.zeros((2, 2), np.int64)])
    venv.step([np.zeros((2, 2), np.float32), np.zeros((2, 1), np.int64), np.zeros((2, 2), np.int64)])
    starts = venv.episode_starts()
    assert starts == [{"seed": None, "rng": None, "steps": 0}] * 2
    _, state, _ = make_vector_env(CountingConfig(episode_length=2), 2, "inline", seed=3).restart(starts)
    assert state[:, :3].tolist() == [[3, 0, 0], [4, 0, 0]]  # seed, episode, step
