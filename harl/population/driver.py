"""A population of seeds trained in one process: ``harl train P --seeds 1-16 --vectorize``.

Every member is a whole run (``harl.run.lifecycle``: its run directory, pipeline.toml with
its seed, metrics.csv, checkpoints, lock, sinks) whose stages were built on a
``MemberView`` of one shared vector env.  Per iteration the population

- steps the shared env of ``S * E`` worlds once per vector step, the members' actors (and
  on-policy critics) evaluated as one batched call each (``harl.population.stack``), each
  member's buffer filled by its own collector (``observe`` on-policy, ``record``
  off-policy: warm-up actions from the member's own generator);
- computes each member's returns with its own returns stage;
- updates every member: on-policy in batched calls or one after another
  (``[run] population_update``, ``harl.population.update``), off-policy one after another
  with each member's own updater (replay sampling is per member);
- then does, per member, what ``harl.trainer.Trainer`` does after an update: the
  non-finite check (a member that fails it stops alone, named, unsaved), counters,
  evaluation on the member's own eval envs, its metrics row, its checkpoints.

Randomness: networks start from each member's seed, and each member's agent orders and
minibatches come from its own generator, as in a separate run.  Action sampling draws
from one stream for the population (seeded from the first seed), and the shared env is
seeded from the first seed: a member is a valid run of its seed, not bit-identical to the
separate run, while the same population is bit-identical to itself and resumes exactly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harl.buffers.records import StartRecord
from harl.collect.on_policy import Acting, CollectStats
from harl.compose import resolve_device, seed_everything
from harl.envs.protocol import VectorEnv, is_tensor_native
from harl.envs.vector import make_vector_env
from harl.errors import HarlError
from harl.finite import NonFiniteUpdateError, check_update
from harl.logging.progress import ProgressView
from harl.logging.sink import close_sinks
from harl.population.check import check_population, check_population_memory, check_population_replay, family
from harl.population.envs import MemberView, split_start, split_step
from harl.population.stack import Stack
from harl.population.update import batched_update, population_update
from harl.rundir.checkpoint import list_checkpoints
from harl.rundir.signals import GracefulStop
from harl.sizes import allocating, replay_bytes_per_transition, rollout_bytes_per_step
from harl.trainer import Trainer, TrainResult, calling, rng_state


def open_population(run_dirs: Sequence[Path], specs: Sequence[Any], source: str) -> tuple[list[Trainer], VectorEnv]:
    """Every member's Trainer (started, or resumed from its newest checkpoint) on one shared env."""
    check_population(specs, source)
    spec, col = specs[0], specs[0].collector
    members, n_envs = len(specs), col.n_envs
    if specs[0].run.torch_threads > 0:
        torch.set_num_threads(specs[0].run.torch_threads)
    with allocating("the population's environments", source):
        venv = make_vector_env(spec.env, members * n_envs, col.backend, col.workers, seed=spec.run.seed * 1000,
                               restart_workers=col.restart_workers, step_timeout_s=col.step_timeout_s)
    trainers: list[Trainer] = []
    try:
        state_dim, device = int(np.prod(venv.state_space.shape)), resolve_device(spec.run.device, source)
        if family(spec) == "off_policy":
            per_transition = replay_bytes_per_transition(venv.observation_spaces, venv.action_spaces, state_dim,
                                                         venv.state_space)
            check_population_replay(per_transition, spec.buffer.capacity, members, source, device)
        else:
            per_step = rollout_bytes_per_step(venv.observation_spaces, venv.action_spaces, state_dim,
                                              spec.critic.state_type == "FP", 0, 0, venv.state_space)
            check_population_memory(per_step, col.rollout_length, n_envs, members, source, device)
        from harl.run.lifecycle import resume_run, start_run

        for s, run_dir in enumerate(run_dirs):
            view = MemberView(venv, s, n_envs)
            if list_checkpoints(run_dir):
                trainers.append(resume_run(run_dir, venv=view))
            else:
                trainers.append(start_run(run_dir / "pipeline.toml", [], run_dir, fresh=False, venv=view)[0])
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


def _release(trainer: Trainer) -> None:
    """A member's sinks closed (naming its newest checkpoint) and its run directory unlocked."""
    close_sinks(trainer.sinks, trainer.newest_checkpoint())
    trainer.sinks = []
    trainer.release()


class Population:
    """S member Trainers stepped, updated and recorded together (see the module doc)."""

    def __init__(self, trainers: Sequence[Trainer], venv: VectorEnv, labels: Sequence[str],
                 say: Callable[[str], Any] = print) -> None:
        self.trainers = list(trainers)
        self.venv = venv
        self.labels = list(labels)
        self.say = say
        spec = self.trainers[0].spec
        self.n_envs = spec.collector.n_envs
        self.steps = self.trainers[0].stages.collector.steps_per_iteration
        """Env steps per member per iteration."""
        self.native = is_tensor_native(venv)
        self.off_policy = family(spec) == "off_policy"
        self.batched = not self.off_policy and batched_update(self.trainers[0].stages.device,
                                                              spec.run.population_update)
        self.alive = [s for s, t in enumerate(self.trainers) if not t.finished]
        self.failed: dict[int, str] = {}
        self.started = False

    @property
    def size(self) -> int:
        return len(self.trainers)

    def _start(self) -> None:
        restarts = [t.stages.collector.take_restart() for t in self.trainers]
        if all(r is not None for r in restarts):
            obs, state, avail = self.venv.restart([s for r in restarts for s in r])
        else:
            obs, state, avail = self.venv.reset(seed=self.trainers[0].spec.run.seed * 1000)
        for s, (o, st, av) in enumerate(split_start(obs, state, avail, self.size, self.n_envs)):
            stages = self.trainers[s].stages
            stages.collector.start(stages.buffer, StartRecord(o, st, av))
        self.started = True

    def collect(self) -> dict[int, CollectStats]:
        """One iteration's steps of every live member; its finished episodes per member."""
        fresh = not self.started
        if fresh:
            self._start()
        return self._collect_off_policy() if self.off_policy else self._collect_on_policy(fresh)

    @torch.no_grad()
    def _collect_on_policy(self, fresh: bool) -> dict[int, CollectStats]:
        alive = self.alive
        members = [self.trainers[s].stages for s in alive]
        if not fresh:
            for m in members:
                m.buffer.roll_over()
        n_agents = self.venv.n_agents
        actors = [Stack([m.team.actor(i) for m in members]) for i in range(n_agents)]
        critic = Stack([m.critic for m in members])
        episodes: dict[int, list[dict[str, Any]]] = {s: [] for s in alive}
        full = len(alive) == self.size
        for t in range(self.trainers[0].spec.collector.rollout_length):
            inputs = [m.buffer.inputs(t) for m in members]
            actions, log_probs = [], []
            for i in range(n_agents):
                obs = torch.stack([x.obs[i] for x in inputs])
                avail = None if inputs[0].avail[i] is None else torch.stack([x.avail[i] for x in inputs])
                a, lp = actors[i].call("act", obs, avail, random=True, pick=2)
                actions.append(a)
                log_probs.append(lp)
            values = critic.call("value", torch.stack([x.state for x in inputs]))
            step = self.venv.step([self._env_actions(a, full) for a in actions])
            parts = split_step(step, self.size, self.n_envs)
            for j, s in enumerate(alive):
                m = members[j]
                acting = Acting([a[j] for a in actions], [lp[j] for lp in log_probs], values[j], None, None)
                m.buffer.insert(m.collector.observe(acting, parts[s]))
                episodes[s].extend(parts[s].episode_infos)
        for m in members:
            m.collector.finish(m.buffer)
        return {s: CollectStats(self.steps, episodes[s]) for s in alive}

    @torch.no_grad()
    def _collect_off_policy(self) -> dict[int, CollectStats]:
        """``train_interval`` vector steps; warm-up actions from each member's own generator, then
        each agent's explore call batched over the members (``harl.population.stack``)."""
        alive, E = self.alive, self.n_envs
        members = [self.trainers[s].stages for s in alive]
        lead = members[0].collector
        for m in members:
            m.collector.begin()
        actors = [Stack([m.team.actors[i] for m in members]) for i in range(self.venv.n_agents)]
        episodes: dict[int, list[dict[str, Any]]] = {s: [] for s in alive}
        full = len(alive) == self.size
        for _ in range(lead.config.train_interval):
            inputs = [m.collector.inputs() for m in members]
            if lead.warming_up:
                drawn = [m.collector.random_actions(masks) for m, (_, masks) in zip(members, inputs)]
                actions = [torch.stack(per_agent) for per_agent in zip(*drawn)]
            else:
                actions = [actor.call("explore", torch.stack([obs[i] for obs, _ in inputs]),
                                      None if inputs[0][1][i] is None else torch.stack([mask[i] for _, mask in inputs]),
                                      lead.env_steps, random=True)
                           for i, actor in enumerate(actors)]
            env_actions = [self._env_actions(a, full) for a in actions]
            parts = split_step(self.venv.step(env_actions), self.size, E)
            for m, s in zip(members, alive):
                mine = [a[s * E:(s + 1) * E] for a in env_actions]
                episodes[s].extend(m.collector.record(mine, parts[s], m.buffer))
        for m in members:
            m.collector.end()
        return {s: CollectStats(self.steps, episodes[s]) for s in alive}

    def _env_actions(self, actions: torch.Tensor, full: bool) -> Any:
        """One agent's ``(M, E, k)`` actions of the live members as the env's ``(S * E, k)`` (zeros for
        members that stopped)."""
        if not full:
            padded = actions.new_zeros((self.size, *actions.shape[1:]))
            padded[torch.as_tensor(self.alive, device=actions.device)] = actions
            actions = padded
        flat = actions.reshape(self.size * self.n_envs, *actions.shape[2:])
        return flat if self.native else flat.cpu().numpy()

    def _stop_member(self, s: int, why: str) -> None:
        trainer = self.trainers[s]
        self.say(f"{self.labels[s]}: {why}")
        self.failed[s] = why
        self.alive.remove(s)
        _release(trainer)

    def _iteration(self, last: int, total: int) -> tuple[list[tuple[Trainer, Any, Any, Any]], float, float]:
        """Collect, returns, update; then per live member the non-finite check and, where due, its
        evaluation.  No counter moves here (a second Ctrl-C inside leaves every member as saved).
        (trainer, rollout, update stats, evaluation) per member that passed, and the seconds
        collection and the update took."""
        spec = self.trainers[0].spec
        start = time.perf_counter()
        rollouts = self.collect()
        for s in self.alive:
            st = self.trainers[s].stages
            with calling("returns", st.returns, spec.returns):
                st.returns.compute(st.buffer)
        collected = time.perf_counter() - start
        live = list(self.alive)
        iteration = self.trainers[live[0]].counters.iteration
        with calling("updater", None, spec.updater):
            updates = population_update([self.trainers[s].stages.updater for s in live],
                                        [self.trainers[s].stages.buffer for s in live],
                                        progress=iteration / total, batched=self.batched)
        learned = time.perf_counter() - start
        done = []
        for s, update in zip(live, updates):
            trainer = self.trainers[s]
            try:
                check_update(update.row(), iteration + 1, trainer.stages, trainer.run_dir)
            except NonFiniteUpdateError as exc:
                self._stop_member(s, str(exc))
                continue
            evaluation = None
            if trainer._should_evaluate(iteration + 1, last):
                with calling("evaluator", trainer.stages.evaluator, None):
                    evaluation = trainer.stages.evaluator.evaluate()
            done.append((trainer, rollouts[s], update, evaluation))
        return done, collected, learned - collected

    def _commit(self, done: list[tuple[Trainer, Any, Any, Any]], seconds: float, collect_s: float,
                update_s: float) -> list[dict[str, Any]]:
        """Each member's counters, RNG snapshot, wall time and metrics row, as its Trainer keeps
        them; the rows written."""
        snapshot = rng_state()
        rows = []
        for trainer, rollout, update, evaluation in done:
            c = trainer.counters
            c.iteration += 1
            c.env_steps += rollout.env_steps
            c.episodes += len(rollout.episodes)
            c.wall_time += seconds
            if evaluation is not None:
                trainer.last_eval = evaluation
            trainer._rng_at_iteration_end = snapshot
            trainer.stage_times.add(collect_s, update_s, seconds - collect_s - update_s)
            row = trainer._row(rollout, update, evaluation, rollout.env_steps / (collect_s + update_s))
            for sink in trainer.sinks:
                sink.write(row)
            rows.append(row)
        return rows

    def train(self, quiet: bool = False, max_iterations: int | None = None) -> list[TrainResult]:
        """Iterations until the budget is spent, ``max_iterations`` more are done (a planned stop,
        as ``Trainer.train``'s) or a stop signal; one result per member."""
        first = self.trainers[0]
        spec, total = first.spec, first.total_iterations
        last = total if max_iterations is None else min(total, first.counters.iteration + max_iterations)
        view = ProgressView(total * self.steps * self.size,
                            sum(t.counters.env_steps for t in self.trainers),
                            spec.logging.progress and not quiet, spec.logging.log_every)
        stop = GracefulStop(view.message)
        saved = {s: t.counters.iteration for s, t in enumerate(self.trainers)}
        interrupted = False
        try:
            with stop:
                while self.alive and self.trainers[self.alive[0]].counters.iteration < last:
                    start = time.perf_counter()
                    done, collect_s, update_s = self._iteration(last, total)
                    rows = self._commit(done, time.perf_counter() - start, collect_s, update_s)
                    if done:
                        lead = done[0][0]
                        shown = {**rows[0], "steps_per_s": sum(r["steps_per_s"] for r in rows),
                                 "env_steps": sum(t.counters.env_steps for t in self.trainers)}
                        view.update(shown, lead.last_eval.mean_return if lead.last_eval else None,
                                    lead.stage_times.shares())
                    for trainer, *_ in done:
                        it = trainer.counters.iteration
                        if it % spec.checkpoint.every_iterations == 0 or it == last:
                            trainer.save()
                            saved[self.trainers.index(trainer)] = it
                    self.alive = [s for s in self.alive if not self.trainers[s].finished]
                    if stop.requested and self.alive:
                        interrupted = True
                        break
        except KeyboardInterrupt:
            interrupted = True
        finally:
            stop.shutting_down()
            try:
                with stop:
                    for s, trainer in enumerate(self.trainers):
                        if s not in self.failed and trainer.counters.iteration > saved[s]:
                            trainer.save()
            finally:
                view.close()
                for s, trainer in enumerate(self.trainers):
                    if s not in self.failed:
                        _release(trainer)
        planned = "max_iterations" if last < total else "budget"
        return [TrainResult(t.counters, t.last_eval, interrupted and s not in self.failed and not t.finished,
                            t.run_dir, stop.signum, "signal" if interrupted else planned)
                for s, t in enumerate(self.trainers)]

    def close(self) -> None:
        for trainer in self.trainers:
            trainer.close()
        self.venv.close()

    def __enter__(self) -> Population:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

