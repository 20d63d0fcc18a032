"""A population of seeds trained in one process: ``harl train P --seeds 1-16 --vectorize``.

Every member is a whole run (``harl.run.lifecycle``: its run directory, pipeline.toml with
its seed, metrics.csv, checkpoints, lock, sinks) whose stages were built on a
``MemberView`` of one shared vector env.  Per iteration the population

- steps the shared env of ``S * E`` worlds once per vector step with the family's batched
  collection (``Family.population.collect``, e.g. ``harl.families.on_policy``): the members'
  actors (and on-policy critics) evaluated as one batched call each
  (``harl.nets.population``), each member's buffer filled by its own collector (``observe``
  on-policy, ``record`` off-policy: warm-up actions from the member's own generator);
- computes each member's returns with its own returns stage (``Trainer.compute_returns``);
- updates every member: on-policy in batched calls or one after another
  (``[run] population_update``, ``harl.population.update``), off-policy one after another
  with each member's own updater (replay sampling is per member).

That is ``Population.iterate``, the work of one iteration; the rest of it (the non-finite
check, where a member that fails stops alone, named, unsaved; evaluation; counters, rows,
callbacks, checkpoints; signals) is the Trainer's one loop, ``harl.trainer.drive``, run over
the members.

Randomness: networks start from each member's seed, and each member's agent orders and
minibatches come from its own generator, as in a separate run.  Action sampling draws
from one stream for the population (seeded from the first seed), and the shared env is
seeded from the first seed: a member is a valid run of its seed, not bit-identical to the
separate run, while the same population is bit-identical to itself and resumes exactly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from harl.buffers.records import StartRecord
from harl.compose import capped_threads, env_backend, resolve_device, seed_everything
from harl.envs.footprint import check_sizes
from harl.envs.population import MemberView, split_start
from harl.envs.protocol import VectorEnv, can_set_env_state, is_tensor_native
from harl.envs.vector import make_vector_env
from harl.errors import HarlError
from harl.logging.progress import ProgressView
from harl.population.check import check_population, family
from harl.population.update import batched_update, population_update
from harl.rundir.checkpoint import list_checkpoints
from harl.rundir.signals import hold_stops
from harl.sizes import allocating
from harl.trainer import Phase, Trainer, TrainResult, Work, calling, drive


def open_population(run_dirs: Sequence[Path], specs: Sequence[Any], source: str,
                    callbacks: Callable[[Path], Iterable[Any]] | None = None) -> tuple[list[Trainer], VectorEnv]:
    """Every member's Trainer (started, or resumed from its newest checkpoint) on one shared env.

    ``callbacks``: makes each member's callbacks (``harl.callbacks``) from its run directory, e.g.
    ``harl tune``'s pruning; one that returns True stops the whole population with checkpoints.
    """
    check_population(specs, source)
    spec, col = specs[0], specs[0].collector
    members, n_envs = len(specs), col.n_envs
    if specs[0].run.torch_threads > 0:
        threads, _ = capped_threads(specs[0].run.torch_threads, source)
        torch.set_num_threads(threads)
    # every member's envs and buffers against the memory available, before the shared env is built
    check_sizes(spec, source, resolve_device(spec.run.device, source), members=members)
    with allocating("the population's environments", source):
        venv = make_vector_env(spec.env, members * n_envs, seed=spec.run.seed * 1000, **env_backend(col))
    trainers: list[Trainer] = []
    try:
        from harl.run.lifecycle import resume_run, start_run

        for s, run_dir in enumerate(run_dirs):
            view = MemberView(venv, s, n_envs)
            hooks = list(callbacks(run_dir)) if callbacks is not None else []
            if list_checkpoints(run_dir):
                trainers.append(resume_run(run_dir, callbacks=hooks, venv=view))
            else:
                trainers.append(start_run(run_dir / "pipeline.toml", [], run_dir, hooks, fresh=False, venv=view)[0])
        done = {t.counters.iteration for t in trainers}
        if len(done) > 1:
            raise HarlError(f"{source}: --vectorize continues a population in step, but its members' newest "
                            f"checkpoints are of different iterations ({sorted(done)}); resume each member's "
                            "run directory on its own (harl train --resume SWEEP_DIR/RUN)")
        if not done - {0}:
            seed_everything(spec.run.seed)  # the population's sampling stream (a resume restored it)
    except BaseException:
        for trainer in trainers:
            trainer.close()
        venv.close()
        raise
    return trainers, venv


class Population:
    """S member Trainers stepped, updated and recorded together (see the module doc): the Trainer's
    loop (``harl.trainer.drive``) over the members, with this class's ``iterate`` as its work."""

    def __init__(self, trainers: Sequence[Trainer], venv: VectorEnv, labels: Sequence[str],
                 say: Callable[[str], Any] = print) -> None:
        self.trainers = list(trainers)
        self.venv = venv
        self.labels = list(labels)
        self.say = say
        spec = self.trainers[0].spec
        self.family = family(spec)
        self.n_envs = spec.collector.n_envs
        self.steps = self.trainers[0].stages.collector.steps_per_iteration
        """Env steps per member per iteration."""
        self.native = is_tensor_native(venv)
        self.batched = self.family.population.batched_update and batched_update(self.trainers[0].stages.device,
                                                                          spec.run.population_update)
        self.alive = [s for s, t in enumerate(self.trainers) if not t.finished]
        """The members still training (the loop's live list while it runs)."""
        self.started = False

    @property
    def size(self) -> int:
        return len(self.trainers)

    def _start(self) -> None:
        if self._resume():
            return
        restarts = [_collector(t).take_restart() for t in self.trainers]
        if all(r is not None for r in restarts):
            obs, state, avail = self.venv.restart([s for r in restarts for s in r])
        else:
            obs, state, avail = self.venv.reset(seed=self.trainers[0].spec.run.seed * 1000)
        for s, (o, st, av) in enumerate(split_start(obs, state, avail, self.size, self.n_envs)):
            _collector(self.trainers[s]).start(self.trainers[s].stages.buffer, StartRecord(o, st, av))
        self.started = True

    def _resume(self) -> bool:
        """Continue the members' checkpoints' episodes where every member saved its worlds' whole state
        and the env takes it (``set_state``): exact at any rollout length.  False: restart them."""
        takes = [getattr(_collector(t), "take_resume", None) for t in self.trainers]
        resumes = [None if take is None else take() for take in takes]
        if not can_set_env_state(self.venv) or any(r is None for r in resumes):
            return False
        self.venv.set_state([s for r in resumes for s in r["env_state"]])  # type: ignore[attr-defined, index]
        for t, r in zip(self.trainers, resumes):
            _collector(t).carry_in(t.stages.buffer, r["next"])  # type: ignore[index]
        self.started = True
        return True

    def collect(self) -> dict[int, Any]:
        """One iteration's steps of every live member (the family's batched collection); its
        finished episodes per member."""
        fresh = not self.started
        if fresh:
            self._start()
        return self.family.population.collect(self, fresh)

    def env_actions(self, actions: torch.Tensor) -> Any:
        """One agent's ``(M, E, k)`` actions of the live members as the env's ``(S * E, k)`` (zeros for
        members that stopped)."""
        if len(self.alive) != self.size:
            padded = actions.new_zeros((self.size, *actions.shape[1:]))
            padded[torch.as_tensor(self.alive, device=actions.device)] = actions
            actions = padded
        flat = actions.reshape(self.size * self.n_envs, *actions.shape[2:])
        return flat if self.native else flat.cpu().numpy()

    def iterate(self, phase: Phase, live: list[int]) -> dict[int, Work]:
        """The work of one iteration of every live member: batched collection, each member's
        returns, the members' updates (batched or one after another)."""
        self.alive = live
        start = time.perf_counter()
        rollouts = self.collect()
        hold_stops()  # as a run's: a second Ctrl-C from here waits for the iteration's rows
        for s in live:
            self.trainers[s].compute_returns()
        collected = time.perf_counter() - start
        phase.updating = True
        lead = self.trainers[live[0]]
        with calling("updater", None, lead.spec.updater):
            updates = population_update([self.trainers[s].stages.updater for s in live],
                                        [self.trainers[s].stages.buffer for s in live],
                                        progress=lead.progress,
                                        batched=self.batched)
        learned = time.perf_counter() - start
        return {s: Work(rollouts[s], update, collected, learned - collected) for s, update in zip(live, updates)}

    def train(self, quiet: bool = False, max_iterations: int | None = None) -> list[TrainResult]:
        """Iterations until the budget is spent, ``max_iterations`` more are done (a planned stop,
        as ``Trainer.train``'s) or a stop signal; one result per member."""
        first = self.trainers[0]
        spec, total = first.spec, first.total_iterations
        last = first.last_iteration(max_iterations)
        view = ProgressView(total * self.steps * self.size,
                            sum(t.counters.env_steps for t in self.trainers),
                            spec.logging.progress and not quiet, spec.logging.log_every)
        return drive(self.trainers, self.iterate, view, last,
                     say=lambda s, why: self.say(f"{self.labels[s]}: {why}"))

    def close(self) -> None:
        for trainer in self.trainers:
            trainer.close()
        self.venv.close()

    def __enter__(self) -> Population:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _collector(trainer: Trainer) -> Any:
    """A member's collector as its family built it (an on- or off-policy collector): the population
    starts, restarts and resumes it itself (``start``, ``take_restart``, ``carry_in``), which the
    ``Collector`` protocol the Trainer steps does not name."""
    return trainer.stages.collector
