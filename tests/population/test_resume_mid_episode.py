"""A ``--vectorize`` population of the shipped torch-MPE pipeline resumes exactly although its
rollouts end mid-episode (issue 47 item 6): rollouts of 10 steps against episodes of 25, stopped
after iteration 2 (every world at step 20 of its first episode), reopened and run to iteration 5."""

from __future__ import annotations

import csv
from pathlib import Path

from harl.population.driver import Population, open_population
from harl.rundir.checkpoint import latest_checkpoint, load_checkpoint
from harl.sweep.plan import Request, Sweep

ROOT = Path(__file__).resolve().parents[2]
TORCH_MPE = ROOT / "pipelines" / "happo_mpe_torch_spread.toml"
TINY = {"collector.n_envs": 2, "collector.rollout_length": 10, "env.max_episode_steps": 25, "run.total_env_steps": 100,
        "run.device": '"cpu"', "policy.hidden_sizes": "[16,16]", "critic.hidden_sizes": "[16,16]",
        "evaluator.episodes": 2, "evaluator.n_envs": 2, "evaluator.every_iterations": 2,
        "checkpoint.every_iterations": 1, "logging.progress": "false", "run.torch_threads": 1}
WALL_CLOCK = ("wall_time", "steps_per_s")


def rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "metrics.csv").open(newline="") as f:
        return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in csv.DictReader(f)]


def population(sweep: Path) -> tuple[list[Path], list]:
    request = Request.parse(str(TORCH_MPE), [f"{k}={v}" for k, v in TINY.items()], "1-2", [])
    made = Sweep.new(request, sweep, None)
    return [s.run_dir for s in made.states], [s.spec for s in made.states]


def test_population_resumes_exactly_mid_episode(tmp_path: Path) -> None:
    straight, specs = population(tmp_path / "straight")
    with Population(*open_population(straight, specs, "test"), ["s1", "s2"]) as pop:
        pop.train(quiet=True)
    split, specs = population(tmp_path / "split")
    with Population(*open_population(split, specs, "test"), ["s1", "s2"]) as pop:
        pop.train(quiet=True, max_iterations=2)
    for run_dir in split:
        saved = load_checkpoint(latest_checkpoint(run_dir))["collector"]
        assert [s["steps"] for s in saved["episode_starts"]] == [20, 20]  # mid-episode
        assert len(saved["env_state"]) == 2  # the member's own worlds
    with Population(*open_population(split, specs, "test"), ["s1", "s2"]) as pop:
        assert [t.counters.iteration for t in pop.trainers] == [2, 2]
        pop.train(quiet=True)
    for a, b in zip(straight, split):
        assert [r["iteration"] for r in rows(b)] == ["1", "2", "3", "4", "5"]
        assert rows(a) == rows(b)
