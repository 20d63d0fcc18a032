"""A sweep's seeds as one population in this process (``--vectorize``; ``harl.population``)."""

from __future__ import annotations

from harl.errors import HarlError
from harl.sweep.state import Display, TrialState


def run_states(states: list[TrialState], display: Display, quiet: bool) -> None:
    """Train ``states``' runs together; each ends finished, stopped or failed as a separate run would."""
    from harl.compare.absolute import after_run
    from harl.population.driver import Population, open_population

    if not states:
        return
    source = str(states[0].run_dir / "pipeline.toml")
    try:
        trainers, venv = open_population([s.run_dir for s in states], [s.spec for s in states], source)
    except HarlError as exc:
        for state in states:
            state.status, state.message = "failed", str(exc)
        raise
    for state, trainer in zip(states, trainers):
        state.started_at.append(trainer.counters.iteration)
        state.status = "running"
    with Population(trainers, venv, [s.label for s in states], display.say) as population:
        results = population.train(quiet)
    for s, (state, result) in enumerate(zip(states, results)):
        if s in population.failed:
            state.status, state.message = "failed", population.failed[s]
            continue
        state.status = "stopped" if result.interrupted else "finished"
        if state.status == "finished":
            after_run(state.run_dir, state.spec, result)  # [evaluator] absolute_factor
