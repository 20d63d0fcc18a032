"""Score matrices: the runs of each task (and of all tasks, normalised) as rliable's
(runs x tasks) arrays per algorithm, plus (runs x tasks x points) learning curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from harl.compare.bounds import Bound, bound_for
from harl.compare.runs import RunRecord

ALL_TASKS = "all tasks"


@attrs.frozen
class Section:
    """What one table, one set of figures, is computed over."""

    name: str
    """``env/task``, or ``all tasks`` (normalised scores of every task)."""
    score: str
    """``final`` or ``absolute``: which value of each run (see ``RunRecord.score``)."""
    normalised: bool
    tasks: tuple[str, ...]
    scores: dict[str, np.ndarray] = attrs.field(eq=False)
    """algorithm -> (runs, tasks) scores."""
    steps: np.ndarray | None = attrs.field(eq=False)
    """The env steps of the learning curves (None: the runs share no range of steps)."""
    curves: dict[str, np.ndarray] = attrs.field(eq=False)
    """algorithm -> (runs, tasks, len(steps)) evaluation returns, interpolated onto ``steps``."""
    gap_target: float | None
    """The optimality gap's threshold: 1 when normalised; None for raw returns (no target to fall short of)."""


def _grid(records: Sequence[RunRecord], points: int) -> np.ndarray | None:
    """``points`` env steps over the range every run's evaluations cover."""
    curves = [r.curve()[0] for r in records]
    low, high = max(x[0] for x in curves), min(x[-1] for x in curves)
    if high <= low:
        return None
    return np.linspace(low, high, points)


def _task_section(env: str, task: str, records: Sequence[RunRecord], score: str,
                  bound: Bound | None, points: int) -> Section | None:
    by_algorithm: dict[str, list[RunRecord]] = {}
    values: dict[str, list[float]] = {}
    for r in records:
        value = r.score(score)
        if value is not None:
            by_algorithm.setdefault(r.algorithm, []).append(r)
            values.setdefault(r.algorithm, []).append(value)
    if not by_algorithm:
        return None
    norm = bound.normalise if bound is not None else (lambda v: v)
    scores = {a: np.array([[norm(v)] for v in vs]) for a, vs in values.items()}
    steps = _grid([r for rs in by_algorithm.values() for r in rs], points)
    curves = {}
    if steps is not None:
        for a, rs in by_algorithm.items():
            curves[a] = np.stack([norm(np.interp(steps, *r.curve())) for r in rs])[:, None, :]
    target = 1.0 if bound is not None else None
    return Section(f"{env}/{task}", score, bound is not None, (f"{env}/{task}",), scores, steps, curves, target)


def _all_tasks(sections: Sequence[Section], score: str) -> tuple[Section | None, list[str]]:
    """The normalised tasks together: algorithms run on every task, as many runs per task as
    the task with the fewest (the lowest seeds kept)."""
    algorithms = sorted(set.intersection(*(set(s.scores) for s in sections)))
    notes = []
    left_out = sorted(set().union(*(s.scores for s in sections)) - set(algorithms))
    if left_out:
        notes.append(f"{ALL_TASKS} ({score}): {', '.join(left_out)} left out, not run on every task")
    if not algorithms:
        return None, notes
    scores, curves = {}, {}
    first = sections[0].steps
    same_steps = first is not None and all(s.steps is not None and np.array_equal(s.steps, first) for s in sections)
    for a in algorithms:
        n = min(len(s.scores[a]) for s in sections)
        if any(len(s.scores[a]) > n for s in sections):
            notes.append(f"{ALL_TASKS} ({score}): {a} has {n} runs on some task, so {n} runs of each task "
                         "are used (the lowest seeds)")
        scores[a] = np.concatenate([s.scores[a][:n] for s in sections], axis=1)
        if same_steps:
            curves[a] = np.concatenate([s.curves[a][:n] for s in sections], axis=1)
    if not same_steps:
        notes.append(f"{ALL_TASKS} ({score}): the tasks' runs cover different env steps, so no "
                     "sample-efficiency curve across tasks (see each task's)")
    tasks = tuple(t for s in sections for t in s.tasks)
    steps = sections[0].steps if same_steps else None
    return Section(ALL_TASKS, score, True, tasks, scores, steps, curves, 1.0), notes


def build_sections(records: Sequence[RunRecord], score: str, bounds: Mapping[str, Bound],
                   points: int = 25) -> tuple[list[Section], list[str]]:
    """One section per task, and one over all tasks when there are several and each has bounds."""
    by_task: dict[tuple[str, str], list[RunRecord]] = {}
    for r in records:
        by_task.setdefault((r.env, r.task), []).append(r)
    sections, notes = [], []
    for (env, task), members in by_task.items():
        section = _task_section(env, task, members, score, bound_for(bounds, env, task), points)
        if section is not None:
            sections.append(section)
    if len(sections) > 1:
        unbounded = [s.name for s in sections if not s.normalised]
        if unbounded:
            notes.append(f"no aggregate over all tasks: no --bounds for {', '.join(unbounded)} (returns of "
                         "different tasks are on different scales)")
        else:
            section, more = _all_tasks(sections, score)
            notes.extend(more)
            if section is not None:
                sections.append(section)
    return sections, notes
