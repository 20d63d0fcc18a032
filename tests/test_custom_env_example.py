"""The documented custom environment (examples/custom_env.py) trains with HAPPO, as
docs/your-own-environment.md says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gymnasium import spaces

from examples.custom_env import make_env
from harl.logging.csv_log import read_metrics
from harl.run.lifecycle import start_run
from tests.train_briefly import train_briefly

ROOT = Path(__file__).parent.parent
PIPELINE = ROOT / "examples" / "custom_env.toml"


def test_docs_show_the_whole_file() -> None:
    """docs/your-own-environment.md walks through this exact file, so the walkthrough cannot go stale."""
    source = (ROOT / "examples" / "custom_env.py").read_text(encoding="utf-8")
    page = ROOT / "docs" / "your-own-environment.md"
    assert f"```python\n{source}```" in page.read_text(encoding="utf-8")


def test_agents_differ() -> None:
    """One agent has a Box action, the other a MultiDiscrete one; observation sizes differ."""
    env = make_env()
    assert isinstance(env.action_spaces[0], spaces.Box)
    assert isinstance(env.action_spaces[1], spaces.MultiDiscrete)
    assert [s.shape for s in env.observation_spaces] == [(4,), (6,)]
    obs, state, avail = env.reset(seed=0)
    assert [o.shape for o in obs] == [(4,), (6,)] and state.shape == (6,) and avail is None
    step = env.step([np.zeros(2, np.float32), np.array([2, 0])])
    assert step.rewards.shape == (2,) and not step.terminated and not step.truncated


def test_two_iterations(tmp_path: Path) -> None:
    """The example pipeline runs two iterations and writes its metrics."""
    result, rows = train_briefly(PIPELINE, ["logging.progress=false", "evaluator.episodes=4"], tmp_path / "run")
    assert result.counters.env_steps == 2 * 8 * 50
    assert [int(r["iteration"]) for r in rows] == [1, 2] and rows[-1]["eval_return"]


def test_return_improves(tmp_path: Path) -> None:
    """Over 12,000 env steps the deterministic evaluation return rises well above the start's."""
    trainer, _ = start_run(PIPELINE, ["logging.progress=false", "run.total_env_steps=12000",
                                      "evaluator.every_iterations=0"], run_dir=tmp_path / "run")
    try:
        trainer.train()
    finally:
        trainer.stages.close()
    evals = [float(r["eval_return"]) for r in read_metrics(tmp_path / "run" / "metrics.csv")
             if r["eval_return"]]
    first, last = evals[0], evals[-1]
    assert last > first + 15, evals  # seeds 1-3 here: about -55 -> -24
