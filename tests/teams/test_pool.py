"""harl.teams.pool: a bounded pool that keeps copies, draws opponents by each rule, and resumes exactly."""

from __future__ import annotations

import io
from collections import Counter

import numpy as np
import pytest
import torch
from gymnasium import spaces

from harl.policy.on_policy import OnPolicyActors, PolicyConfig
from harl.settings import InvalidSetting
from harl.teams.players import PoolPlayer
from harl.teams.pool import SnapshotPool
from harl.teams.ratings import Ratings


def state(value: float) -> dict[str, torch.Tensor]:
    return {"w": torch.full((2, 3), value), "b": torch.zeros(3)}


def filled(sample: str, n: int = 3, size: int = 3, seed: int = 0) -> SnapshotPool:
    pool = SnapshotPool(size, sample, seed)
    for k in range(n):
        pool.add(state(float(k)), iteration=10 * k)
    return pool


def frequencies(pool: SnapshotPool, n: int) -> dict[int, float]:
    counts = Counter(pool.sample_ids(n))
    return {i: counts[i] / n for i in pool.ids()}


@pytest.mark.parametrize("size", [0, -1])
def test_a_pool_of_no_snapshots_is_refused_naming_the_key(size: int) -> None:
    with pytest.raises(InvalidSetting, match=r"pool_size: expected an integer >= 1"):
        SnapshotPool(size, "uniform", 0)


def test_an_unknown_rule_is_refused_with_the_known_ones() -> None:
    with pytest.raises(InvalidSetting, match="pool_sample: expected one of: latest, uniform, pfsp"):
        SnapshotPool(2, "elo", 0)


def test_beyond_its_size_the_oldest_goes_and_the_newest_stays() -> None:
    pool = SnapshotPool(3, "uniform", 0)
    ids = [pool.add(state(float(k)), iteration=k) for k in range(5)]
    assert ids == [0, 1, 2, 3, 4]  # monotonic, never reused
    assert pool.ids() == [2, 3, 4] and len(pool) == 3
    assert 1 not in pool and 4 in pool
    assert pool.iteration(4) == 4 and float(pool.state(2)["w"][0, 0]) == 2.0
    with pytest.raises(KeyError, match=r"snapshot 1 is not in the pool \(kept: \[2, 3, 4\]\)"):
        pool.state(1)
    one = SnapshotPool(1, "latest", 0)
    one.add(state(0.0), 0)
    newest = one.add(state(1.0), 1)
    assert one.ids() == [newest] == [1]


def test_a_snapshot_is_a_copy_that_training_cannot_change() -> None:
    live = state(1.0)
    pool = SnapshotPool(2, "latest", 0)
    i = pool.add(live, iteration=7)
    live["w"].add_(5.0)
    assert torch.equal(pool.state(i)["w"], torch.full((2, 3), 1.0))
    assert pool.state(i)["w"].device.type == "cpu"


def test_latest_draws_the_newest() -> None:
    pool = filled("latest")
    assert pool.sample_ids(4) == [2, 2, 2, 2]
    assert pool.sample_ids(0) == []


def test_uniform_draws_every_kept_snapshot_alike() -> None:
    pool = filled("uniform", n=6, size=4)
    seen = frequencies(pool, 20_000)
    assert set(Counter(pool.sample_ids(2_000))) == {2, 3, 4, 5}  # the evicted are never drawn
    for rate in seen.values():
        assert rate == pytest.approx(0.25, abs=0.02)


def test_pfsp_prefers_the_snapshots_the_learner_loses_to() -> None:
    """Hard weighting: (1 - p_win) ** 2, p_win 0.5 before any game."""
    pool = filled("pfsp", n=4, size=4)
    for outcome, games in ((1.0, 9), (0.0, 1)):  # snapshot 0: the learner wins 9 of 10
        for _ in range(games):
            pool.record(0, outcome)
    for _ in range(5):
        pool.record(1, 0.5)  # snapshot 1: five draws -> 0.5
    for outcome in (0.0, 0.0, 0.0, 1.0):
        pool.record(2, outcome)  # snapshot 2: the learner wins 1 of 4
    # snapshot 3: no games -> 0.5
    assert [pool.win_rate(i) for i in pool.ids()] == pytest.approx([0.9, 0.5, 0.25, 0.5])
    assert pool.games(0) == 10 and pool.games(3) == 0
    hard = np.array([0.1, 0.5, 0.75, 0.5]) ** 2
    expected = hard / hard.sum()
    assert pool.weights() == pytest.approx(expected)
    seen = frequencies(pool, 40_000)
    assert [seen[i] for i in pool.ids()] == pytest.approx(list(expected), abs=0.015)
    assert seen[2] > seen[1] > seen[0]


def test_pfsp_power_sharpens_and_zero_is_uniform() -> None:
    flat = SnapshotPool(2, "pfsp", 0, pfsp_power=0.0)
    sharp = SnapshotPool(2, "pfsp", 0, pfsp_power=4.0)
    for pool in (flat, sharp):
        pool.add(state(0.0), 0)
        pool.add(state(1.0), 1)
        pool.record(0, 0.0)
        pool.record(1, 0.5)
    assert flat.weights() == pytest.approx([0.5, 0.5])
    assert sharp.weights() == pytest.approx([1 / (1 + 0.5 ** 4), 0.5 ** 4 / (1 + 0.5 ** 4)])


def test_a_learner_that_beats_every_snapshot_draws_them_uniformly() -> None:
    pool = filled("pfsp", n=2, size=2)
    for i in pool.ids():
        pool.record(i, 1.0)
    assert pool.weights() == pytest.approx([0.5, 0.5])


def test_results_against_an_evicted_snapshot_are_dropped_and_outcomes_checked() -> None:
    pool = filled("pfsp", n=3, size=2)
    assert pool.record(0, 1.0) is False and pool.record(1, 1.0) is True
    with pytest.raises(ValueError, match="outcome 2"):
        pool.record(1, 2)
    with pytest.raises(ValueError, match="the snapshot pool is empty"):
        SnapshotPool(2, "uniform", 0).sample_ids(1)


def test_the_same_seed_draws_the_same_opponents() -> None:
    assert filled("uniform", seed=3).sample_ids(50) == filled("uniform", seed=3).sample_ids(50)
    assert filled("uniform", seed=3).sample_ids(50) != filled("uniform", seed=4).sample_ids(50)


def drive(pool: SnapshotPool, start: int, stop: int) -> list[list[int]]:
    """Iterations as a self-play loop runs them: a snapshot every 2, draws, results that depend on the draw."""
    drawn = []
    for it in range(start, stop):
        if it % 2 == 0:
            pool.add(state(float(it)), iteration=it)
        ids = pool.sample_ids(5)
        for k, i in enumerate(ids):
            pool.record(i, (0.0, 0.5, 1.0)[(i + k + it) % 3])
        drawn.append(ids)
    return drawn


@pytest.mark.parametrize("sample", ["uniform", "pfsp", "latest"])
def test_a_resumed_pool_draws_exactly_what_an_uninterrupted_one_does(sample: str) -> None:
    uninterrupted = SnapshotPool(3, sample, seed=11)
    whole = drive(uninterrupted, 0, 20)

    first = SnapshotPool(3, sample, seed=11)
    before = drive(first, 0, 9)
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)  # as a checkpoint holds it
    buffer.seek(0)
    resumed = SnapshotPool(3, sample, seed=999)  # the seed is the checkpoint's, not the new process's
    resumed.load_state_dict(torch.load(buffer, weights_only=False))
    assert resumed.ids() == first.ids() and resumed.win_rate(resumed.ids()[0]) == first.win_rate(first.ids()[0])
    after = drive(resumed, 9, 20)
    assert before + after == whole
    assert resumed.ids() == uninterrupted.ids()
    assert resumed.add(state(0.0), 99) == uninterrupted.add(state(0.0), 99) == 10  # ids continue, not restart


def test_a_checkpoint_too_big_for_the_pool_is_refused() -> None:
    with pytest.raises(InvalidSetting, match="pool_size = 2; resume with pool_size >= 3"):
        SnapshotPool(2, "uniform", 0).load_state_dict(filled("uniform", n=3, size=3).state_dict())


def test_evicted_snapshots_leave_the_ratings() -> None:
    """The ratings stay as bounded as the pool: an evicted snapshot's rating goes with it."""
    pytest.importorskip("openskill", reason="ratings need openskill (pip install harl[teams])")
    template = OnPolicyActors([spaces.Box(-1, 1, (4,), np.float32)], [spaces.Discrete(3)], PolicyConfig(hidden_sizes=(8,)))
    player = PoolPlayer(template, SnapshotPool(2, "uniform", seed=0), Ratings(), "red", deterministic=False)
    for iteration in range(6):
        player.add(template.state_dict(), iteration)
        step = player.play([torch.zeros(4, 4)], None, True, None, None)
        assert step.snapshots is not None
        assert player.record(step.snapshots, [0, 1, 2, 3], [1.0, 0.0, 0.5, 1.0]) == [1.0, 0.0, 0.5, 1.0]
    assert player.ratings is not None
    assert sorted(player.ratings.names()) == sorted(["red", *(player.rating_name(k) for k in player.pool.ids())])
