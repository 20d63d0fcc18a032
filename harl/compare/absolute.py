"""The absolute metric (Gorsane et al. 2022, after Colas et al.): a run's best policy
re-evaluated on ``factor`` times its evaluation episodes, so a lucky evaluation of a noisy
policy does not stand for the run.  "Best" is the kept checkpoint with the highest
``eval_return`` at its iteration: checkpoints are pruned to ``[checkpoint] keep``, so the
best policy of the whole run may be gone; the record lists the candidates it chose from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from harl.compare.runs import ABSOLUTE_FILE, number
from harl.errors import HarlError
from harl.fs import atomic_write_bytes
from harl.logging.csv_log import read_metrics
from harl.rundir.files import PATTERN, list_checkpoints


@attrs.frozen
class Candidate:
    checkpoint: str
    """Relative to the run directory."""
    iteration: int
    env_steps: int | None
    eval_return: float | None
    """The run's own evaluation at that iteration (None: not evaluated then)."""


def candidates(run_dir: Path) -> list[Candidate]:
    """The run's kept checkpoints with the evaluation logged at each one's iteration."""
    rows = read_metrics(run_dir / "metrics.csv") if (run_dir / "metrics.csv").is_file() else []
    by_iteration = {row.get("iteration"): row for row in rows}
    out = []
    for path in list_checkpoints(run_dir):
        found = PATTERN.match(path.name)
        if found is None:  # list_checkpoints lists only names PATTERN matches
            continue
        iteration = int(found.group(1))
        row = by_iteration.get(str(iteration), {})
        value = number(row.get("eval_return"))
        steps = number(row.get("env_steps"))
        out.append(Candidate(str(path.relative_to(run_dir)), iteration, None if steps is None else int(steps), value))
    return out


def best_candidate(found: list[Candidate]) -> tuple[Candidate, str]:
    """The evaluated checkpoint with the highest eval_return (the later on a tie), else the newest."""
    evaluated = [c for c in found if c.eval_return is not None]
    if evaluated:
        return max(evaluated, key=lambda c: (c.eval_return, c.iteration)), "eval_return"
    return found[-1], "newest (no kept checkpoint's iteration has an evaluation)"


def evaluate_returns(run_dir: Path, checkpoint: Path, episodes: int) -> list[float]:
    """Per-episode returns of ``checkpoint``'s policy over ``episodes`` episodes, as ``harl eval``
    evaluates: the run's [evaluator] settings, its evaluation seed, the networks only.

    The one place that builds and runs an evaluation: to re-point at a public
    ``harl.evaluate(run_dir, episodes, checkpoint)`` (its ``EvalStats.returns``)."""
    from harl.compose import build_stages
    from harl.run.lifecycle import restore, spec_of_run
    from harl.rundir.checkpoint import load_checkpoint

    spec, _ = spec_of_run(run_dir)
    state = load_checkpoint(checkpoint)
    stages = build_stages(spec, str(run_dir / "pipeline.toml"))
    try:
        restore(stages, state, networks_only=True)
        return list(stages.evaluator.evaluate(episodes).returns)
    finally:
        stages.close()


def absolute_metric(run_dir: str | Path, factor: int = 10) -> dict[str, Any]:
    """Re-evaluate the run's best kept checkpoint on ``factor`` x ``[evaluator] episodes``
    episodes and write ``absolute_metric.json`` in the run directory; returns what it wrote."""
    from harl.run.lifecycle import spec_of_run

    run_dir = Path(run_dir)
    if factor < 1:
        raise HarlError(f"factor {factor}: expected a positive integer (the protocol uses 10)")
    spec, _ = spec_of_run(run_dir)
    found = candidates(run_dir)
    if not found:
        raise HarlError(f"{run_dir}: no checkpoint left to evaluate (checkpoints/ is empty)")
    best, chosen_by = best_candidate(found)
    episodes = factor * spec.evaluator.episodes
    returns = evaluate_returns(run_dir, run_dir / best.checkpoint, episodes)
    record = {
        "mean_return": float(np.mean(returns)), "std_return": float(np.std(returns)),
        "episodes": len(returns), "factor": factor, "evaluation_episodes": spec.evaluator.episodes,
        "deterministic": spec.evaluator.deterministic, **attrs.asdict(best), "chosen_by": chosen_by,
        "candidates": [attrs.asdict(c) for c in found],
        "note": (f"best of the {len(found)} checkpoints kept ([checkpoint] keep); checkpoints pruned "
                 "earlier were not candidates"),
        "returns": returns,
    }
    text = json.dumps(record, indent=1).encode("utf-8")
    atomic_write_bytes(run_dir / ABSOLUTE_FILE, lambda f: f.write(text))
    return record


def after_run(run_dir: str | Path, spec: Any, result: Any) -> dict[str, Any] | None:
    """``[evaluator] absolute_factor``: the absolute metric of a run that has just spent its
    budget (None when the option is off or the run stopped early: it is not over yet)."""
    factor = spec.evaluator.absolute_factor
    if not factor or result.stopped_by != "budget":
        return None
    return absolute_metric(run_dir, factor)
