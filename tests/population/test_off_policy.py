"""Off-policy populations (harl.population): members act in one batched call per agent, learn
one after another with their own updaters, and are runs as any population's members are."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harl.cli import main
from harl.compose import build_stages
from harl.config.loading import load_spec_and_notes
from harl.errors import ResourceError
from harl.nets.population import Stack
from harl.population import check
from harl.population.driver import Population, open_population
from harl.sweep.plan import Request, Sweep
from tests.population.test_population import member_dirs, rows

ROOT = Path(__file__).resolve().parents[2]
MATD3 = ROOT / "pipelines" / "matd3_mpe_spread.toml"
SMALL = {"env.kind": "mpe_torch", "env.max_episode_steps": 5, "collector.n_envs": 2, "collector.rollout_length": 5,
         "collector.updates_per_round": 2, "collector.warmup_steps": 20, "buffer.capacity": 1000,
         "buffer.batch_size": 8, "run.total_env_steps": 60, "evaluator.episodes": 2, "evaluator.n_envs": 2,
         "evaluator.every_iterations": 2, "checkpoint.every_iterations": 1, "logging.progress": "false",
         "run.torch_threads": 1, "checkpoint.replay_buffer": "true"}


def sets(**extra: object) -> list[str]:
    return [arg for k, v in {**SMALL, **extra}.items() for arg in ("--set", f"{k}={v}")]


def test_members_are_runs_and_the_population_is_bit_identical_to_itself(tmp_path: Path) -> None:
    """Warm-up (iterations 1-2), then learning: each member a run of its seed, twice the same rows."""
    for name in ("a", "b"):
        assert main(["train", str(MATD3), "--seeds", "1-2", "--vectorize", "--run-dir", str(tmp_path / name),
                     *sets()]) == 0
    first, second = member_dirs(tmp_path / "a"), member_dirs(tmp_path / "b")
    assert [d.name for d in first] == ["matd3-mpe-spread-s1", "matd3-mpe-spread-s2"]
    for a, b in zip(first, second):
        assert rows(a) == rows(b)
        got = rows(a)
        assert [int(r["env_steps"]) for r in got] == [10, 20, 30, 40, 50, 60]
        assert [r["updates"] for r in got] == ["0", "0", "2", "2", "2", "2"]  # nothing learnt in warm-up
        assert got[-1]["eval_return"]
    assert rows(first[0]) != rows(first[1])


def _population(sweep: Path) -> tuple[list[Path], list]:
    request = Request.parse(str(MATD3), [f"{k}={v}" for k, v in SMALL.items()], "1-2", [])
    made = Sweep.new(request, sweep, None)
    return [s.run_dir for s in made.states], [s.spec for s in made.states]


@pytest.mark.parametrize("first", [1, 4])
def test_resume_continues_exactly(tmp_path: Path, first: int) -> None:
    """Stopped inside the warm-up (1) or after it (4), at an episode boundary (a resume restarts
    the running episodes from their beginnings), reopened, run to the end: the rows (and
    so the replay buffers, generators and sampling stream) of one uninterrupted population."""
    straight, specs = _population(tmp_path / "straight")
    trainers, venv = open_population(straight, specs, "test")
    with Population(trainers, venv, ["s1", "s2"]) as pop:
        pop.train(quiet=True)
    split, specs = _population(tmp_path / "split")
    trainers, venv = open_population(split, specs, "test")
    with Population(trainers, venv, ["s1", "s2"]) as pop:
        pop.train(quiet=True, max_iterations=first)
    trainers, venv = open_population(split, specs, "test")
    assert [t.counters.iteration for t in trainers] == [first, first]
    with Population(trainers, venv, ["s1", "s2"]) as pop:
        pop.train(quiet=True)
    for a, b in zip(straight, split):
        assert rows(a) == rows(b)


@pytest.mark.parametrize(("pipeline", "extra"), [
    ("matd3_mpe_spread.toml", []),
    ("hasac_mpe_spread.toml", []),
    ("hasac_mpe_spread_discrete.toml", []),
    ("had3qn_mpe_spread_discrete.toml", []),
])
def test_batched_acting_is_each_members_acting(pipeline: str, extra: list[str]) -> None:
    """The members' greedy actions through one vmapped call are each member's own ``team.act``
    (to rounding); exploring draws differ between members with equal weights."""
    teams = []
    for seed in (1, 2, 3):
        spec, _ = load_spec_and_notes(ROOT / "pipelines" / pipeline, [f"run.seed={seed}", "collector.n_envs=4", *extra])
        stages = build_stages(spec)
        teams.append(stages)
    try:
        teams[0].collector.begin()
        obs, masks = teams[0].collector.inputs()
        n = len(obs)
        stacked = [Stack([t.policy.actors[i] for t in teams]) for i in range(n)]
        for i in range(n):
            o = torch.stack([obs[i]] * 3)
            m = None if masks[i] is None else torch.stack([masks[i]] * 3)
            greedy = stacked[i].call("act", o, m, True)
            for j, t in enumerate(teams):
                own = t.policy.act(obs, masks, deterministic=True)[0][i]
                torch.testing.assert_close(greedy[j], own, rtol=1e-5, atol=1e-6)  # batched matmuls round
        same = Stack([teams[0].policy.actors[0]] * 3)
        rows = 50  # x 4 envs: D3QN explores one row in 20 (epsilon 0.05)
        o = torch.stack([obs[0].repeat(rows, 1)] * 3)
        m = None if masks[0] is None else torch.stack([masks[0].repeat(rows, 1)] * 3)
        drawn = same.call("explore", o, m, 0, random=True)
        assert not (torch.equal(drawn[0], drawn[1]) and torch.equal(drawn[1], drawn[2]))
    finally:
        for t in teams:
            t.close()


def test_off_policy_cannot_take_the_batched_update() -> None:
    spec, _ = load_spec_and_notes(MATD3, ['run.population_update="batched"'])
    assert check.problems(spec) == ['run.population_update = "batched" (off-policy members update one after '
                                    'another: "auto" or "per_member")']
    spec, _ = load_spec_and_notes(MATD3, [])
    assert check.problems(spec) == [] and check.family(spec).name == "off_policy"


def test_replay_buffers_that_cannot_fit_are_refused_with_the_numbers(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Members x capacity x bytes per transition beyond the memory free: refused before any
    member is built (each buffer alone would fit)."""
    import harl.envs.footprint
    import harl.sizes
    from harl.envs.vector import make_vector_env

    dirs, specs = _population(tmp_path / "pop")
    venv = make_vector_env(specs[0].env, 1, "inline", 0, seed=0)
    per_transition = harl.sizes.replay_bytes_per_transition(venv.observation_spaces, venv.action_spaces,
                                                            int(venv.state_space.shape[0]), venv.state_space)
    venv.close()
    monkeypatch.setattr(harl.sizes, "available_bytes", lambda device: int(1.5 * per_transition * 1000))
    monkeypatch.setattr(harl.envs.footprint, "available_bytes", lambda device: int(1.5 * per_transition * 1000))
    with pytest.raises(ResourceError, match=r"2 members x buffer.capacity = 1,000: the replay buffer .*lower buffer.capacity"):
        open_population(dirs, specs, "p.toml")
